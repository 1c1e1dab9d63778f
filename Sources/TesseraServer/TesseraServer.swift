import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle
import Tessera
import UnixSignals

/// The daemon's HTTP server (Hummingbird): aria2's JSON-RPC on `POST /jsonrpc` and the
/// WebSocket `/jsonrpc` (with notifications), the native API (`/api/tasks`, `/api/groups`,
/// `/api/resolve`), server-sent events (`/events`), the dashboard (`/`) and `/metrics`.
///
/// Only glue: every answer comes from ``Aria2RPC``, ``TesseraDaemon``, ``EventJSON`` and
/// ``MetricsText``, which are tested without a network. Hummingbird's `MetricsMiddleware`
/// counts the requests through `MetricsSystem.factory`.
public struct TesseraServer: Sendable {
    /// Where and how the server listens.
    public struct Configuration: Sendable {
        /// The address to bind: `127.0.0.1` unless `--rpc-listen-all` (`0.0.0.0`).
        public var host = "127.0.0.1"
        /// The port; 0 for a free one (see `onRunning`).
        public var port = 6800
        /// Request bodies larger than this are refused (413).
        public var maxBodySize = 4 << 20
        /// WebSocket messages larger than this close the connection.
        public var maxMessageSize = 1 << 20
        /// Whether JSON-RPC answers carry `Access-Control-Allow-Origin: *` (aria2's
        /// `--rpc-allow-origin-all`), so that a web front-end served from another origin can read
        /// them. Off by default, as in aria2: otherwise any page open in the user's browser could
        /// read the daemon's answers.
        public var allowsAnyOrigin = false

        /// The defaults: 127.0.0.1:6800.
        public init() {}
    }

    /// The daemon.
    public let daemon: TesseraDaemon
    /// The configuration.
    public let configuration: Configuration
    let rpc: Aria2RPC
    let logger: Logger

    /// Creates the server; nothing listens until ``run(gracefulShutdownSignals:onRunning:)``.
    public init(daemon: TesseraDaemon, configuration: Configuration, logger: Logger = Logger(label: "tessera.serve")) {
        self.daemon = daemon
        self.configuration = configuration
        self.rpc = Aria2RPC(daemon: daemon)
        self.logger = logger
    }

    /// Serves until the calling task is cancelled (or, with `stopsOnSignals`, SIGTERM or SIGINT
    /// arrives), then stops accepting, ends the event streams and WebSockets, and returns.
    /// `onRunning` gets the port actually bound (useful with port 0).
    public func run(stopsOnSignals: Bool = false, onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let signals: [UnixSignal] = stopsOnSignals ? [.sigterm, .sigint] : []
        let router = Router(context: BasicWebSocketRequestContext.self)
        addRoutes(to: router)
        let webSocketRouter = Router(context: BasicWebSocketRequestContext.self)
        let rpc = self.rpc
        let daemon = self.daemon
        let maxMessage = configuration.maxMessageSize
        webSocketRouter.ws("/jsonrpc") { inbound, outbound, _ in
            try await Self.webSocket(inbound: inbound, outbound: outbound, rpc: rpc, daemon: daemon, maxMessage: maxMessage)
        }
        let host = configuration.host
        let app = Application(
            router: router,
            server: .http1WebSocketUpgrade(webSocketRouter: webSocketRouter, configuration: .init()),
            configuration: .init(address: .hostname(host, port: configuration.port), serverName: "tessera/\(Tessera.version)"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                await daemon.setBaseURL("http://\(host == "0.0.0.0" ? "127.0.0.1" : host):\(port)")
                await onRunning(port)
            },
            logger: logger)
        try await app.runService(gracefulShutdownSignals: signals)
    }

    // MARK: - Routes

    func addRoutes(to router: Router<BasicWebSocketRequestContext>) {
        // Request counts and durations, through `MetricsSystem.factory` (which `tessera serve`
        // bootstraps with the daemon's), before every route (it applies to the routes added after).
        router.add(middleware: MetricsMiddleware())
        let rpc = self.rpc
        let daemon = self.daemon
        let maxBody = configuration.maxBodySize
        let cors = configuration.allowsAnyOrigin
        router.post("/jsonrpc") { request, _ -> Response in
            let body = try await request.body.collect(upTo: maxBody)
            let answer = await rpc.respond(to: Data(buffer: body))
            return Self.json(data: answer, cors: cors)
        }
        router.on("/jsonrpc", method: .options) { _, _ -> Response in
            guard cors else { return Response(status: .ok) }
            var headers = HTTPFields()
            headers[.accessControlAllowOrigin] = "*"
            headers[.accessControlAllowMethods] = "POST, GET, OPTIONS"
            headers[.accessControlAllowHeaders] = "Content-Type"
            headers[.accessControlMaxAge] = "1728000"
            return Response(status: .ok, headers: headers)
        }
        router.get("/") { _, _ in Self.asset(DashboardAssets.html, type: "text/html; charset=utf-8") }
        router.get("/dashboard.js") { _, _ in Self.asset(DashboardAssets.javascript, type: "text/javascript; charset=utf-8") }
        router.get("/dashboard.css") { _, _ in Self.asset(DashboardAssets.css, type: "text/css; charset=utf-8") }
        router.get("/metrics") { _, _ -> Response in
            let text = await MetricsText.render(daemon: daemon)
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        router.get("/rpc-documents/{name}") { _, context -> Response in
            guard let name = context.parameters.get("name"), let data = await daemon.document(named: name) else {
                return Response(status: .notFound)
            }
            var headers = HTTPFields()
            headers[.contentType] = "application/metalink4+xml"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }
        router.get("/api/tasks") { request, _ -> Response in
            guard Self.authorized(request, daemon) else { return Self.unauthorized() }
            let tasks = await daemon.manager.checkAll()
            // A fleet's worker shows the fleet's other tasks too, each with the worker running it
            // (the unfinished ones and the last 100 finished).
            let local = Set(tasks.map(\.id))
            let fleet = await daemon.fleetTasksShown().filter { !local.contains($0.info.id) }
            let here = daemon.configuration.fleet?.worker
            return Self.json(.array(
                tasks.map { EventJSON.task("task", $0, worker: here) } + fleet.map { EventJSON.task("task", $0.info, worker: $0.worker) }))
        }
        router.get("/api/groups") { request, _ -> Response in
            guard Self.authorized(request, daemon) else { return Self.unauthorized() }
            let groups = await daemon.manager.checkAllGroups()
            return Self.json(.array(groups.map { group in
                var object = EventJSON.group(group).objectValue ?? [:]
                object["children"] = .array(group.children.map { .string(Aria2GID.of($0.id)) })
                return .object(object)
            }))
        }
        router.post("/api/resolve") { request, _ -> Response in
            guard Self.authorized(request, daemon) else { return Self.unauthorized() }
            let body = try await request.body.collect(upTo: maxBody)
            guard let input = (try? RPCValue.parse(Data(buffer: body)))?["input"]?.stringValue else {
                return Self.json(["error": "the body is {\"input\": \"URL or PLUGIN:KEY\"}"], status: .badRequest)
            }
            do {
                return Self.json(.array(try await daemon.resolve(input)))
            } catch let error as Aria2Error {
                return Self.json(["error": .string(error.message)], status: .unprocessableContent)
            }
        }
        router.get("/events") { request, _ -> Response in
            guard Self.authorized(request, daemon) else { return Self.unauthorized() }
            // A fleet's worker: its manager's tasks named with this worker, the fleet's other
            // tasks with theirs, the workers' health; then its manager's events and the fleet's
            // changes read once a second (a task it lets go is the fleet's to tell, not removed).
            let here = daemon.configuration.fleet?.worker
            let events = Self.untilGracefulShutdown(daemon.manager.events())
            let fleetEvents = daemon.fleetEvents()
            let snapshot = await daemon.manager.checkAll()
            let groups = await daemon.manager.checkAllGroups()
            let local = Set(snapshot.map(\.id))
            let others = await daemon.fleetTasksShown().filter { !local.contains($0.info.id) }
            let workers = here == nil ? nil : await daemon.fleetWorkers()
            let (stream, continuation) = AsyncStream.makeStream(of: RPCValue.self, bufferingPolicy: .bufferingNewest(4096))
            let relays = [
                Task {
                    for await event in events.stream {
                        if here != nil, case .taskRemoved = event { continue }
                        continuation.yield(EventJSON.object(for: event, worker: here))
                    }
                    continuation.finish()
                },
                Task {
                    guard let fleetEvents else { return }
                    for await object in fleetEvents { continuation.yield(object) }
                },
            ]
            continuation.onTermination = { _ in
                events.stop()
                for relay in relays { relay.cancel() }
            }
            var headers = HTTPFields()
            headers[.contentType] = "text/event-stream"
            headers[.cacheControl] = "no-cache"
            return Response(status: .ok, headers: headers, body: ResponseBody { writer in
                // What is there now first, then every change; ends with the server.
                for info in snapshot { try await writer.write(Self.serverSentEvent(EventJSON.task("task_added", info, worker: here))) }
                for task in others { try await writer.write(Self.serverSentEvent(EventJSON.task("task_added", task.info, worker: task.worker))) }
                if let workers { try await writer.write(Self.serverSentEvent(EventJSON.workers(workers))) }
                for group in groups { try await writer.write(Self.serverSentEvent(EventJSON.group(group))) }
                for await object in stream {
                    guard (try? await writer.write(Self.serverSentEvent(object))) != nil else { break }
                }
                continuation.finish()
                try await writer.finish(nil)
            })
        }
    }

    /// A relay of `events` that also ends at the server's graceful shutdown (the manager's
    /// stream ends only when the manager shuts down, after the server).
    static func untilGracefulShutdown(_ events: DownloadEventStream) -> (stream: AsyncStream<DownloadEvent>, stop: @Sendable () -> Void) {
        let (stream, continuation) = AsyncStream.makeStream(of: DownloadEvent.self, bufferingPolicy: .bufferingNewest(4096))
        let relay = Task {
            await withGracefulShutdownHandler {
                for await event in events { continuation.yield(event) }
            } onGracefulShutdown: {
                continuation.finish()
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in relay.cancel() }
        return (stream, { continuation.finish() })
    }

    static func serverSentEvent(_ value: RPCValue) -> ByteBuffer {
        ByteBuffer(string: "data: " + value.text + "\n\n")
    }

    /// The native API takes the secret as `Authorization: Bearer SECRET`, or `?token=SECRET`
    /// (an EventSource cannot send headers).
    static func authorized(_ request: Request, _ daemon: TesseraDaemon) -> Bool {
        guard daemon.configuration.secret != nil else { return true }
        if let header = request.headers[.authorization], header.hasPrefix("Bearer ") {
            return daemon.authorizes(String(header.dropFirst(7)))
        }
        return daemon.authorizes(request.uri.queryParameters.get("token"))
    }

    static func unauthorized() -> Response {
        json(["error": "Unauthorized"], status: .unauthorized)
    }

    static func json(_ value: RPCValue, status: HTTPResponse.Status = .ok, cors: Bool = false) -> Response {
        json(data: value.data, status: status, cors: cors)
    }

    static func json(data: Data, status: HTTPResponse.Status = .ok, cors: Bool = false) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        if cors { headers[.accessControlAllowOrigin] = "*" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func asset(_ text: String, type: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.contentSecurityPolicy] = "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
        headers[.xContentTypeOptions] = "nosniff"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    // MARK: - WebSocket

    static func webSocket(
        inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, rpc: Aria2RPC, daemon: TesseraDaemon, maxMessage: Int
    ) async throws {
        let events = untilGracefulShutdown(daemon.manager.events())
        defer { events.stop() }
        // A fleet's worker announces every task of the fleet, from the fleet's database (its
        // manager's events would miss the others' tasks, and read a task let go as removed).
        let fleetNotifications = daemon.fleetNotifications()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                if let fleetNotifications {
                    events.stop()
                    for await notification in fleetNotifications {
                        guard (try? await outbound.write(.text(notification.text))) != nil else { break }
                    }
                    return
                }
                for await event in events.stream {
                    guard let notification = Aria2Notifications.notification(for: event) else { continue }
                    guard (try? await outbound.write(.text(notification.text))) != nil else { break }
                }
            }
            group.addTask {
                try await cancelWhenGracefulShutdown {
                    for try await message in inbound.messages(maxSize: maxMessage) {
                        guard case .text(let text) = message else { continue }
                        let answer = await rpc.respond(to: Data(text.utf8))
                        try await outbound.write(.text(String(decoding: answer, as: UTF8.self)))
                    }
                }
            }
            // The connection ends when the client closes it (or the server stops).
            try await group.next()
            group.cancelAll()
        }
    }
}
