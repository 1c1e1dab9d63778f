import Logging

extension DownloadTaskManager {
    /// How a manager schedules, retries and reports.
    public struct Configuration: Sendable {
        /// Where outputs go; entities' destination directories are relative to it.
        public var downloadRoot: String = "downloads"
        /// At most this many tasks resolve or download at once.
        public var maxConcurrentTasks: Int = 3
        /// At most this many segment transfers at once, over all tasks.
        public var maxConcurrentSegments: Int = 16
        /// At most this many segment transfers at once to one host (`host:port`); `nil` for
        /// ``maxConcurrentSegments``.
        public var maxConcurrentSegmentsPerHost: Int?
        /// Retries, backoff and re-resolves.
        public var retry = RetryPolicy()
        /// At most one progress event per task per this interval.
        public var progressInterval: Duration = .milliseconds(500)
        /// Header fields sent with every request (manifests and segments).
        public var headers = HTTPHeaders()
        /// At most this many segments in a manifest.
        public var maxSegments: Int = 1_000_000
        /// At most this many bytes in a manifest document.
        public var maxManifestSize: Int = 32 << 20
        /// How plain downloads are split.
        public var splitting = SplitPolicy()
        /// How retry delays are waited out (tests inject a recording sleeper).
        public var sleeper: any DownloadSleeper = ContinuousSleeper()
        /// Seeds the jitter of retry delays, for reproducible tests; `nil` seeds from the system.
        public var randomSeed: UInt64?
        /// How often changes are written to the store (in one batch).
        public var storeInterval: Duration = .milliseconds(200)
        /// The least time between two writes of a task's journal while bytes arrive: what a
        /// crash can cost, at most, of each connection's bytes (5 ms: 0.2 MiB at 40 MiB/s; a
        /// commit is one `pwrite` of a few hundred bytes, no `fsync`).
        public var journalCommitInterval: Duration = .milliseconds(5)
        /// When to warn about disk space and when to stop; `nil` turns the checks off.
        public var diskSpace: DiskSpacePolicy? = DiskSpacePolicy()
        /// Tells when the network goes and comes back; `nil` for none (then only probes tell).
        public var networkMonitor: (any NetworkMonitor)?
        /// Whether tasks may start on a network the monitor reports as metered; either way a
        /// ``DownloadNotice/Kind/meteredNetwork`` notice tells when one does (or is held back).
        public var allowsMeteredNetwork = true
        /// How long tasks waiting for the network wait between probes of their hosts: doubling
        /// from the first value up to the second.
        public var networkProbeBackoff: (initial: Duration, maximum: Duration) = (.seconds(1), .seconds(60))
        /// The longest a task waits in `interrupted(network)` for its hosts before it fails with
        /// the error that sent it there; `nil` (the default) waits as long as it takes, which suits
        /// an app on a phone. A command line wants a bound: a refused connection then fails like
        /// curl's instead of waiting for a server that may never come.
        public var maxNetworkWait: Duration?
        /// The longest a manifest, an API answer or a decryption key may take to arrive, whole
        /// (a server trickling it fails the fetch; the task retries as for any transient error).
        public var documentTimeout: Duration = .seconds(60)
        /// Names every downloaded output by a template (yt-dlp's `-o`) instead of the plugin's
        /// name, inside the entity's destination directory (the download root for the entities
        /// of `tessera get`). `nil`: the plugins' names.
        public var outputNameTemplate: OutputNameTemplate?
        /// How a completed task's files become one: a video and its audio, or the parts of one
        /// video, merged with ffmpeg (looked up on `PATH`) as soon as the task completes, as
        /// `tessera get` and `tessera serve` do (see ``MergePolicy``); the task's outputs are then
        /// the merged file. `nil` keeps every file as downloaded (their `--no-merge`).
        public var merging: MergePolicy? = MergePolicy()

        /// How live streams are recorded: where a recording joins, how long it lasts, the clock.
        public var live = LiveRecordingPolicy()
        /// Who may write the tasks' journals and files under ``downloadRoot`` when other
        /// processes share it (a fleet's leases); `nil` (the default): this manager alone.
        package var writeFence: (any TaskWriteFence)?
        /// The transfer limit of every host that has no limit of its own
        /// (``DownloadTaskManager/setHostLimit(_:for:)``); `nil` (the default): only
        /// ``maxConcurrentSegmentsPerHost``. A fleet under a fleet-wide per-host limit sets 0: a
        /// host gets transfers only once its worker holds slots for it.
        package var unlistedHostLimit: Int?
        /// Where to log.
        public var logger = Logger(label: "tessera.manager")

        /// The defaults.
        public init() {}

        /// The defaults with another download root.
        public init(downloadRoot: String) {
            self.downloadRoot = downloadRoot
        }
    }
}
