import CCurl
import CoreMetrics
import Foundation
import Logging
import Synchronization

/// Where a submitted transfer stands, as seen by the caller's task and its cancellation handler.
final class TransferToken: Sendable {
    enum State: Sendable {
        case created
        case submitted
        case cancelled
    }

    let id: UInt64
    let state = Locked(State.created)

    init(id: UInt64) { self.id = id }
}

/// A transfer waiting for the engine thread. A reference: it goes from the submitting thread
/// through the inbox and the waiting queue to its transfer, and each hand-off is a retain, not a
/// copy of the request, its headers and both callbacks (and their destruction).
final class PendingTransfer: Sendable {
    let token: TransferToken
    let request: TransferRequest
    /// Called once, on the engine thread (or the submitting thread when the engine refuses it),
    /// with how the transfer ended.
    let complete: @Sendable (Result<TransferResult, DownloadError>) -> Void
    let progress: (@Sendable (TransferProgress) -> Void)?
    /// Set when the engine starts the transfer over after a `416` showed the copy is stale.
    let restarted: Bool

    init(
        token: TransferToken, request: TransferRequest,
        complete: @escaping @Sendable (Result<TransferResult, DownloadError>) -> Void,
        progress: (@Sendable (TransferProgress) -> Void)?, restarted: Bool = false
    ) {
        self.token = token
        self.request = request
        self.complete = complete
        self.progress = progress
        self.restarted = restarted
    }

    /// The same transfer, started over from its first byte (without its resume point).
    func restartedFromFirstByte() -> PendingTransfer {
        var request = request
        request.resume = nil
        return PendingTransfer(token: token, request: request, complete: complete, progress: progress, restarted: true)
    }
}

/// One engine thread's state: one libcurl multi handle and the transfers on it (a
/// ``CurlEngine`` has one or more, see ``CurlEngine/Configuration/threads``).
///
/// Other threads reach it only through ``inbox`` (a `Locked`) and `curl_multi_wakeup`; every other
/// member belongs to the engine thread.
final class EngineCore: @unchecked Sendable {
    struct Inbox {
        var submissions: [PendingTransfer] = []
        var cancellations: [UInt64] = []
        /// The global limit changed (``RateBudget``): paused transfers may go on.
        var rateLimitChanged = false
        var shutdown = false
        var exited = false
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
    }

    let configuration: CurlEngine.Configuration
    let multi: UnsafeMutableRawPointer
    let verbose: Bool
    let progressIntervalNanoseconds: UInt64
    private let inbox = Locked(Inbox())
    private let nextID = Atomic<UInt64>(1)
    let activeCount = Atomic<Int>(0)
    let queuedCount = Atomic<Int>(0)
    let receivedTotal = Atomic<Int64>(0)
    let completedCount = Atomic<Int>(0)
    /// The same counts (and durations) for swift-metrics, made once for the engine.
    private let metrics: EngineMetrics
    /// The global rate limit, shared by the engine's threads.
    let budget: RateBudget
    /// The writer thread of large bodies, shared by the engine's threads (``WriteBehind``).
    let writeBehind: WriteBehind?
    /// Set while the engine thread is (about to be) in `curl_multi_poll`; submissions wake it
    /// only then, which saves a system call per transfer while it is busy anyway.
    private let sleeping = Atomic<Bool>(false)

    // Engine thread only.
    private var transfers: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private var transfersByID: [UInt64: CurlTransfer] = [:]
    private var waiting = FIFO<PendingTransfer>()
    private var rateLimited: [CurlTransfer] = []
    private var handlePool: [UnsafeMutableRawPointer] = []
    /// Write buffers of ``CurlTransfer/writeBlockSize`` bytes, reused from transfer to transfer.
    private var bufferPool: [UnsafeMutableRawPointer] = []
    private var logger: Logger

    init(
        configuration: CurlEngine.Configuration, budget: RateBudget, metrics: EngineMetrics, writeBehind: WriteBehind? = nil
    ) throws(DownloadError) {
        _ = CurlGlobal.initialized
        guard let multi = curl_multi_init() else {
            throw DownloadError(.transport, "libcurl could not create a multi handle")
        }
        self.multi = multi
        self.configuration = configuration
        self.logger = configuration.logger
        self.metrics = metrics
        self.budget = budget
        self.writeBehind = writeBehind
        self.verbose = ProcessInfo.processInfo.environment["TESSERA_CURL_VERBOSE"] == "1"
        self.progressIntervalNanoseconds = UInt64(max(0, configuration.progressInterval.nanoseconds))
        _ = tessera_curl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, max(0, configuration.maxConnections))
        _ = tessera_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(0, configuration.maxConnectionsPerHost))
        _ = tessera_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(4, configuration.maxConnections))
        _ = tessera_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, configuration.allowsHTTP2 ? Int(CURLPIPE_MULTIPLEX) : 0)
    }

    deinit {
        for buffer in bufferPool { buffer.deallocate() }
        for handle in handlePool { curl_easy_cleanup(handle) }
        curl_multi_cleanup(multi)
    }

    func makeToken() -> TransferToken {
        TransferToken(id: nextID.wrappingAdd(1, ordering: .relaxed).oldValue)
    }

    // MARK: - Any thread

    func submit(_ pending: PendingTransfer) {
        let accepted = pending.token.state.withLock { state -> Bool in
            guard state == .created else { return false }
            state = .submitted
            return true
        }
        guard accepted else {
            pending.complete(.failure(cancelledError(pending.request)))
            return
        }
        let open = inbox.withLock { inbox -> Bool in
            guard !inbox.shutdown else { return false }
            inbox.submissions.append(pending)
            return true
        }
        guard open else {
            pending.complete(.failure(DownloadError(
                .engineShutDown, "the engine has been shut down", url: pending.request.url.absoluteString)))
            return
        }
        queuedCount.add(1, ordering: .relaxed)
        if sleeping.load(ordering: .sequentiallyConsistent) { curl_multi_wakeup(multi) }
    }

    func cancel(_ token: TransferToken) {
        let tellEngine = token.state.withLock { state -> Bool in
            defer { state = .cancelled }
            return state == .submitted
        }
        guard tellEngine else { return }
        inbox.withLock { $0.cancellations.append(token.id) }
        curl_multi_wakeup(multi)
    }

    /// The global limit changed (in ``budget``): transfers paused for it are looked at again.
    func rateLimitChanged() {
        inbox.withLock { $0.rateLimitChanged = true }
        curl_multi_wakeup(multi)
    }

    func requestShutdown() {
        inbox.withLock { $0.shutdown = true }
        curl_multi_wakeup(multi)
    }

    func waitUntilExited() async {
        await withCheckedContinuation { continuation in
            let exited = inbox.withLock { inbox -> Bool in
                if inbox.exited { return true }
                inbox.exitWaiters.append(continuation)
                return false
            }
            if exited { continuation.resume() }
        }
    }

    private func cancelledError(_ request: TransferRequest) -> DownloadError {
        DownloadError(.cancelled, "the transfer was cancelled", url: request.url.absoluteString)
    }

    // MARK: - Engine thread

    /// Bytes wait at most this long in a transfer's write buffer.
    static let staleBufferNanoseconds: UInt64 = 20_000_000

    /// The engine thread's loop; returns after ``requestShutdown()``.
    func run() {
        var running: Int32 = 0
        while true {
            let work = inbox.withLock { inbox -> Inbox in
                let taken = Inbox(
                    submissions: inbox.submissions, cancellations: inbox.cancellations,
                    rateLimitChanged: inbox.rateLimitChanged, shutdown: inbox.shutdown)
                inbox.submissions.removeAll(keepingCapacity: true)
                inbox.cancellations.removeAll(keepingCapacity: true)
                inbox.rateLimitChanged = false
                return taken
            }
            if work.shutdown { break }
            // The consumers that this turn's callbacks post to wake once, after the turn.
            let timeout = WakeBatch.deferring { () -> Int32 in
                if work.rateLimitChanged { releaseRateLimited() }
                for pending in work.submissions { waiting.append(pending) }
                for id in work.cancellations { cancelTransfer(id) }
                startWaiting()
                releaseRateLimited()

                _ = curl_multi_perform(multi, &running)
                collectFinished()
                startWaiting()
                // Bytes that arrived just before a stall would otherwise wait for the next write
                // to be reported.
                var unreported = false
                var holdsBytes = false
                let now = MonotonicClock.nanoseconds()
                for transfer in transfers.values {
                    transfer.flushIfStale(now: now, interval: Self.staleBufferNanoseconds)
                    holdsBytes = holdsBytes || transfer.hasBufferedBytes
                    guard transfer.hasUnreportedProgress else { continue }
                    transfer.reportProgress(final: false)
                    unreported = unreported || transfer.hasUnreportedProgress
                }

                var timeout: Int32 = rateLimited.isEmpty ? 1000 : min(1000, millisecondsUntilRateRelease)
                if unreported { timeout = min(timeout, Int32(clamping: max(1, progressIntervalNanoseconds / 1_000_000))) }
                if holdsBytes { timeout = min(timeout, Int32(Self.staleBufferNanoseconds / 1_000_000)) }
                return timeout
            }
            // Announce the sleep, then look at the inbox once more: a submission that came
            // before the announcement is seen here, one that comes after it wakes the poll.
            sleeping.store(true, ordering: .sequentiallyConsistent)
            if inbox.withLock({ $0.submissions.isEmpty }) {
                _ = curl_multi_poll(multi, nil, 0, timeout, nil)
            }
            sleeping.store(false, ordering: .sequentiallyConsistent)
        }
        shutDownTransfers()
        let waiters = inbox.withLock { inbox -> [CheckedContinuation<Void, Never>] in
            inbox.exited = true
            defer { inbox.exitWaiters.removeAll() }
            return inbox.exitWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Called from a body callback: whether `count` bytes may be taken now under the global
    /// limit and the transfer's own. When not, the transfer is paused until the buckets refill.
    func takeRateTokens(_ count: Int, for transfer: CurlTransfer) -> Bool {
        guard budget.limit != nil || transfer.ownBucket != nil else { return true }
        let now = MonotonicClock.nanoseconds()
        transfer.ownBucket?.refill(now: now)
        guard budget.take(count, now: now, alsoAllowed: transfer.ownBucket?.hasTokens ?? true) else {
            if !transfer.isPausedForRate {
                transfer.isPausedForRate = true
                rateLimited.append(transfer)
            }
            return false
        }
        transfer.ownBucket?.consume(count)
        return true
    }

    /// The rate that holds a new transfer back, if any: the global limit or its own, whichever
    /// is lower. Engine thread only.
    func currentRateLimit(for request: TransferRequest) -> Int64? {
        let own = request.rateLimit.flatMap { $0 > 0 ? $0 : nil }
        guard let global = budget.limit else { return own }
        return own.map { min($0, global) } ?? global
    }

    /// Resumes paused transfers whose buckets have tokens again, round robin: the ones that
    /// waited longest go first, and a transfer that receives goes to the back of the line (so
    /// under a global limit every transfer gets its turn, and none is starved by an older one).
    private func releaseRateLimited() {
        guard !rateLimited.isEmpty else { return }
        let now = MonotonicClock.nanoseconds()
        let paused = rateLimited
        rateLimited.removeAll(keepingCapacity: true)
        var stillWaiting: [CurlTransfer] = []
        for transfer in paused {
            guard transfer.isPausedForRate, transfers[transfer.easy] === transfer else { continue }
            transfer.ownBucket?.refill(now: now)
            guard budget.hasTokens(now: now), transfer.ownBucket?.hasTokens ?? true else {
                stillWaiting.append(transfer)
                continue
            }
            transfer.isPausedForRate = false
            // libcurl hands over the data it held back, which may pause the transfer again
            // (the write callback then appends it to `rateLimited`: behind the waiting ones).
            _ = curl_easy_pause(transfer.easy, tessera_curl_pause_continue())
        }
        rateLimited = stillWaiting + rateLimited
    }

    /// Milliseconds until a paused transfer may receive again.
    private var millisecondsUntilRateRelease: Int32 {
        var soonest = UInt64.max
        let global = budget.nanosecondsUntilAvailable
        for transfer in rateLimited {
            soonest = min(soonest, max(global, transfer.ownBucket?.nanosecondsUntilAvailable ?? 0))
        }
        return Int32(clamping: max(1, soonest / 1_000_000 + 1))
    }

    private func startWaiting() {
        while transfers.count < max(1, configuration.maxActiveTransfers), let pending = waiting.popFirst() {
            queuedCount.subtract(1, ordering: .relaxed)
            start(pending)
        }
    }

    private func start(_ pending: PendingTransfer) {
        guard let easy = handlePool.popLast() ?? curl_easy_init() else {
            pending.complete(.failure(DownloadError(
                .transport, "libcurl could not create a handle", url: pending.request.url.absoluteString)))
            return
        }
        let transfer = CurlTransfer(pending: pending, easy: easy, core: self)
        if transfer.isCompleteWithoutRequest {
            let result = transfer.completedWithoutRequest()
            recycle(easy)
            completedCount.add(1, ordering: .relaxed)
            metrics.finished(.completed, nanoseconds: MonotonicClock.nanoseconds() &- transfer.startTime)
            pending.complete(.success(result))
            return
        }
        if let error = transfer.configure() {
            // (A handle that refused an option is not trusted with another transfer.)
            curl_easy_cleanup(easy)
            pending.complete(.failure(error))
            return
        }
        let added = curl_multi_add_handle(multi, easy)
        guard added == CURLM_OK else {
            recycle(easy)
            pending.complete(.failure(DownloadError(
                .transport, "libcurl refused the transfer: \(String(cString: curl_multi_strerror(added)))",
                url: pending.request.url.absoluteString)))
            return
        }
        transfers[easy] = transfer
        transfersByID[transfer.id] = transfer
        activeCount.add(1, ordering: .relaxed)
        logger.debug("transfer started", metadata: [
            "id": "\(transfer.id)", "url": "\(pending.request.url.absoluteString)",
            "range": "\(pending.request.range?.description ?? "all")",
        ])
    }

    private func collectFinished() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard tessera_curl_msg_is_done(message) != 0, let easy = tessera_curl_msg_easy_handle(message),
                let transfer = transfers[easy]
            else { continue }
            let code = tessera_curl_msg_result(message)
            let outcome = transfer.outcome(code)
            let needsRestart = transfer.needsRestart
            // A handle that ended in an error (a refused redirect, a broken connection) may be in
            // a state libcurl will not reconfigure: it is not used again.
            detach(transfer, reusable: code == CURLE_OK)
            receivedTotal.add(transfer.received, ordering: .relaxed)
            metrics.received(transfer.received)
            if needsRestart {
                logger.debug("transfer restarting from its first byte", metadata: ["id": "\(transfer.id)"])
                start(transfer.pending.restartedFromFirstByte())
                continue
            }
            completedCount.add(1, ordering: .relaxed)
            let elapsed = MonotonicClock.nanoseconds() &- transfer.startTime
            switch outcome {
            case .success(let result):
                metrics.finished(.completed, nanoseconds: elapsed)
                logger.debug("transfer finished", metadata: [
                    "id": "\(transfer.id)", "status": "\(result.status)", "bytes": "\(result.bytesReceived)",
                ])
                transfer.pending.complete(.success(result))
            case .failure(let error):
                metrics.finished(.failed, nanoseconds: elapsed)
                logger.debug("transfer failed", metadata: ["id": "\(transfer.id)", "error": "\(error)"])
                transfer.pending.complete(.failure(error))
            }
        }
    }

    private func cancelTransfer(_ id: UInt64) {
        if let transfer = transfersByID[id] {
            detach(transfer)
            receivedTotal.add(transfer.received, ordering: .relaxed)
            completedCount.add(1, ordering: .relaxed)
            metrics.received(transfer.received)
            metrics.finished(.cancelled, nanoseconds: MonotonicClock.nanoseconds() &- transfer.startTime)
            var error = cancelledError(transfer.pending.request)
            error.checkpoint = transfer.cancellationCheckpoint
            transfer.pending.complete(.failure(error))
        } else if let pending = waiting.remove(where: { $0.token.id == id }) {
            queuedCount.subtract(1, ordering: .relaxed)
            pending.complete(.failure(cancelledError(pending.request)))
        }
    }

    /// Takes the transfer off the multi handle and closes its file; the easy handle goes back
    /// to the pool.
    private func detach(_ transfer: CurlTransfer, reusable: Bool = false) {
        curl_multi_remove_handle(multi, transfer.easy)
        transfers[transfer.easy] = nil
        transfersByID[transfer.id] = nil
        activeCount.subtract(1, ordering: .relaxed)
        transfer.isPausedForRate = false
        transfer.closeFile()
        if reusable {
            recycle(transfer.easy)
        } else {
            curl_easy_cleanup(transfer.easy)
        }
    }

    /// A write buffer for a transfer (engine thread).
    func borrowBuffer() -> UnsafeMutableRawPointer {
        bufferPool.popLast() ?? .allocate(byteCount: CurlTransfer.writeBlockSize, alignment: 64)
    }

    /// A transfer is done with its buffer (engine thread).
    func returnBuffer(_ buffer: UnsafeMutableRawPointer) {
        if bufferPool.count < max(16, configuration.maxConnections) {
            bufferPool.append(buffer)
        } else {
            buffer.deallocate()
        }
    }

    private func recycle(_ easy: UnsafeMutableRawPointer) {
        curl_easy_reset(easy)
        if handlePool.count < 64 {
            handlePool.append(easy)
        } else {
            curl_easy_cleanup(easy)
        }
    }

    private func shutDownTransfers() {
        for transfer in Array(transfers.values) {
            detach(transfer)
            var error = DownloadError(
                .engineShutDown, "the engine was shut down", url: transfer.pending.request.url.absoluteString)
            error.checkpoint = transfer.cancellationCheckpoint
            transfer.pending.complete(.failure(error))
        }
        let late = inbox.withLock { inbox -> [PendingTransfer] in
            defer { inbox.submissions.removeAll() }
            return inbox.submissions
        }
        for pending in late { waiting.append(pending) }
        while let pending = waiting.popFirst() {
            queuedCount.subtract(1, ordering: .relaxed)
            pending.complete(.failure(DownloadError(
                .engineShutDown, "the engine was shut down", url: pending.request.url.absoluteString)))
        }
    }
}

/// libcurl's process-wide initialisation, done once before the first handle.
enum CurlGlobal {
    static let initialized: Bool = tessera_curl_global_init() == CURLE_OK
}

/// A first-in first-out queue with amortised O(1) operations.
struct FIFO<Element> {
    private var storage: [Element?] = []
    private var head = 0

    var isEmpty: Bool { head == storage.count }
    var count: Int { storage.count - head }

    mutating func append(_ element: Element) { storage.append(element) }

    mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        defer {
            storage[head] = nil
            head += 1
            if head > 1024, head * 2 > storage.count {
                storage.removeFirst(head)
                head = 0
            }
        }
        return storage[head]
    }

    mutating func remove(where predicate: (Element) -> Bool) -> Element? {
        guard let index = storage[head...].firstIndex(where: { $0.map(predicate) ?? false }) else { return nil }
        let element = storage[index]
        storage.remove(at: index)
        return element
    }
}
