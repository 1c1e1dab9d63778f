import CCurl
import CTesseraSystem
import CoreMetrics
import Foundation

/// The download engine every entity shares: libcurl multi handles, each driven by a dedicated
/// thread (one by default; ``Configuration/threads``), with an `async` API on top.
///
/// An application makes one and gives it to its ``DownloadTaskManager``; the package's own
/// layers submit transfers to it (`transfer(_:progress:)`, not public API). The engine reuses connections, multiplexes HTTP/2 streams where the server offers them,
/// limits connections in total and per host, applies one rate limit across all transfers,
/// resumes partial files with `Range` + `If-Range`, and writes the body straight to disk from
/// libcurl's callback, so memory stays flat whatever the size of the file.
///
/// Cancelling the awaiting Swift task removes the transfer from libcurl at once; the thrown
/// ``DownloadError`` carries a `TransferCheckpoint` to resume from.
///
/// ```swift
/// let engine = try CurlEngine()
/// let result = try await engine.transfer(.download(url, to: "/tmp/file.bin")) { progress in
///     print(progress.bytesWritten, progress.totalBytes ?? -1)
/// }
/// ```
public final class CurlEngine: Sendable {
    /// One per engine thread (``Configuration/threads``).
    private let cores: [EngineCore]
    /// The global rate limit, which all the threads take from.
    private let budget: RateBudget
    /// The writer thread of large bodies (``Configuration/writesBehind``), shared by the threads.
    private let writeBehind: WriteBehind?

    /// The configuration the engine was created with.
    public let configuration: Configuration

    /// How many engine threads run the transfers.
    public var threadCount: Int { cores.count }

    /// Starts the engine threads.
    public init(configuration: Configuration = Configuration()) throws(DownloadError) {
        self.configuration = configuration
        let count = configuration.resolvedThreads
        let budget = RateBudget(bytesPerSecond: configuration.globalRateLimit)
        let metrics = EngineMetrics(factory: configuration.metricsFactory ?? MetricsSystem.factory)
        // (Each thread's cache keeps as many connections as one thread's would: a thread that
        // carries one large task's connections, all of them, reuses every one. A smaller share
        // closed one at each transfer's end: 1,512 connections for 100,000 DASH segments.)
        let writeBehind = configuration.writesBehind && ProcessInfo.processInfo.activeProcessorCount > 1 ? WriteBehind() : nil
        var cores: [EngineCore] = []
        for _ in 0..<count {
            cores.append(try EngineCore(configuration: configuration, budget: budget, metrics: metrics, writeBehind: writeBehind))
        }
        self.cores = cores
        self.budget = budget
        self.writeBehind = writeBehind
        for (index, core) in cores.enumerated() {
            let name = count == 1 ? "tessera-curl" : "tessera-curl-\(index)"
            let thread = Thread {
                // (The system's name of the thread, as `top -H` and `perf` show it.)
                tessera_name_this_thread(name)
                core.run()
            }
            thread.name = name
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    deinit {
        for core in cores { core.requestShutdown() }
        // (Its thread ends once the blocks handed to it are written: a transfer closes its file
        // only after that, wherever it ends.)
        writeBehind?.stop()
    }

    /// Blocks of bodies the writer thread has written (for the tests); `nil` without one.
    var writtenBehindBlocks: Int? { writeBehind?.writtenBlocks }

    /// The engine thread with the fewest transfers now (running or waiting to start), as a lane
    /// for ``start(_:lane:progress:complete:)``: a caller whose transfers' callbacks must not run
    /// on two threads at once (a run's) takes one lane for all of them.
    func leastBusyLane() -> Int {
        guard cores.count > 1 else { return 0 }
        var best = 0, bestLoad = Int.max
        for (index, core) in cores.enumerated() {
            let load = core.activeCount.load(ordering: .relaxed) &+ core.queuedCount.load(ordering: .relaxed)
            if load < bestLoad { (best, bestLoad) = (index, load) }
        }
        return best
    }

    /// The core of `lane` (any number: taken modulo the thread count), or the least busy one.
    private func core(_ lane: Int?) -> EngineCore {
        guard cores.count > 1 else { return cores[0] }
        return cores[Int(UInt(bitPattern: lane ?? leastBusyLane()) % UInt(cores.count))]
    }

    /// Runs one transfer and returns when it is complete.
    ///
    /// - Parameters:
    ///   - request: what to fetch and where to put it.
    ///   - lane: the engine thread to run on (see ``leastBusyLane()``); `nil`: the least busy.
    ///   - progress: called on the engine thread at most once per
    ///     ``Configuration/progressInterval`` and once at the end; it must return quickly.
    /// - Throws: ``DownloadError`` only; ``DownloadError/Code/cancelled`` when the calling task
    ///   is cancelled.
    package func transfer(
        _ request: TransferRequest, lane: Int? = nil,
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws -> TransferResult {
        try request.validate()
        let core = self.core(lane)
        let token = core.makeToken()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                core.submit(PendingTransfer(
                    token: token, request: request, complete: { continuation.resume(with: $0) }, progress: progress))
            }
        } onCancel: {
            core.cancel(token)
        }
    }

    /// Starts one transfer without waiting for it: `complete` is called once with how it ended,
    /// on the engine thread (it must return quickly and not block), or at once on the calling
    /// thread when the request is invalid or the engine has shut down. Cancel it with
    /// ``cancel(_:)`` and the handle returned. For callers that follow many transfers from one
    /// loop: each ending costs them no task and no continuation. `lane`: the engine thread to
    /// run on (see ``leastBusyLane()``); `nil`: the least busy.
    func start(
        _ request: TransferRequest, lane: Int? = nil, progress: (@Sendable (TransferProgress) -> Void)? = nil,
        complete: @escaping @Sendable (Result<TransferResult, DownloadError>) -> Void
    ) -> TransferHandle {
        let core = self.core(lane)
        let token = core.makeToken()
        do {
            try request.validate()
        } catch {
            token.state.withLock { $0 = .cancelled }
            complete(.failure(error))
            return TransferHandle(token: token, core: core)
        }
        core.submit(PendingTransfer(token: token, request: request, complete: complete, progress: progress))
        return TransferHandle(token: token, core: core)
    }

    /// Stops a transfer started with ``start(_:progress:complete:)``: its completion is called
    /// with ``DownloadError/Code/cancelled`` (and what it wrote, as a checkpoint), unless it has
    /// already ended.
    func cancel(_ handle: TransferHandle) {
        handle.core.cancel(handle.token)
    }

    /// The limit shared by all transfers, in bytes per second, or `nil` for none.
    public var globalRateLimit: Int64? { budget.limit }

    /// Changes the limit shared by all transfers, in bytes per second; `nil` removes it.
    public func setGlobalRateLimit(_ bytesPerSecond: Int64?) {
        budget.set(bytesPerSecond)
        for core in cores { core.rateLimitChanged() }
    }

    /// Stops the engine: running and queued transfers fail with
    /// ``DownloadError/Code/engineShutDown`` and the threads exit before this returns.
    public func shutdown() async {
        for core in cores { core.requestShutdown() }
        for core in cores { await core.waitUntilExited() }
        writeBehind?.stop()
    }

    /// Counters for monitoring and tests.
    public struct Statistics: Sendable, Hashable {
        /// Transfers handed to libcurl now.
        public var activeTransfers: Int
        /// Transfers waiting for a slot.
        public var queuedTransfers: Int
        /// Transfers finished, in success or failure, since the engine started.
        public var finishedTransfers: Int
        /// Body bytes received by finished transfers.
        public var bytesReceived: Int64
    }

    /// The engine's counters now.
    public var statistics: Statistics {
        var statistics = Statistics(activeTransfers: 0, queuedTransfers: 0, finishedTransfers: 0, bytesReceived: 0)
        for core in cores {
            statistics.activeTransfers += core.activeCount.load(ordering: .relaxed)
            statistics.queuedTransfers += core.queuedCount.load(ordering: .relaxed)
            statistics.finishedTransfers += core.completedCount.load(ordering: .relaxed)
            statistics.bytesReceived = statistics.bytesReceived.saturatingAdding(core.receivedTotal.load(ordering: .relaxed))
        }
        return statistics
    }

    /// Tunes the C allocator (glibc's malloc) for an engine that starts many transfers: libcurl
    /// allocates each transfer's receive buffer (``Configuration/receiveBufferSize``, 512 KiB
    /// by default) when the transfer starts and frees it when it ends, and by default glibc
    /// serves such a block with `mmap` or gives it back to the system at once, so the next
    /// transfer's first reads fault its pages in again, zeroed. On 4,000 segments of 256 KiB
    /// that was 120,000 page faults and a third of the engine thread's time.
    ///
    /// After this call, blocks below 4 MiB come from malloc's heaps, and free memory is returned
    /// to the system only beyond 64 MiB. It changes the whole process's allocator, so the
    /// library never does it by itself: an application that downloads many files calls it once,
    /// at start (the `tessera` command does). Returns whether the allocator took the settings
    /// (not on other C libraries than glibc).
    @discardableResult
    public static func tuneAllocatorForManyTransfers() -> Bool {
        tessera_tune_malloc(4 << 20, 64 << 20) == 1
    }

    /// The version of the libcurl in use, e.g. `7.88.1`.
    public static var libcurlVersion: String { String(cString: tessera_curl_version_string()) }

    /// Whether the libcurl in use can speak HTTP/2.
    public static var supportsHTTP2: Bool { tessera_curl_supports_http2() != 0 }
}

/// A transfer started with ``CurlEngine/start(_:progress:complete:)``, to cancel it.
struct TransferHandle: Sendable {
    let token: TransferToken
    /// The engine thread it runs on.
    let core: EngineCore
}
