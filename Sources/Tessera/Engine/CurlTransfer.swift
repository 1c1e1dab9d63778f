import CCurl
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One transfer handed to libcurl. Lives on the engine thread only: created, driven by
/// libcurl's callbacks and finished there, so it needs no lock.
final class CurlTransfer {
    /// Where the body goes once the response is known.
    enum Sink {
        case undecided
        case file
        case memory(limit: Int)
        /// Read, count and drop: the `.discard` destination.
        case discard
        /// Ignore: the body of a `416` for a complete copy.
        case drop
        /// An error status: keep the start of the body for the message, drop the rest.
        case errorBody
    }

    let pending: PendingTransfer
    unowned let core: EngineCore
    let easy: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>

    // The plan, fixed when the transfer starts.
    /// Bytes of the span kept from the checkpoint; zero after a restart.
    private(set) var keptBytes: Int64
    /// The `Range` header sent, if any.
    private var sentRange: ByteRange?
    private var sentIfRange = false
    private let checkpointValidator: ResourceValidator?

    // The response, filled in by the callbacks.
    private var responseHeaders = HTTPHeaders()
    private var sink = Sink.undecided
    private var fileDescriptor: Int32 = -1
    /// The file the body goes to (the request's, or where ``TransferRequest/onResponse`` sent it).
    private var filePath: String?
    private var fileBase: Int64 = 0
    private var ownsTail = true
    /// Bytes of the span that are on disk (or in memory), kept ones included.
    private(set) var written: Int64 = 0
    /// Body bytes taken but not yet in the file: libcurl hands over 16 KiB at a time, the file
    /// gets them in blocks of up to ``writeBlockSize``.
    private var writeBuffer: UnsafeMutableRawPointer?
    private var writeBufferCapacity = 0
    private var buffered = 0
    /// The body's writes when the engine's writer thread makes them (``WriteBehind``); the
    /// write buffer is then the writer's, and full ones go to it instead of to `pwrite`.
    private var stream: WriteBehind.Stream?
    /// With a ``stream``: the span position up to which bytes went to the writer (`written`
    /// follows as it writes them).
    private var handedOver: Int64 = 0
    /// The span position of the write buffer's first byte.
    private var bufferStart: Int64 { stream == nil ? written : handedOver }
    /// The transfer stopped at its ``TransferRequest/bound``: a success, whatever libcurl says.
    private var reachedBound = false
    /// When the buffer was last written out: bytes never wait in it long (a stalled server
    /// must not keep them from the disk, and from a crash record).
    private var lastFlush = MonotonicClock.nanoseconds()

    /// Whether body bytes wait in the write buffer (or with the writer, not yet counted written).
    var hasBufferedBytes: Bool { buffered > 0 || handedOver > written }

    /// Writes the buffer out when bytes have waited in it longer than `interval` nanoseconds.
    func flushIfStale(now: UInt64, interval: UInt64) {
        guard hasBufferedBytes, now &- lastFlush >= interval else { return }
        if let error = flush(), failure == nil { failure = error }
    }
    private var responseAnnounced = false
    private var redirected = false
    /// Body bytes received by this attempt.
    private(set) var received: Int64 = 0
    private var memory = Data()
    private var errorBody: [UInt8] = []
    private var errorBodyLength = 0
    private var failure: DownloadError?
    private var restarted: Bool
    private var validator: ResourceValidator?
    private var resourceLength: Int64?
    private var spanLength: Int64?
    /// Set when a `416` shows the copy on disk is not what the server has: start over once.
    private(set) var needsRestart = false
    /// Paused by a rate limit, waiting for tokens.
    var isPausedForRate = false
    /// The transfer's own rate limit, when it has one. (libcurl's `CURLOPT_MAX_RECV_SPEED_LARGE`
    /// lets short transfers through at full speed, so the engine applies its own bucket.)
    var ownBucket: TokenBucket?
    private var lastProgress: UInt64 = 0
    /// When the engine started it (``MonotonicClock``).
    let startTime = MonotonicClock.nanoseconds()

    var id: UInt64 { pending.token.id }

    init(pending: PendingTransfer, easy: UnsafeMutableRawPointer, core: EngineCore) {
        self.pending = pending
        self.easy = easy
        self.core = core
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        self.errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        self.restarted = pending.restarted
        let request = pending.request
        self.checkpointValidator = request.resume?.validator
        self.keptBytes = Self.usableCheckpointBytes(of: request)
        if case .file(let path, let offset, let owns) = request.destination {
            filePath = path
            fileBase = offset
            ownsTail = owns
        }
        spanLength = request.range?.length ?? request.expectedLength
        if let limit = request.rateLimit, limit > 0 { ownBucket = TokenBucket(bytesPerSecond: limit) }
    }

    deinit {
        errorBuffer.deallocate()
        if let headerList { curl_slist_free_all(headerList) }
        if let stream { _ = core.writeBehind?.drain(stream) }
        if fileDescriptor >= 0 { close(fileDescriptor) }
        if let writeBuffer { giveBack(writeBuffer) }
    }

    /// The largest write the body makes to its file.
    static let writeBlockSize = 256 * 1024

    /// Pieces libcurl hands over at least this large are written as they are, not copied into
    /// the write buffer first. (libcurl 7.88, Debian 12's, hands a body over in pieces of at most
    /// `CURL_MAX_WRITE_SIZE`, 16 KiB, whatever its receive buffer: every piece is gathered in the
    /// write buffer there, and a 64 KiB file is one write, not four as curl's own. A libcurl built
    /// with a larger `CURL_MAX_WRITE_SIZE` saves the copy of its large pieces here.)
    static let directWriteSize = 64 * 1024

    /// How many checkpoint bytes can be trusted: they need a validator (unless the request
    /// allows otherwise), and a file destination must really hold them.
    private static func usableCheckpointBytes(of request: TransferRequest) -> Int64 {
        guard let resume = request.resume, resume.bytesWritten > 0, request.method == .get else { return 0 }
        guard request.resumesWithoutValidator || resume.validator?.ifRangeValue != nil else { return 0 }
        switch request.destination {
        case .file(let path, let offset, _):
            var info = stat()
            guard stat(path, &info) == 0, Int64(info.st_size) >= offset + resume.bytesWritten else { return 0 }
            return resume.bytesWritten
        case .memory, .discard:
            return 0
        }
    }

    /// Whether the span is already complete on disk, so no request is needed: a bounded range
    /// fully kept, or a whole resource whose expected length is exactly what is kept.
    var isCompleteWithoutRequest: Bool {
        let request = pending.request
        if let length = request.range?.length { return keptBytes >= length }
        if request.range == nil, let expected = request.expectedLength, keptBytes > 0 { return keptBytes == expected }
        return false
    }

    // MARK: - Setting up the handle

    /// Configures the easy handle; returns an error for options libcurl refuses.
    func configure() -> DownloadError? {
        let request = pending.request
        let configuration = core.configuration
        var failed: String?
        func set(_ option: CURLoption, _ value: Int, _ name: String) {
            if failed == nil, tessera_curl_easy_setopt_long(easy, option, value) != CURLE_OK { failed = name }
        }
        func set(_ option: CURLoption, _ value: String, _ name: String) {
            // (libcurl copies the text; `withCString` spares Swift's copy of it into a new array.)
            if failed == nil, value.withCString({ tessera_curl_easy_setopt_string(easy, option, $0) }) != CURLE_OK { failed = name }
        }

        set(CURLOPT_URL, request.url.absoluteString, "URL")
        if tessera_curl_easy_restrict_protocols(easy) != CURLE_OK { failed = "protocols" }
        set(CURLOPT_NOSIGNAL, 1, "NOSIGNAL")
        set(CURLOPT_FOLLOWLOCATION, 1, "FOLLOWLOCATION")
        set(CURLOPT_MAXREDIRS, configuration.maxRedirects, "MAXREDIRS")
        set(CURLOPT_CONNECTTIMEOUT_MS, Int(configuration.connectTimeout.milliseconds), "CONNECTTIMEOUT_MS")
        if configuration.lowSpeedLimit > 0 {
            set(CURLOPT_LOW_SPEED_LIMIT, configuration.lowSpeedLimit, "LOW_SPEED_LIMIT")
            set(CURLOPT_LOW_SPEED_TIME, max(1, Int(configuration.lowSpeedTime.milliseconds / 1000)), "LOW_SPEED_TIME")
        }
        if let timeout = request.timeout {
            set(CURLOPT_TIMEOUT_MS, max(1, Int(timeout.milliseconds)), "TIMEOUT_MS")
        }
        set(CURLOPT_SSL_VERIFYPEER, configuration.verifiesTLSPeer ? 1 : 0, "SSL_VERIFYPEER")
        set(CURLOPT_SSL_VERIFYHOST, configuration.verifiesTLSPeer ? 2 : 0, "SSL_VERIFYHOST")
        if let bundle = configuration.caBundlePath { set(CURLOPT_CAINFO, bundle, "CAINFO") }
        switch configuration.proxy {
        case .environment: break
        case .none: set(CURLOPT_PROXY, "", "PROXY")
        case .url(let proxy): set(CURLOPT_PROXY, proxy, "PROXY")
        }
        set(CURLOPT_USERAGENT, configuration.userAgent, "USERAGENT")
        set(CURLOPT_TCP_KEEPALIVE, 1, "TCP_KEEPALIVE")
        // (Set either way: a pooled handle keeps its last transfer's options.)
        set(CURLOPT_FORBID_REUSE, configuration.forbidsConnectionReuse ? 1 : 0, "FORBID_REUSE")
        // Advisory: libcurl refuses it on a pooled handle that still has its receive buffer
        // (seen after HTTP/2 transfers), and that buffer is already this engine's size.
        _ = tessera_curl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, configuration.receiveBufferSize)
        if let rate = core.currentRateLimit(for: request) {
            // About 25 ms of a connection's share of the limited rate (taken as a quarter of
            // it) in the kernel's buffer: enough to keep the rate, little in flight (what a
            // killed process never reads, a server still sent).
            let size = Int(min(max(rate / 160, 64 * 1024), 4 << 20))
            if failed == nil, tessera_curl_easy_set_receive_buffer(easy, size) != CURLE_OK { failed = "SOCKOPTFUNCTION" }
        }
        if configuration.allowsHTTP2 {
            set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS), "HTTP_VERSION")
            if request.url.scheme?.lowercased() == "https" { set(CURLOPT_PIPEWAIT, 1, "PIPEWAIT") }
        } else {
            set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1), "HTTP_VERSION")
        }
        if request.acceptsCompression { set(CURLOPT_ACCEPT_ENCODING, "", "ACCEPT_ENCODING") }
        if request.method == .head { set(CURLOPT_NOBODY, 1, "NOBODY") }
        if core.verbose { set(CURLOPT_VERBOSE, 1, "VERBOSE") }
        if failed == nil, tessera_curl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer) != CURLE_OK {
            failed = "ERRORBUFFER"
        }

        // Header fields: the defaults, the request's own (replacing defaults by name), then the
        // range this attempt needs.
        var headers = configuration.defaultHeaders
        for field in request.headers { headers.remove(name: field.name) }
        for field in request.headers { headers.add(name: field.name, value: field.value) }
        headers.remove(name: "Range")
        headers.remove(name: "If-Range")
        if request.method == .get {
            sentRange = (request.range ?? ByteRange(offset: 0)).dropping(keptBytes)
            if sentRange == ByteRange(offset: 0) { sentRange = nil }
            if let sentRange {
                headers.add(name: "Range", value: sentRange.headerValue)
                if keptBytes > 0, let ifRange = checkpointValidator?.ifRangeValue {
                    headers.add(name: "If-Range", value: ifRange)
                    sentIfRange = true
                }
            }
        }
        for field in headers {
            headerList = curl_slist_append(headerList, "\(field.name): \(field.value)")
        }
        if failed == nil, let headerList,
            tessera_curl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList) != CURLE_OK
        {
            failed = "HTTPHEADER"
        }

        let userData = Unmanaged.passUnretained(self).toOpaque()
        if failed == nil,
            tessera_curl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION, curlWriteCallback) != CURLE_OK
                || tessera_curl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, userData) != CURLE_OK
                || tessera_curl_easy_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION, curlHeaderCallback) != CURLE_OK
                || tessera_curl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, userData) != CURLE_OK
        {
            failed = "callbacks"
        }
        guard let failed else { return nil }
        return DownloadError(
            .invalidRequest, "libcurl refused the option \(failed)", url: request.url.absoluteString)
    }

    // MARK: - Callbacks

    /// One header line of a response (status lines and the final blank line included).
    func header(_ bytes: UnsafeBufferPointer<UInt8>) {
        // Parsed on the bytes: this runs for every header line of every response.
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        func text(_ range: Range<Int>) -> String {
            String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
        }
        if bytes.count >= 5, bytes[0] == 0x48, bytes[1] == 0x54, bytes[2] == 0x54, bytes[3] == 0x50, bytes[4] == 0x2F {
            // "HTTP/": a new response, after a redirect or an interim 1xx; forget the previous one.
            responseHeaders = HTTPHeaders()
            responseHeaders.reserveCapacity(12)
            return
        }
        var start = 0, end = bytes.count
        let folded = end > 0 && (bytes[0] == 0x20 || bytes[0] == 0x09)
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        guard start < end else { return }
        if folded {
            // Obsolete line folding (RFC 9112 §5.2): continue the previous value.
            responseHeaders.continueLastValue(with: text(start..<end))
            return
        }
        guard let colon = (start..<end).first(where: { bytes[$0] == 0x3A }) else { return }
        var nameEnd = colon
        while nameEnd > start, isSpace(bytes[nameEnd - 1]) { nameEnd -= 1 }
        var valueStart = colon + 1
        while valueStart < end, isSpace(bytes[valueStart]) { valueStart += 1 }
        responseHeaders.add(name: text(start..<nameEnd), value: text(valueStart..<end))
    }

    /// One piece of the body. Returns the number of bytes taken, ``pauseSignal`` to wait for
    /// the rate limit, or ``errorSignal`` to abort.
    func body(_ pointer: UnsafeRawPointer, count: Int) -> Int {
        if case .undecided = sink {
            if let error = decide() {
                failure = error
                return Self.errorSignal
            }
        }
        switch sink {
        case .undecided, .drop:
            return count
        case .discard:
            if !core.takeRateTokens(count, for: self) { return Self.pauseSignal }
            received += Int64(count)
            written += Int64(count)
        case .errorBody:
            let room = max(0, 1024 - errorBody.count)
            errorBody.append(contentsOf: UnsafeRawBufferPointer(start: pointer, count: min(room, count)))
            errorBodyLength += count
            // Reading a short error body keeps the connection reusable; a long one is not worth it.
            return errorBodyLength > 64 * 1024 ? Self.errorSignal : count
        case .memory(let limit):
            if memory.count + count > limit {
                failure = DownloadError(
                    .responseTooLarge, "the response is larger than the limit of \(limit) bytes",
                    url: pending.request.url.absoluteString)
                return Self.errorSignal
            }
            if !core.takeRateTokens(count, for: self) { return Self.pauseSignal }
            memory.append(pointer.assumingMemoryBound(to: UInt8.self), count: count)
            received += Int64(count)
            written += Int64(count)
        case .file:
            let position = bufferStart + Int64(buffered)
            var taken = count
            if let bound = pending.request.bound {
                taken = bound.take(count, at: position)
                if taken < count { reachedBound = true }
            }
            if let spanLength, position + Int64(taken) > spanLength {
                failure = DownloadError(
                    .rangeMismatch,
                    "the server sent more than the \(spanLength) bytes asked for",
                    url: pending.request.url.absoluteString, httpStatus: status,
                    checkpoint: TransferCheckpoint(bytesWritten: written, validator: validator))
                return Self.errorSignal
            }
            if taken > 0 {
                if !core.takeRateTokens(taken, for: self) {
                    reachedBound = false
                    return Self.pauseSignal
                }
                if let error = append(pointer, count: taken) {
                    failure = error
                    return Self.errorSignal
                }
                received += Int64(taken)
            }
            if reachedBound { return Self.errorSignal }
        }
        reportProgress(final: false)
        return count
    }

    static let pauseSignal = tessera_curl_writefunc_pause()
    static let errorSignal = tessera_curl_writefunc_error()

    /// Takes body bytes into the write buffer, writing it out whenever it fills; a block at
    /// least as large as the buffer goes straight to the file. With the writer thread
    /// (``stream``), every byte is copied into a block of the writer's, and a full block goes to
    /// it while this thread receives the next.
    private func append(_ pointer: UnsafeRawPointer, count: Int) -> DownloadError? {
        let writer = stream == nil ? nil : core.writeBehind
        if writeBuffer == nil, writer == nil {
            // A buffer from the engine's pool (no allocation per transfer); a small body fills only
            // what it needs of it.
            let expected = spanLength.map { max(0, $0 - written) } ?? Int64(Self.writeBlockSize)
            var block = Int64(Self.writeBlockSize)
            if let rate = core.currentRateLimit(for: pending.request) {
                // Held back by a rate limit: smaller blocks, so what a crash record waits for is a
                // few milliseconds of a connection's share, not a quarter MiB.
                block = min(block, max(16 * 1024, rate / 400))
            }
            writeBufferCapacity = Int(min(max(expected, 16 * 1024), block))
            writeBuffer = core.borrowBuffer()
        }
        if writer == nil, count >= Self.directWriteSize {
            // A large piece goes straight from libcurl's buffer to the file (a copy saved), after
            // what waits in the buffer.
            if let error = flush() { return error }
            if let error = writeFully(pointer, count: count, at: fileBase + written) { return error }
            written += Int64(count)
            pending.request.onFlush?(written)
            return nil
        }
        var offset = 0
        while offset < count {
            if let writer, writeBuffer == nil {
                writeBuffer = writer.borrow()
                writeBufferCapacity = writer.blockSize
            }
            if writer == nil, buffered == 0, count - offset >= writeBufferCapacity {
                if let error = writeFully(pointer + offset, count: count - offset, at: fileBase + written) { return error }
                written += Int64(count - offset)
                pending.request.onFlush?(written)
                return nil
            }
            let piece = min(writeBufferCapacity - buffered, count - offset)
            (writeBuffer! + buffered).copyMemory(from: pointer + offset, byteCount: piece)
            buffered += piece
            offset += piece
            if buffered == writeBufferCapacity, let error = writer == nil ? flush() : handOver() { return error }
        }
        return nil
    }

    /// Gives the write buffer to the writer thread (it is the writer's from then on), and takes
    /// in what it has written since the last look.
    private func handOver() -> DownloadError? {
        guard let stream, let writer = core.writeBehind else { return nil }
        if buffered > 0, let writeBuffer {
            let end = handedOver + Int64(buffered)
            writer.submit(stream, buffer: writeBuffer, count: buffered, offset: fileBase + handedOver, end: end)
            handedOver = end
            self.writeBuffer = nil
            buffered = 0
            // (With the writer, the block is on its way to the disk: a transfer that goes on
            // handing blocks over is not stale, one that stalls is looked at 20 ms later.)
            lastFlush = MonotonicClock.nanoseconds()
        }
        return take(writer.state(of: stream))
    }

    /// Takes in what the writer reports: the bytes in the file count as written (and
    /// ``TransferRequest/onFlush`` learns of them), a failed write is this transfer's failure.
    private func take(_ state: (writtenEnd: Int64, failure: Int32)) -> DownloadError? {
        if state.writtenEnd > written {
            written = state.writtenEnd
            pending.request.onFlush?(written)
        }
        return state.failure == 0 ? nil : fileError(state.failure, doing: "write to")
    }

    /// A write buffer goes back where it came from: the writer's, or the engine thread's pool.
    private func giveBack(_ buffer: UnsafeMutableRawPointer) {
        if stream != nil, let writer = core.writeBehind {
            writer.giveBack(buffer)
        } else {
            core.returnBuffer(buffer)
        }
    }

    /// Writes the buffered bytes to the file; then ``TransferRequest/onFlush`` learns they are
    /// there. With the writer thread: hands them over and waits until it has written them.
    @discardableResult
    func flush() -> DownloadError? {
        lastFlush = MonotonicClock.nanoseconds()
        if let stream, let writer = core.writeBehind {
            if let error = handOver() { return error }
            return take(writer.drain(stream))
        }
        guard buffered > 0, let writeBuffer else { return nil }
        if let error = writeFully(writeBuffer, count: buffered, at: fileBase + written) { return error }
        written += Int64(buffered)
        buffered = 0
        pending.request.onFlush?(written)
        return nil
    }

    private func writeFully(_ pointer: UnsafeRawPointer, count: Int, at offset: Int64) -> DownloadError? {
        if let permitsWrite = pending.request.permitsWrite, !permitsWrite() {
            return DownloadError(
                .connectionLost, "the bytes were not written: this process may no longer hold the download",
                url: pending.request.url.absoluteString, checkpoint: TransferCheckpoint(bytesWritten: written, validator: validator))
        }
        var done = 0
        while done < count {
            let result = pwrite(fileDescriptor, pointer + done, count - done, off_t(offset) + off_t(done))
            if result < 0 {
                if errno == EINTR { continue }
                return fileError(errno, doing: "write to")
            }
            done += result
        }
        return nil
    }

    private func fileError(_ code: Int32, doing action: String) -> DownloadError {
        let path = filePath ?? "?"
        let full = code == ENOSPC || code == EDQUOT
        return DownloadError(
            full ? .diskFull : .writeFailed,
            "could not \(action) \(path): \(String(cString: strerror(code)))",
            url: pending.request.url.absoluteString,
            checkpoint: TransferCheckpoint(bytesWritten: written, validator: validator),
            systemErrno: code)
    }

    /// Bytes written that no progress report has told yet.
    var hasUnreportedProgress: Bool { pending.progress != nil && bufferStart + Int64(buffered) != reportedWritten }
    private var reportedWritten: Int64 = -1

    /// Reports progress when the interval has passed (or always, when `final`).
    func reportProgress(final: Bool) {
        guard let handler = pending.progress else { return }
        let now = MonotonicClock.nanoseconds()
        guard final || now &- lastProgress >= core.progressIntervalNanoseconds else { return }
        lastProgress = now
        reportedWritten = bufferStart + Int64(buffered)
        handler(TransferProgress(
            bytesReceived: received, bytesWritten: written, bytesTaken: reportedWritten, totalBytes: spanLength,
            validator: validator ?? checkpointValidator))
    }

    // MARK: - Deciding what the response means

    var status: Int {
        var code = 0
        _ = tessera_curl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    private var responseValidator: ResourceValidator? {
        let etag = responseHeaders["ETag"]
        let lastModified = responseHeaders["Last-Modified"]
        guard etag != nil || lastModified != nil else { return nil }
        var strongDate = false
        if let lastModified, let modified = HTTPDate.parse(lastModified) {
            let date = responseHeaders["Date"].flatMap(HTTPDate.parse) ?? HTTPDate.now()
            strongDate = date - modified >= 1
        }
        return ResourceValidator(etag: etag, lastModified: lastModified, lastModifiedIsStrong: strongDate)
    }

    /// Decides, at the first body byte or at the end, where the body goes; returns an error when
    /// the response cannot be used.
    private func decide() -> DownloadError? {
        let request = pending.request
        let url = request.url.absoluteString
        let code = status
        let contentLength = responseHeaders["Content-Length"].flatMap { Int64(decimalDigits: $0) }
        let theirs = responseValidator
        let keep = TransferCheckpoint(bytesWritten: keptBytes, validator: checkpointValidator)
        sink = .drop

        if request.method == .head {
            validator = theirs
            resourceLength = contentLength
            if !(200..<300).contains(code) { sink = .errorBody }
            return nil
        }

        switch code {
        case 206 where !matchesPrecondition(theirs):
            return DownloadError(.contentChanged, "the server sent a range of another version than the one asked for (If-Match)", url: url, httpStatus: code)

        case 206:
            guard let asked = sentRange else {
                return DownloadError(.rangeMismatch, "the server sent a partial response (206) to a request for the whole resource", url: url, httpStatus: code, checkpoint: keep)
            }
            if let type = responseHeaders["Content-Type"], type.lowercased().hasPrefix("multipart/byteranges") {
                return DownloadError(.rangeMismatch, "the server sent several ranges where one was asked for", url: url, httpStatus: code, checkpoint: keep)
            }
            guard let header = responseHeaders["Content-Range"], let range = ContentRange(header), let span = range.span else {
                return DownloadError(.rangeMismatch, "the partial response has no valid Content-Range", url: url, httpStatus: code, checkpoint: keep)
            }
            // A range asked for past the end the server gives now: the length learned from an
            // earlier response was wrong (or the resource changed); its file starts over. A first
            // range asked for before the length was known ends where the resource does.
            var expectedLast = asked.last ?? range.completeLength.map { $0 - 1 }
            var endsEarly = false
            if let complete = range.completeLength, let last = asked.last, last >= complete {
                guard request.rangeMayPassEnd, asked.offset < complete else {
                    return DownloadError(
                        .contentChanged, "the server now says the resource has \(complete) bytes, fewer than it said before",
                        url: url, httpStatus: code)
                }
                expectedLast = complete - 1
                endsEarly = true
            }
            guard span.lowerBound == asked.offset, expectedLast.map({ span.upperBound == $0 }) ?? true else {
                return DownloadError(.rangeMismatch, "asked for bytes \(asked), the server sent \(span.lowerBound)-\(span.upperBound)", url: url, httpStatus: code, checkpoint: keep)
            }
            if let contentLength, contentLength != span.upperBound - span.lowerBound + 1 {
                return DownloadError(.rangeMismatch, "Content-Length \(contentLength) does not match Content-Range \(header)", url: url, httpStatus: code, checkpoint: keep)
            }
            if sentIfRange, let ours = checkpointValidator, let theirs, ours.hasStrongETag, theirs.hasStrongETag,
                !ours.matches(theirs)
            {
                return DownloadError(.contentChanged, "the server sent a range of a different version (ETag \(theirs.etag ?? "?"))", url: url, httpStatus: code)
            }
            resourceLength = range.completeLength
            if spanLength == nil || endsEarly { spanLength = keptBytes + (span.upperBound - span.lowerBound + 1) }
            validator = theirs ?? checkpointValidator
            written = keptBytes
            return openSink()

        case 200..<300 where !matchesPrecondition(theirs):
            // The request named a version (If-Match, If-Unmodified-Since) and a server that
            // ignores preconditions sent another: never write it into a file of pieces.
            return DownloadError(.contentChanged, "the server sent another version than the one asked for (If-Match)", url: url, httpStatus: code)

        case 200..<300:
            validator = theirs
            resourceLength = request.acceptsCompression ? nil : contentLength
            if sentRange != nil {
                let wantedWhole = (request.range ?? ByteRange(offset: 0)) == ByteRange(offset: 0)
                // (A first range asked for past the end: a whole resource no longer than it is
                // what was asked for.)
                let coversWhole = request.range.map { asked in
                    asked.offset == 0 && (asked.length == contentLength || (request.rangeMayPassEnd
                        && contentLength.map { $0 <= (asked.length ?? .max) } ?? false))
                } ?? true
                if wantedWhole || coversWhole {
                    // The whole resource came back where a range was asked for: the content
                    // changed (If-Range failed) or ranges are not served. Start this span over.
                    restarted = restarted || keptBytes > 0
                    keptBytes = 0
                    if request.rangeMayPassEnd { spanLength = contentLength }
                } else if sentIfRange, let ours = checkpointValidator, !(theirs.map(ours.matches) ?? false) {
                    return DownloadError(.contentChanged, "the resource changed since part of it was downloaded", url: url, httpStatus: code)
                } else {
                    return DownloadError(.rangeNotSupported, "asked for bytes \(request.range?.description ?? "?"), the server sent the whole resource", url: url, httpStatus: code, checkpoint: keep)
                }
            }
            written = keptBytes
            if spanLength == nil, let contentLength, !request.acceptsCompression { spanLength = contentLength }
            return openSink()

        case 416:
            // Nothing left to send. Fine when the copy on disk is exactly the resource.
            let complete = responseHeaders["Content-Range"].flatMap(ContentRange.init)?.completeLength
            if keptBytes > 0, let asked = sentRange, asked.length == nil, let complete, complete == asked.offset {
                validator = checkpointValidator
                resourceLength = complete
                written = keptBytes
                spanLength = keptBytes
                return nil
            }
            if keptBytes > 0, !restarted {
                needsRestart = true
                return nil
            }
            // A first range asked for before the length was known, of an empty resource (or one
            // whose every byte is kept): nothing more to send.
            if request.rangeMayPassEnd, let complete, let asked = sentRange, complete == asked.offset, !restarted {
                validator = keptBytes > 0 ? checkpointValidator : nil
                resourceLength = complete
                written = keptBytes
                spanLength = keptBytes
                return nil
            }
            // A range that starts past the end the server gives now (`bytes */N`): the length
            // learned before was wrong, or the resource shrank; its file starts over.
            if let complete, let asked = sentRange, asked.offset >= complete {
                return DownloadError(
                    .contentChanged, "the server now says the resource has \(complete) bytes, fewer than it said before",
                    url: url, httpStatus: code)
            }
            sink = .errorBody
            return nil

        default:
            sink = .errorBody
            return nil
        }
    }

    /// Whether a response honours the request's `If-Match` (a strong entity tag in the list)
    /// or `If-Unmodified-Since` (not modified after the date); true when the request had none.
    private func matchesPrecondition(_ response: ResourceValidator?) -> Bool {
        let request = pending.request
        if let ifMatch = request.headers["If-Match"] {
            let tags = ifMatch.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard !tags.contains("*"), let etag = response?.etag else { return true }
            return !response!.hasStrongETag || tags.contains(etag)
        }
        if let since = request.headers["If-Unmodified-Since"].flatMap(HTTPDate.parse),
            let modified = response?.lastModified.flatMap(HTTPDate.parse)
        {
            return modified <= since
        }
        return true
    }

    /// Tells ``TransferRequest/onResponse`` about the response, once; returns its refusal.
    private func announceResponse() -> DownloadError? {
        guard !responseAnnounced, let hook = pending.request.onResponse else { return nil }
        responseAnnounced = true
        var effective: UnsafeMutablePointer<CChar>?
        let effectiveText = tessera_curl_easy_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &effective) == CURLE_OK
            ? effective.map { String(cString: $0) } : nil
        let response = TransferResponse(
            status: status, effectiveURLText: effectiveText ?? pending.request.url.absoluteString,
            requestURL: pending.request.url, headers: responseHeaders,
            validator: validator ?? checkpointValidator, resourceLength: resourceLength, spanLength: spanLength,
            resumedFrom: keptBytes, acceptsRanges: acceptsRanges,
            roundTripTime: { let rtt = tessera_curl_connection_rtt(easy); return rtt > 0 ? .microseconds(rtt) : nil }())
        switch hook(response) {
        case .proceed:
            return nil
        case .refuse(let error):
            return error
        case .redirect(let destination):
            guard keptBytes == 0, case .file(let path, let offset, let owns) = destination, !path.isEmpty, offset >= 0 else {
                return nil
            }
            filePath = path
            fileBase = offset
            ownsTail = owns
            redirected = true
            return nil
        }
    }

    private func openSink() -> DownloadError? {
        if let refusal = announceResponse() { return refusal }
        if redirected {
            sink = .file
        } else {
            switch pending.request.destination {
            case .memory(let limit):
                sink = .memory(limit: limit)
                return nil
            case .discard:
                sink = .discard
                return nil
            case .file:
                sink = .file
            }
        }
        guard fileDescriptor < 0, let path = filePath else { return nil }
        // The file is opened once, when the response is known and `written` is final. A
        // transfer that owns the file's tail cuts it right here, so nothing stale can follow
        // its bytes and no truncation is needed at the end; from offset zero, O_TRUNC does it.
        let truncateOnOpen = ownsTail && fileBase + written == 0
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (truncateOnOpen ? O_TRUNC : 0)
        var descriptor = path.withCString { open($0, flags, 0o644) }
        if descriptor < 0, errno == ENOENT {
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.isEmpty {
                try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            }
            descriptor = path.withCString { open($0, flags, 0o644) }
        }
        guard descriptor >= 0 else { return fileError(errno, doing: "open") }
        fileDescriptor = descriptor
        if ownsTail, !truncateOnOpen, ftruncate(fileDescriptor, off_t(fileBase + written)) != 0 {
            return fileError(errno, doing: "truncate")
        }
        if core.writeBehind != nil, WriteBehind.takes(
            remaining: spanLength.map { $0 - written }, rateLimited: core.currentRateLimit(for: pending.request) != nil,
            fenced: pending.request.permitsWrite != nil)
        {
            stream = WriteBehind.Stream(descriptor: descriptor, writtenEnd: written)
            handedOver = written
        }
        return nil
    }

    /// The URL of the response, after redirects.
    private var effectiveURL: URL {
        // Not redirected: the request's own URL (not parsed again at every response).
        var redirects = 0
        if tessera_curl_easy_getinfo_long(easy, CURLINFO_REDIRECT_COUNT, &redirects) == CURLE_OK, redirects == 0 {
            return pending.request.url
        }
        var effective: UnsafeMutablePointer<CChar>?
        if tessera_curl_easy_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &effective) == CURLE_OK,
            let effective, let parsed = URL(string: String(cString: effective))
        {
            return parsed
        }
        return pending.request.url
    }

    /// Whether `value` has `bytes` in it, in any case (looked at byte by byte, at every
    /// response: nothing is allocated).
    static func mentionsBytes(_ value: String) -> Bool {
        var window: UInt64 = 0
        for byte in value.utf8 {
            window = window << 8 | UInt64(byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte)
            if window & 0xFF_FFFF_FFFF == 0x62_79_74_65_73 { return true }  // "bytes"
        }
        return false
    }

    /// Whether the server showed it serves byte ranges.
    private var acceptsRanges: Bool {
        status == 206 || (responseHeaders["Accept-Ranges"].map(Self.mentionsBytes) ?? false)
    }

    // MARK: - The end

    /// Writes what is buffered (those bytes are good whatever ended the transfer) and closes the
    /// file; the write buffer goes back to the engine's pool.
    func closeFile() {
        defer {
            if let writeBuffer { giveBack(writeBuffer) }
            writeBuffer = nil
            buffered = 0
        }
        if fileDescriptor >= 0 {
            flush()
            close(fileDescriptor)
            fileDescriptor = -1
        }
    }

    /// What is on disk when the transfer is stopped before its end.
    var cancellationCheckpoint: TransferCheckpoint? {
        if case .file = sink {
            flush()
            return TransferCheckpoint(bytesWritten: written, validator: validator ?? checkpointValidator)
        }
        return keptBytes > 0 ? TransferCheckpoint(bytesWritten: keptBytes, validator: checkpointValidator) : nil
    }

    /// What the transfer produced, from libcurl's result code.
    func outcome(_ code: CURLcode) -> Result<TransferResult, DownloadError> {
        let request = pending.request
        var url: String { request.url.absoluteString }  // (for errors only)
        let flushFailure = flush()
        let onDisk = TransferCheckpoint(bytesWritten: written, validator: validator ?? checkpointValidator)

        guard code == CURLE_OK || (reachedBound && failure == nil) else {
            if let failure { return .failure(failure) }
            if case .errorBody = sink { return .failure(statusError()) }
            return .failure(classify(code, checkpoint: onDisk))
        }
        if case .undecided = sink, let error = decide() { return .failure(error) }
        if let failure { return .failure(failure) }
        if needsRestart { return .failure(DownloadError(.contentChanged, "the copy on disk is not the server's", url: url)) }
        if case .errorBody = sink { return .failure(statusError()) }
        if let flushFailure { return .failure(flushFailure) }
        if request.method == .get, filePath != nil, fileDescriptor < 0 {
            // An empty body: still create the (empty) file, as any download tool would.
            if let error = openSink() { return .failure(error) }
        }
        if request.method == .get, !reachedBound {
            if let spanLength, written != spanLength {
                return .failure(DownloadError(
                    .sizeMismatch, "expected \(spanLength) bytes, received \(written)",
                    url: url, httpStatus: status, checkpoint: onDisk))
            }
            if let expected = request.expectedLength, written != expected {
                return .failure(DownloadError(
                    .sizeMismatch, "expected \(expected) bytes, the server's copy has \(written)",
                    url: url, httpStatus: status, checkpoint: onDisk))
            }
        }
        reportProgress(final: true)
        return .success(result(status: status))
    }

    /// The error for a response whose status is not a success.
    private func statusError() -> DownloadError {
        let status = self.status
        var message = "the server answered \(status)"
        let reason = HTTPStatus.reasonPhrase(status)
        if let reason { message += " \(reason)" }
        // The body's first line of text, short: not a whole error page.
        if responseHeaders["Content-Type"]?.hasPrefix("text/") ?? true {
            let excerpt = ErrorBodyExcerpt.line(errorBody, status: status, reason: reason)
            if !excerpt.isEmpty { message += ": \(excerpt)" }
        }
        let retryAfter = responseHeaders["Retry-After"].flatMap {
            RetryAfter.parse($0, responseDate: responseHeaders["Date"])
        }
        return DownloadError(
            .httpStatus, message, url: pending.request.url.absoluteString, httpStatus: status,
            retryAfter: retryAfter,
            checkpoint: TransferCheckpoint(bytesWritten: keptBytes, validator: checkpointValidator))
    }

    /// The result of a span that was already complete on disk.
    func completedWithoutRequest() -> TransferResult {
        written = keptBytes
        return result(status: 0)
    }

    private func result(status: Int) -> TransferResult {
        let effectiveURL = status != 0 ? self.effectiveURL : pending.request.url
        return TransferResult(
            status: status,
            effectiveURL: effectiveURL,
            headers: responseHeaders,
            bytesWritten: written,
            bytesReceived: received,
            resumedFrom: keptBytes,
            restarted: restarted,
            validator: validator ?? checkpointValidator,
            resourceLength: resourceLength,
            acceptsRanges: acceptsRanges,
            body: {
                if case .memory = pending.request.destination { return memory }
                return nil
            }(),
            duration: .nanoseconds(Int64(MonotonicClock.nanoseconds() &- startTime)))
    }

    /// The error code for a libcurl result, the system error behind it and libcurl's message.
    ///
    /// A TLS handshake that fails because the connection did (reset, closed or timed out while
    /// the peers still negotiated: libcurl's "Recv failure" with the system error, or OpenSSL's
    /// `SSL_ERROR_SYSCALL` with none) is `connectionLost`, retried like any lost connection; a
    /// handshake the peer refused or could not be trusted (certificate, protocol, cipher) stays
    /// `tlsFailure`.
    static func errorCode(for code: CURLcode, osErrno: Int32, detail: String = "") -> DownloadError.Code {
        switch code {
        case CURLE_SSL_CONNECT_ERROR
            where [ECONNRESET, EPIPE, ECONNABORTED, ETIMEDOUT].contains(osErrno)
                || detail.contains("SSL_ERROR_SYSCALL"):
            return .connectionLost
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .dnsFailure
        case CURLE_COULDNT_CONNECT:
            switch osErrno {
            case ENETUNREACH, EHOSTUNREACH, ENETDOWN: return .networkUnreachable
            case ETIMEDOUT: return .timeout
            default: return .connectionRefused
            }
        case CURLE_OPERATION_TIMEDOUT:
            return .timeout
        case CURLE_PARTIAL_FILE, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_HTTP2,
            CURLE_HTTP2_STREAM, CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING:
            return .connectionLost
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ENGINE_NOTFOUND,
            CURLE_SSL_SHUTDOWN_FAILED:
            return .tlsFailure
        case CURLE_UNSUPPORTED_PROTOCOL:
            return .unsafeInput
        case CURLE_TOO_MANY_REDIRECTS:
            return .tooManyRedirects
        case CURLE_URL_MALFORMAT:
            return .invalidRequest
        case CURLE_RANGE_ERROR:
            return .rangeNotSupported
        case CURLE_FILESIZE_EXCEEDED:
            return .responseTooLarge
        case CURLE_WRITE_ERROR:
            return .writeFailed
        case CURLE_ABORTED_BY_CALLBACK:
            return .cancelled
        default:
            return .transport
        }
    }

    /// A libcurl failure as a ``DownloadError``.
    private func classify(_ code: CURLcode, checkpoint: TransferCheckpoint) -> DownloadError {
        let url = pending.request.url.absoluteString
        let detail = errorBuffer.pointee != 0
            ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
        var osErrno = 0
        _ = tessera_curl_easy_getinfo_long(easy, CURLINFO_OS_ERRNO, &osErrno)
        let systemErrno: Int32? = osErrno == 0 ? nil : Int32(osErrno)
        let kind = Self.errorCode(for: code, osErrno: Int32(osErrno), detail: detail)
        // A server that answers without a status line (HTTP/0.9, or not HTTP at all): libcurl
        // says "unsupported protocol", which is not what happened.
        if code == CURLE_UNSUPPORTED_PROTOCOL, detail.contains("HTTP/0.9") {
            return DownloadError(
                .unsupportedContent, "the server answered without an HTTP status line (HTTP/0.9, or not HTTP at all)",
                url: url, checkpoint: checkpoint, curlCode: Int(code.rawValue))
        }
        // libcurl gives up on a header line over its limit (about 100 KB) as "out of memory".
        if code == CURLE_OUT_OF_MEMORY {
            return DownloadError(
                .responseTooLarge, "the server's response has a header larger than libcurl accepts (100 KB), or memory ran out",
                url: url, checkpoint: checkpoint, curlCode: Int(code.rawValue))
        }
        if kind == .unsafeInput {
            var target: UnsafeMutablePointer<CChar>?
            _ = tessera_curl_easy_getinfo_string(easy, CURLINFO_REDIRECT_URL, &target)
            let location = target.map { String(cString: $0) } ?? responseHeaders["Location"]
            let message = location.map { "refused to follow a redirect to \(UntrustedText.printable($0)): only http and https URLs are downloaded" }
                ?? "only http and https URLs are downloaded (\(UntrustedText.printable(detail)))"
            return DownloadError(.unsafeInput, message, url: url, checkpoint: checkpoint, curlCode: Int(code.rawValue))
        }
        return DownloadError(
            kind, detail, url: url, checkpoint: checkpoint, curlCode: Int(code.rawValue), systemErrno: systemErrno)
    }
}

// MARK: - C entry points

private let curlWriteCallback: tessera_curl_data_callback = { pointer, size, count, userData in
    guard let pointer, let userData else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userData).takeUnretainedValue()
    return transfer.body(UnsafeRawPointer(pointer), count: size * count)
}

private let curlHeaderCallback: tessera_curl_data_callback = { pointer, size, count, userData in
    let length = size * count
    guard let pointer, let userData else { return length }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(userData).takeUnretainedValue()
    pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
        transfer.header(UnsafeBufferPointer(start: $0, count: length))
    }
    return length
}

/// Reason phrases for the statuses people meet while downloading.
enum HTTPStatus {
    static func reasonPhrase(_ status: Int) -> String? {
        switch status {
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 410: "Gone"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: nil
        }
    }
}
