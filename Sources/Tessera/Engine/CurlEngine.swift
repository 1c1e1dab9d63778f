import CCurl
import CTesseraSystem
import Foundation

/// The download engine every entity shares: one libcurl multi handle driven by one dedicated
/// thread, with an `async` API on top.
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
    private let core: EngineCore

    /// The configuration the engine was created with.
    public var configuration: Configuration { core.configuration }

    /// Starts the engine thread.
    public init(configuration: Configuration = Configuration()) throws(DownloadError) {
        let core = try EngineCore(configuration: configuration)
        self.core = core
        let thread = Thread { core.run() }
        thread.name = "tessera-curl"
        thread.stackSize = 1 << 20
        thread.start()
    }

    deinit {
        core.requestShutdown()
    }

    /// Runs one transfer and returns when it is complete.
    ///
    /// - Parameters:
    ///   - request: what to fetch and where to put it.
    ///   - progress: called on the engine thread at most once per
    ///     ``Configuration/progressInterval`` and once at the end; it must return quickly.
    /// - Throws: ``DownloadError`` only; ``DownloadError/Code/cancelled`` when the calling task
    ///   is cancelled.
    package func transfer(
        _ request: TransferRequest,
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws -> TransferResult {
        try request.validate()
        let token = core.makeToken()
        let core = self.core
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
    /// loop: each ending costs them no task and no continuation.
    func start(
        _ request: TransferRequest, progress: (@Sendable (TransferProgress) -> Void)? = nil,
        complete: @escaping @Sendable (Result<TransferResult, DownloadError>) -> Void
    ) -> TransferHandle {
        let token = core.makeToken()
        do {
            try request.validate()
        } catch {
            token.state.withLock { $0 = .cancelled }
            complete(.failure(error))
            return TransferHandle(token: token)
        }
        core.submit(PendingTransfer(token: token, request: request, complete: complete, progress: progress))
        return TransferHandle(token: token)
    }

    /// Stops a transfer started with ``start(_:progress:complete:)``: its completion is called
    /// with ``DownloadError/Code/cancelled`` (and what it wrote, as a checkpoint), unless it has
    /// already ended.
    func cancel(_ handle: TransferHandle) {
        core.cancel(handle.token)
    }

    /// The limit shared by all transfers, in bytes per second, or `nil` for none.
    public var globalRateLimit: Int64? {
        let rate = core.rateLimitSetting.load(ordering: .relaxed)
        return rate > 0 ? rate : nil
    }

    /// Changes the limit shared by all transfers, in bytes per second; `nil` removes it.
    public func setGlobalRateLimit(_ bytesPerSecond: Int64?) {
        core.setRateLimit(bytesPerSecond)
    }

    /// Stops the engine: running and queued transfers fail with
    /// ``DownloadError/Code/engineShutDown`` and the thread exits before this returns.
    public func shutdown() async {
        core.requestShutdown()
        await core.waitUntilExited()
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
        Statistics(
            activeTransfers: core.activeCount.load(ordering: .relaxed),
            queuedTransfers: core.queuedCount.load(ordering: .relaxed),
            finishedTransfers: core.completedCount.load(ordering: .relaxed),
            bytesReceived: core.receivedTotal.load(ordering: .relaxed))
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
}
