import Foundation
import NIOCore
#if canImport(Glibc)
import Glibc
#endif
import NIOHTTP1

/// What the origin will answer to one request, decided under the state lock and carried out on
/// the connection's event loop.
struct ResponsePlan {
    /// How long an injected stall lasts.
    enum Pause {
        case duration(Duration)
        case gate(LoopbackOrigin.Gate)
    }

    enum Source {
        case generated(OriginContent)
        case data([UInt8])
    }

    var status: HTTPResponseStatus
    var headers = NIOHTTP1.HTTPHeaders()
    var source: Source?
    /// The body bytes, as positions in the source.
    var body: Range<Int64> = 0..<0
    var path: String
    var dropAfter: Int64?
    var stall: (pause: Pause, afterBytes: Int64?)?
    var bytesPerSecond: Int?
    var closeAfter = false
}

extension OriginCore {
    /// Records the request and decides the response.
    func plan(for head: HTTPRequestHead, connection: Int) -> ResponsePlan {
        let path = String(head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        return state.withLock { state in
            state.requests.append(LoopbackOrigin.RecordedRequest(
                method: head.method.rawValue, path: path, uri: head.uri,
                headers: head.headers.map { .init(name: $0.name, value: $0.value) }, connection: connection,
                receivedAt: .now))
            state.requestCounts[path, default: 0] += 1
            let faults = state.takeFaults(for: path)
            var plan = Self.plan(head: head, path: path, faults: faults, state: &state)
            // Rules for every response, the content's and the injected ones alike.
            if head.method == .HEAD { plan.body = plan.body.lowerBound..<plan.body.lowerBound }
            if !head.isKeepAlive { plan.closeAfter = true }
            if plan.closeAfter { plan.headers.replaceOrAdd(name: "Connection", value: "close") }
            return plan
        }
    }

    private static func plan(
        head: HTTPRequestHead, path: String, faults: [LoopbackOrigin.Fault], state: inout State
    ) -> ResponsePlan {
        var plan = ResponsePlan(status: .ok, path: path)
        plan.headers.add(name: "Server", value: "TesseraLoopbackOrigin")
        plan.headers.add(name: "Date", value: httpDate(Date()))
        var ignoreRange = false
        var ignoreConditions = false
        var lengthDelta: Int64 = 0
        var rangeShift: Int64 = 0
        for fault in faults {
            switch fault {
            case .dropConnection(let bytes): plan.dropAfter = bytes
            case .stall(let duration, let after): plan.stall = (.duration(duration), after)
            case .hold(let gate, let after): plan.stall = (.gate(gate), after)
            case .throttle(let rate): plan.bytesPerSecond = max(1, rate)
            case .wrongContentLength(let delta): lengthDelta = delta
            case .ignoreRange: ignoreRange = true
            case .ignoreConditions: ignoreConditions = true
            case .shiftContentRange(let shift): rangeShift = shift
            case .redirect(let location, let status):
                return textPlan(plan, status: HTTPResponseStatus(statusCode: status), text: "", extra: [("Location", location)])
            case .status(let code, let retryAfter):
                let extra = retryAfter.map { [("Retry-After", $0)] } ?? []
                return textPlan(plan, status: HTTPResponseStatus(statusCode: code), text: "injected status \(code)\n", extra: extra)
            case .answer(let code, let body):
                return textPlan(plan, status: HTTPResponseStatus(statusCode: code), text: body, extra: [])
            }
        }
        guard let resource = state.resource(for: path) else {
            return textPlan(plan, status: .notFound, text: "no such path: \(path)\n", extra: [])
        }

        let version = state.versions[path] ?? 0
        let content = state.content(path: path, version: version)
        let size: Int64
        switch resource.body {
        case .generated(let generatedSize):
            size = generatedSize
            plan.source = .generated(content)
        case .data(let bytes):
            size = Int64(bytes.count)
            plan.source = .data(bytes)
        }
        let etag = "\"\(content.fingerprint)-\(size)\""
        let lastModified = httpDate(Date(timeIntervalSince1970: 1_700_000_000 + Double(version) * 86_400))
        plan.headers.add(name: "Content-Type", value: resource.contentType)
        if resource.sendsETag { plan.headers.add(name: "ETag", value: etag) }
        if resource.sendsLastModified { plan.headers.add(name: "Last-Modified", value: lastModified) }
        plan.headers.add(name: "Accept-Ranges", value: resource.acceptsRanges && !ignoreRange ? "bytes" : "none")
        for (name, value) in resource.extraHeaders { plan.headers.add(name: name, value: value) }

        // Preconditions (RFC 9110 §13.1.1, §13.1.4), evaluated before ranges.
        if ignoreConditions {
            // Careless server: no precondition is evaluated.
        } else if let ifMatch = head.headers.first(name: "If-Match") {
            let tags = ifMatch.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let matches = tags.contains("*") || (resource.sendsETag && tags.contains(etag))
            if !matches { return textPlan(plan, status: .preconditionFailed, text: "the resource changed\n", extra: []) }
        } else if let date = head.headers.first(name: "If-Unmodified-Since"), resource.sendsLastModified,
            let since = parseHTTPDate(date), let modified = parseHTTPDate(lastModified), modified > since
        {
            return textPlan(plan, status: .preconditionFailed, text: "the resource changed\n", extra: [])
        }

        plan.body = 0..<size
        if resource.acceptsRanges, !ignoreRange, let rangeHeader = head.headers.first(name: "Range") {
            var honour = true
            if let ifRange = head.headers.first(name: "If-Range") {
                honour = (resource.sendsETag && ifRange == etag)
                    || (resource.sendsLastModified && ifRange == lastModified)
            }
            if honour, let spec = parseRange(rangeHeader) {
                switch spec.resolve(size: size) {
                case .some(let span):
                    plan.status = .partialContent
                    plan.body = span
                    plan.headers.add(
                        name: "Content-Range",
                        value: "bytes \(span.lowerBound + rangeShift)-\(span.upperBound - 1 + rangeShift)/\(size)")
                case .none:
                    var unsatisfiable = textPlan(plan, status: .rangeNotSatisfiable, text: "", extra: [])
                    unsatisfiable.headers.add(name: "Content-Range", value: "bytes */\(size)")
                    return unsatisfiable
                }
            }
        }
        if resource.chunked {
            plan.headers.add(name: "Transfer-Encoding", value: "chunked")
        } else {
            plan.headers.add(name: "Content-Length", value: String(Int64(plan.body.count) + lengthDelta))
        }
        if lengthDelta != 0 { plan.closeAfter = true }
        return plan
    }

    private static func textPlan(
        _ base: ResponsePlan, status: HTTPResponseStatus, text: String, extra: [(String, String)]
    ) -> ResponsePlan {
        var plan = base
        plan.status = status
        plan.source = .data(Array(text.utf8))
        plan.body = 0..<Int64(text.utf8.count)
        plan.headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        plan.headers.add(name: "Content-Length", value: String(text.utf8.count))
        for (name, value) in extra { plan.headers.add(name: name, value: value) }
        return plan
    }

    /// One `bytes=` range of RFC 9110 §14.1.2; several ranges are not served (the whole body is).
    struct RangeSpec {
        var first: Int64?
        var last: Int64?

        func resolve(size: Int64) -> Range<Int64>? {
            if let first {
                guard first < size else { return nil }
                let end = min(last.map { $0 + 1 } ?? size, size)
                return first..<end
            }
            guard let suffix = last, suffix > 0, size > 0 else { return nil }
            return max(0, size - suffix)..<size
        }
    }

    static func parseRange(_ value: String) -> RangeSpec? {
        let text = value.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes="), !text.contains(",") else { return nil }
        let spec = text.dropFirst(6)
        guard let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        switch (Int64(first), Int64(last)) {
        case (.some(let a), .some(let b)) where a <= b && a >= 0: return RangeSpec(first: a, last: b)
        case (.some(let a), .none) where last.isEmpty && a >= 0: return RangeSpec(first: a, last: nil)
        case (.none, .some(let n)) where first.isEmpty: return RangeSpec(first: nil, last: n)
        default: return nil
        }
    }
}

/// The date of an IMF-fixdate, the only form this origin sends.
func parseHTTPDate(_ text: String) -> Date? {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter.date(from: text)
}

/// An IMF-fixdate (RFC 9110 §5.6.7).
func httpDate(_ date: Date) -> String {
    var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
    var parts = tm()
    gmtime_r(&seconds, &parts)
    let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
        + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
}

/// Serves one connection: reads a request, answers it from the plan, streams the body with
/// backpressure and carries out the injected faults.
final class OriginHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private struct Stream {
        var plan: ResponsePlan
        var next: Int64
        var sent: Int64 = 0
        var stalled = false
        var started = NIODeadline.now()
        var waiting = false
    }

    private let core: OriginCore
    private var head: HTTPRequestHead?
    private var stream: Stream?
    private var connection = 0
    private var isActive = false
    /// Set while ``pump(context:)`` runs: a write can report writability synchronously, and the
    /// running loop already checks it.
    private var isPumping = false

    init(core: OriginCore) {
        self.core = core
    }

    func channelActive(context: ChannelHandlerContext) {
        isActive = true
        connection = core.connectionOpened(context.channel)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if isActive { core.connectionClosed(context.channel) }
        isActive = false
        stream = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head else { return }
            self.head = nil
            let plan = core.plan(for: head, connection: connection)
            if let stall = plan.stall, stall.afterBytes == nil {
                after(stall.pause, context: context) { [self] in
                    guard isActive else { return }
                    begin(plan, context: context)
                }
            } else {
                begin(plan, context: context)
            }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        pump(context: context)
        context.fireChannelWritabilityChanged()
    }

    private func begin(_ plan: ResponsePlan, context: ChannelHandlerContext) {
        let head = HTTPResponseHead(version: .http1_1, status: plan.status, headers: plan.headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        stream = Stream(plan: plan, next: plan.body.lowerBound)
        pump(context: context)
    }

    private func pump(context: ChannelHandlerContext) {
        guard !isPumping else { return }
        isPumping = true
        defer { isPumping = false }
        // A flush can make the channel writable again at once, and the event saying so is
        // ignored while pumping, so write again for as long as that happens.
        while writeAvailable(context: context) {}
    }

    /// Writes body bytes while the channel is writable; returns `true` when bytes are left and
    /// the channel became writable again after the flush.
    private func writeAvailable(context: ChannelHandlerContext) -> Bool {
        guard isActive, var stream, !stream.waiting else { return false }
        let plan = stream.plan
        let end = plan.body.upperBound
        while stream.next < end, context.channel.isWritable {
            if let drop = plan.dropAfter, stream.sent >= drop {
                // Close once the bytes already written have gone out; closing at once would
                // throw away writes still queued for a slow reader.
                self.stream = nil
                let empty = context.channel.allocator.buffer(capacity: 0)
                context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(empty)))).assumeIsolated().whenComplete { _ in
                    context.close(promise: nil)
                }
                return false
            }
            if let stall = plan.stall, let after = stall.afterBytes, !stream.stalled, stream.sent >= after {
                stream.stalled = true
                wait(stream, for: stall.pause, context: context)
                return false
            }
            var chunk = min(Int64(64 * 1024), end - stream.next)
            if let drop = plan.dropAfter { chunk = min(chunk, drop - stream.sent) }
            if let stall = plan.stall, let after = stall.afterBytes, !stream.stalled {
                chunk = min(chunk, after - stream.sent)
            }
            if let rate = plan.bytesPerSecond {
                // Send in quanta of 20 ms worth (at most 16 KiB): small enough to keep the pace
                // smooth, large enough that many throttled streams do not drown in timers.
                let quantum = max(1, min(Int64(16 * 1024), Int64(rate) / 50, end - stream.next))
                let elapsed = Double((NIODeadline.now() - stream.started).nanoseconds) / 1e9
                let allowed = Int64(Double(rate) * elapsed) - stream.sent
                if allowed < quantum {
                    let seconds = Double(quantum - allowed) / Double(rate)
                    wait(stream, for: .duration(.nanoseconds(Int64(seconds * 1e9) + 100_000)), context: context)
                    return false
                }
                chunk = min(chunk, allowed, 16 * 1024)
            }
            let count = Int(chunk)
            var buffer = context.channel.allocator.buffer(capacity: count)
            let start = stream.next
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { pointer in
                let target = UnsafeMutableRawBufferPointer(rebasing: pointer[0..<count])
                switch plan.source {
                case .generated(let content):
                    content.fill(target, from: start)
                case .data(let bytes):
                    bytes.withUnsafeBytes { source in
                        target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[Int(start)..<Int(start) + count]))
                    }
                case nil:
                    break
                }
                return count
            }
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            stream.next += chunk
            stream.sent += chunk
            core.countBytes(count, for: plan.path)
        }
        if stream.next < end {
            self.stream = stream
            context.flush()
            // Not writable: channelWritabilityChanged resumes.
            return context.channel.isWritable && isActive
        }
        self.stream = nil
        if plan.closeAfter {
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        } else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
        return false
    }

    private func wait(_ current: Stream, for pause: ResponsePlan.Pause, context: ChannelHandlerContext) {
        var paused = current
        paused.waiting = true
        stream = paused
        context.flush()
        after(pause, context: context) { [self] in
            guard isActive, var resumed = stream else { return }
            resumed.waiting = false
            stream = resumed
            pump(context: context)
        }
    }

    /// Runs `body` on the connection's event loop once `pause` is over.
    private func after(_ pause: ResponsePlan.Pause, context: ChannelHandlerContext, _ body: @escaping () -> Void) {
        let loop = context.eventLoop
        switch pause {
        case .duration(let duration):
            loop.assumeIsolated().scheduleTask(in: .nanoseconds(duration.nanosecondsForNIO), body)
        case .gate(let gate):
            let bound = NIOLoopBound(body, eventLoop: loop)
            gate.whenOpen { loop.execute { bound.value() } }
        }
    }
}

extension Duration {
    var nanosecondsForNIO: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
