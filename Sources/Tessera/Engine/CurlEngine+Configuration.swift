import CoreMetrics
import Foundation
import Logging

extension CurlEngine {
    /// How the engine connects, limits and identifies itself. Every field has a safe default.
    public struct Configuration: Sendable {
        /// How proxies are chosen.
        public enum Proxy: Sendable, Hashable {
            /// libcurl's default: the `http_proxy`, `https_proxy`, `all_proxy` and `no_proxy`
            /// environment variables.
            case environment
            /// No proxy, whatever the environment says.
            case none
            /// This proxy, e.g. `http://proxy:3128` or `socks5h://127.0.0.1:1080`.
            case url(String)
        }

        /// At most this many connections open at once, across all hosts (`CURLMOPT_MAX_TOTAL_CONNECTIONS`).
        /// Transfers beyond it wait for a connection.
        public var maxConnections: Int = 16
        /// At most this many connections to one host (`CURLMOPT_MAX_HOST_CONNECTIONS`).
        public var maxConnectionsPerHost: Int = 16
        /// At most this many transfers handed to libcurl at once; the rest wait in the engine's
        /// queue, in submission order, and cost no libcurl resources while they wait.
        public var maxActiveTransfers: Int = 64
        /// One limit shared by every transfer, in bytes per second; `nil` for none.
        public var globalRateLimit: Int64?
        /// How long establishing a connection may take.
        public var connectTimeout: Duration = .seconds(30)
        /// A transfer slower than ``lowSpeedLimit`` bytes per second for this long is aborted
        /// with ``DownloadError/Code/timeout``. Time paused by a rate limit does not count.
        public var lowSpeedTime: Duration = .seconds(60)
        /// See ``lowSpeedTime``.
        public var lowSpeedLimit: Int = 1
        /// At most this many redirects are followed.
        public var maxRedirects: Int = 10
        /// Whether TLS peers must present a certificate the system trusts. Turn off only for
        /// local testing.
        public var verifiesTLSPeer: Bool = true
        /// A file of trusted CA certificates instead of the system's.
        public var caBundlePath: String?
        /// The proxy.
        public var proxy: Proxy = .environment
        /// The `User-Agent` sent with every request.
        public var userAgent: String = "Tessera/\(Tessera.version)"
        /// Header fields sent with every request; a request's own fields replace them by name.
        public var defaultHeaders: HTTPHeaders = HTTPHeaders()
        /// At most one progress callback per transfer per this interval, plus a final one.
        public var progressInterval: Duration = .milliseconds(200)
        /// The receive buffer of each transfer, in bytes (`CURLOPT_BUFFERSIZE`; libcurl accepts up to
        /// 512 KiB). Large buffers mean fewer reads: on loopback 512 KiB nearly doubled the
        /// throughput of one large file over 64 KiB (see Benchmarks/README.md).
        public var receiveBufferSize: Int = 512 * 1024
        /// Whether HTTP/2 is negotiated over TLS and transfers to one host share a connection.
        public var allowsHTTP2: Bool = true
        /// Whether each connection closes when its transfer ends (`CURLOPT_FORBID_REUSE`) instead
        /// of waiting, idle, in the cache for the next one. A fleet under a fleet-wide per-host
        /// limit sets it: an idle keep-alive connection of one worker would count at the server
        /// beside the transfers the limit gives to the others.
        package var forbidsConnectionReuse = false
        /// Where the engine logs; debug level shows each transfer's start and end.
        public var logger: Logger = Logger(label: "tessera.engine")
        /// Where the engine reports its metrics through swift-metrics: body bytes received
        /// (`tessera_engine_received_bytes_total`), transfers finished (`tessera_transfers_total`,
        /// and `tessera_transfer_outcomes_total` by `outcome`: completed, failed, cancelled) and
        /// their durations (the timer `tessera_transfer_duration_seconds`). The instruments are
        /// made once, when the engine starts. `nil` (the default) takes `MetricsSystem.factory`
        /// then, so an app that bootstrapped a backend (swift-prometheus, swift-otel, StatsD) gets
        /// them; a test passes a factory of its own and needs no global bootstrap.
        public var metricsFactory: (any MetricsFactory)?

        /// How many engine threads run the transfers, each with a libcurl multi handle of its
        /// own (1 to 8; 1 by default). With two (``automaticThreads`` on a machine with two cores
        /// or more, as the `tessera` command runs), receiving and writing many files, or the
        /// segments of different tasks, use two cores at once. A task's run keeps all its
        /// transfers on one thread. Each thread applies ``maxConnections``,
        /// ``maxConnectionsPerHost`` and ``maxActiveTransfers`` to its own transfers (a
        /// ``DownloadTaskManager``'s scheduler keeps the totals of its tasks), transfers on two
        /// threads never share a connection (nor an HTTP/2 one), and each thread keeps its own
        /// idle connections (so two may hold more than ``maxConnections`` open in all, idle ones
        /// included); the ``globalRateLimit`` holds across them. An engine allowed
        /// fewer than 8 connections in total or per host runs one thread, whatever this says:
        /// those limits then hold exactly.
        public var threads: Int = 1

        /// Whether a large body (4 MiB or more still to come, without a rate limit) is written to
        /// its file by a writer thread of the engine's own while the engine thread receives the
        /// next bytes, so that receiving and writing one file use two cores at once. Only on a
        /// machine with two cores or more; at most about 1 MiB of a transfer waits for the
        /// writer, and its bytes count as written (its checkpoint, the journal of its task)
        /// once they are in the file. `false`: each engine thread writes what it receives.
        public var writesBehind: Bool = true

        /// Two engine threads on a machine with two cores or more, else one (see ``threads``).
        public static var automaticThreads: Int { min(2, max(1, ProcessInfo.processInfo.activeProcessorCount)) }

        /// The threads the engine starts (see ``threads``).
        var resolvedThreads: Int {
            guard maxConnections >= 8, maxConnectionsPerHost >= 8 else { return 1 }
            return min(8, max(1, threads))
        }

        /// Creates the default configuration.
        public init() {}
    }
}
