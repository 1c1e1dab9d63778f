import ArgumentParser
import Foundation
import Tessera

/// `tessera get`: download inputs.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandMain.subcommand(CommandConfiguration(
        commandName: "get",
        abstract: "Download URLs and plugin inputs.",
        discussion: """
            Plain URLs are saved under their own name (the server's Content-Disposition name when \
            it sends one), made unique with a number, never overwriting a file. Manifests (.mpd, \
            .m3u8, .meta4) are recognised by their name or Content-Type. Ctrl-C pauses; the same \
            command run again continues where it stopped. A live stream (HLS without \
            #EXT-X-ENDLIST, a dynamic MPD) is recorded until it ends, until --live-duration, or \
            until Ctrl-C, which ends the recording with a playable (merged) file.
            """
    ))

    @OptionGroup var input: InputOptions
    @OptionGroup var download: DownloadOptions
    @OptionGroup var network: NetworkOptions
    @OptionGroup var state: StateOptions
    @OptionGroup var output: DisplayOptions
    @OptionGroup var merge: MergeOptions
    @OptionGroup var live: LiveOptions
    @OptionGroup var config: ConfigOptions

    @Flag(name: .customLong("dry-run"), help: "Resolve the inputs and show what would be downloaded (as `tessera resolve`), without downloading.")
    var dryRun = false

    func run() async throws {
        if dryRun {
            var resolve = try ResolveCommand.parse([])
            resolve.input = input
            resolve.network = network
            resolve.json = output.json
            try await resolve.run()
            return
        }
        try await DownloadRun(
            input: input, download: download, network: network, state: state, output: output, mode: .download, merge: merge,
            live: live
        ).execute()
    }
}

/// `tessera cache`: fill the segment cache (ZZDownloader's startCache).
struct CacheCommand: AsyncParsableCommand {
    static let configuration = CommandMain.subcommand(CommandConfiguration(
        commandName: "cache",
        abstract: "Fetch inputs' segments into the segment cache only; a later `get` completes from the cache."
    ))

    @OptionGroup var input: InputOptions
    @OptionGroup var download: DownloadOptions
    @OptionGroup var network: NetworkOptions
    @OptionGroup var state: StateOptions
    @OptionGroup var output: DisplayOptions
    /// Accepted (and checked) so that one configuration file serves `get` and `cache`; the
    /// cache has no files to merge.
    @OptionGroup var merge: MergeOptions
    @OptionGroup var config: ConfigOptions

    func validate() throws {
        if state.noCache { throw ValidationError("`cache` needs the cache: drop --no-cache") }
    }

    func run() async throws {
        try await DownloadRun(input: input, download: download, network: network, state: state, output: output, mode: .cacheOnly).execute()
    }
}

/// Options of commands that download.
struct DownloadOptions: ParsableArguments {
    @Option(
        name: [.customShort("d"), .customLong("dir"), .customShort("P"), .customLong("paths")],
        help: ArgumentHelp("The download directory (aria2c's -d, yt-dlp's -P).", valueName: "dir"))
    var output: String = "downloads"

    @Option(
        name: [.customShort("o"), .customLong("output")],
        help: ArgumentHelp(
            "Names the files by a template, as yt-dlp's -o: %(title)s.%(ext)s; fields title, id, format_id, ext, name, part, type (a value without %( is still the download directory, for one release: use -d).",
            valueName: "template"))
    var outputTemplate: String?

    /// The download root: `-d`, or (deprecated) an `-o` value that is not a template.
    var root: String {
        if let outputTemplate, !outputTemplate.contains("%(") { return outputTemplate }
        return output
    }

    /// The `-o` template, when it is one.
    var template: OutputNameTemplate? {
        guard let outputTemplate, outputTemplate.contains("%(") else { return nil }
        return try? OutputNameTemplate(outputTemplate)
    }

    @Flag(name: [.customShort("c"), .customLong("continue")], help: ArgumentHelp("Accepted as wget, curl and aria2c take it: resuming is always on."))
    var continues = false

    @Option(
        name: .customShort("j"),
        help: ArgumentHelp(
            "Tasks resolving or queueing segments at once; a task whose last segments are all in flight lets the next start.",
            valueName: "n"))
    var jobs: Int = 3

    @Option(name: .customShort("N"), help: ArgumentHelp("Segment transfers at once, over all tasks.", valueName: "n"))
    var segments: Int = 16

    @Option(
        name: [.customShort("x"), .customLong("max-connection-per-file")],
        help: ArgumentHelp(
            "Connections one large file may use (aria2c's -x); its first response decides whether it is split.",
            valueName: "n"))
    var connectionsPerFile: Int = SplitPolicy().maxConnections

    func validate() throws {
        guard jobs >= 1 else { throw ValidationError("-j must be at least 1") }
        guard segments >= 1 else { throw ValidationError("-N must be at least 1") }
        guard connectionsPerFile >= 1 else { throw ValidationError("-x must be at least 1") }
        if let outputTemplate, outputTemplate.contains("%(") {
            do {
                try OutputNameTemplate(outputTemplate).check()
            } catch {
                throw ValidationError(error.message)
            }
        }
    }
}

/// The body of `get` and `cache`.
struct DownloadRun {
    var input: InputOptions
    var download: DownloadOptions
    var network: NetworkOptions
    var state: StateOptions
    var output: DisplayOptions
    var mode: DownloadTaskMode
    /// How `get` merges a finished task's tracks or parts (`nil`: `cache`, which writes none).
    var merge: MergeOptions? = nil
    /// How `get` records live streams.
    var live: LiveOptions? = nil

    func execute() async throws {
        TerminalLogHandler.level.withLock { $0 = output.logLevel }
        // Before the session starts its threads: they inherit the class of the thread that
        // starts them.
        BatchScheduling.applyToProcess()
        let inputs = try input.allInputs()
        let arguments = try input.parsedPluginArguments()
        let format = try input.formatSelector()
        let display = Display(json: output.json, quiet: output.quiet)
        if let problem = writableDirectoryProblem(absolute(download.root)) {
            display.standardError("tessera: cannot write to the download directory \(absolute(download.root)): \(problem)")
            throw ExitCode(1)
        }
        if let value = download.outputTemplate, download.template == nil, display.mode != .quiet {
            display.standardError(
                "tessera: note: -o \(Terminal.clean(value)) is taken as the download directory for one more release; use -d for that (-o names files: -o '%(title)s.%(ext)s')")
        }
        let settings = Session.Settings(
            downloadRoot: download.root, jobs: download.jobs, segments: download.segments,
            connectionsPerFile: download.connectionsPerFile, network: network, state: state,
            outputTemplate: download.template, merging: mode == .download ? merge?.policy : nil, live: live)
        var opened: Session?
        for _ in 0..<TaskSelection.attempts where opened == nil {
            do {
                opened = try await Session.open(settings)
            } catch where StateLock.isBusy(error) {
                // Another tessera runs on this state directory: it takes the inputs (when it
                // ends before it takes them, they run here).
                let code = try await Handoff(
                    inputs: inputs, pluginArguments: input.pluginArguments, format: input.format, cacheOnly: mode == .cacheOnly,
                    state: state, downloadRoot: absolute(download.root), display: display
                ).run()
                guard let code else { continue }
                if code != 0 { throw ExitCode(code) }
                return
            } catch {
                display.standardError("tessera: \(describe(error))")
                throw ExitCode(1)
            }
        }
        guard let session = opened else {
            display.standardError("tessera: \(TaskSelection.changedHands(state).message)")
            throw ExitCode(1)
        }
        let report = try await session.manager.restore(resuming: false)
        // Subscribed after the restore: the events are this run's, not the store's history.
        let runner = CommandRun(session: session, display: display)
        // Taken from now on: the events of tasks added below are shown and counted as they come.
        let watch = CommandRun.Watch(manager: session.manager, display: display)
        for (id, error) in report.skipped {
            display.standardError("tessera: the stored task \(id) is skipped: \(error.message)")
        }
        let resolver = InputResolver(
            registry: session.registry, context: session.resolveContext, arguments: arguments, format: format)
        var ids: [DownloadTaskID] = []
        var known = Set<DownloadTaskID>()
        var inputErrors = 0
        // Ctrl-C (or SIGTERM) while inputs are expanded (a Metalink or a manifest being fetched)
        // pauses like one during the downloads: what was added stays, and the run ends with 130.
        let interrupt = InterruptSignal.shared
        interrupt.install()
        // Inputs that need no request become tasks in batches (one call to the manager each);
        // the first batches are small, so the first downloads start at once.
        var batch: [(text: String, entity: DownloadBaseEntity)] = []
        var batches = GrowingBatches(largest: 256)
        func startBatch() async {
            guard !batch.isEmpty else { return }
            let results = await session.manager.start(contentsOf: batch.map(\.entity), cacheOnly: mode == .cacheOnly)
            for ((text, _), result) in zip(batch, results) {
                switch result {
                case .success(let info):
                    if known.insert(info.id).inserted { ids.append(info.id) }
                case .failure(let error):
                    display.inputError(text, error)
                    inputErrors += 1
                }
            }
            batch.removeAll(keepingCapacity: true)
        }
        for text in inputs {
            if interrupt.fired { break }
            do {
                if let entities = try resolver.immediateEntities(for: text) {
                    batch += entities.map { (text, $0) }
                    if batches.add() { await startBatch() }
                    continue
                }
                await startBatch()
                guard let entities = try await interrupt.unlessInterrupted({ try await resolver.entities(for: text) }) else { break }
                // A long list (a Metalink of 100,000 files) goes in batches: what each call
                // returns and tells is taken in before the next.
                for start in stride(from: 0, to: entities.count, by: 1_000) {
                    if interrupt.fired { break }
                    batch += entities[start..<min(start + 1_000, entities.count)].map { (text, $0) }
                    await startBatch()
                }
            } catch {
                display.inputError(text, error as? DownloadError ?? DownloadError(.transport, describe(error)))
                inputErrors += 1
            }
        }
        await startBatch()
        // Every input in the store now, not at the next tick: `tessera pause NAME` from another
        // shell finds the task as soon as this one has started it.
        await session.manager.flushStore()
        let outcome = await runner.run(ids, watch: watch, inputErrors: inputErrors)
        await runner.summarize(outcome)
        await session.close()
        // Thousands of finished tasks are not taken apart one by one: the process ends next.
        Session.keepUntilExit(session)
        if outcome.exitCode != 0 { throw ExitCode(outcome.exitCode) }
    }
}

/// Why `path` cannot be used as a download directory (creating it when missing), or `nil`.
/// The cause is the system's own words for the first component that fails (`Not a directory`,
/// `Permission denied`, `Read-only file system`).
package func writableDirectoryProblem(_ path: String) -> String? {
    var prefix = path.hasPrefix("/") ? "" : "."
    for component in path.split(separator: "/") {
        prefix += "/" + component
        var status = stat()
        if stat(prefix, &status) == 0 {
            if status.st_mode & S_IFMT != S_IFDIR { return "\(prefix) is not a directory" }
            continue
        }
        guard errno == ENOENT else { return "\(prefix): \(String(cString: strerror(errno)))" }
        if mkdir(prefix, 0o755) != 0 && errno != EEXIST { return "cannot create \(prefix): \(String(cString: strerror(errno)))" }
    }
    guard access(path, W_OK | X_OK) == 0 else { return String(cString: strerror(errno)) }
    return nil
}
