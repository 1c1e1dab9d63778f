import Foundation
import Tessera

/// aria2's JSON-RPC 2.0 interface over a ``TesseraDaemon``: a request body in, a response body
/// out. No transport here: the HTTP and WebSocket handlers of ``TesseraServer`` pass bodies
/// through it, and tests call it directly.
///
/// Every `aria2.*` method takes `"token:SECRET"` as its first parameter when the daemon has a
/// secret (a missing or wrong one answers `{"code":1,"message":"Unauthorized"}`, as aria2 does);
/// `system.listMethods` and `system.listNotifications` need none, and `system.multicall` checks
/// each call's own token.
public struct Aria2RPC: Sendable {
    /// The daemon the methods act on.
    public let daemon: TesseraDaemon

    /// Creates the interface.
    public init(daemon: TesseraDaemon) {
        self.daemon = daemon
    }

    /// The methods, as `system.listMethods` lists them.
    public static let methods = [
        "aria2.addUri", "aria2.addMetalink", "aria2.remove", "aria2.forceRemove", "aria2.pause", "aria2.pauseAll",
        "aria2.forcePause", "aria2.forcePauseAll", "aria2.unpause", "aria2.unpauseAll", "aria2.tellStatus", "aria2.getUris",
        "aria2.getFiles", "aria2.getPeers", "aria2.getServers", "aria2.tellActive", "aria2.tellWaiting", "aria2.tellStopped",
        "aria2.getOption", "aria2.changeOption", "aria2.getGlobalOption", "aria2.changeGlobalOption", "aria2.getGlobalStat",
        "aria2.purgeDownloadResult", "aria2.removeDownloadResult", "aria2.getVersion", "aria2.getSessionInfo",
        "aria2.saveSession", "aria2.shutdown", "aria2.forceShutdown", "system.multicall", "system.listMethods", "system.listNotifications",
    ]

    /// The notifications the WebSocket sends.
    public static let notifications = [
        "aria2.onDownloadStart", "aria2.onDownloadPause", "aria2.onDownloadStop", "aria2.onDownloadComplete",
        "aria2.onDownloadError", "aria2.onBtDownloadComplete",
    ]

    /// Answers a request body: one request, or a batch (an array) of at most the daemon's
    /// ``TesseraDaemon/Configuration/maxBatch``. A body that is no JSON gets JSON-RPC's parse error.
    public func respond(to body: Data) async -> Data {
        guard let request = try? RPCValue.parse(body) else {
            return Self.response(id: .null, result: .failure(.parseError)).data
        }
        if case .array(let requests) = request {
            guard !requests.isEmpty, requests.count <= daemon.configuration.maxBatch else {
                return Self.response(id: .null, result: .failure(Aria2Error(code: -32600, "Invalid Request: a batch holds 1 to \(daemon.configuration.maxBatch) calls"))).data
            }
            var responses: [RPCValue] = []
            for request in requests { responses.append(await respond(to: request)) }
            return RPCValue.array(responses).data
        }
        return await respond(to: request).data
    }

    /// Answers one decoded request.
    public func respond(to request: RPCValue) async -> RPCValue {
        guard let object = request.objectValue, let method = object["method"]?.stringValue else {
            return Self.response(id: request["id"] ?? .null, result: .failure(.invalidRequest))
        }
        let params: [RPCValue]
        switch object["params"] {
        case nil, .null?: params = []
        case .array(let values)?: params = values
        default: return Self.response(id: object["id"] ?? .null, result: .failure(.invalidRequest))
        }
        do {
            return Self.response(id: object["id"] ?? .null, result: .success(try await call(method, params)))
        } catch let error as Aria2Error {
            return Self.response(id: object["id"] ?? .null, result: .failure(error))
        } catch let error as DownloadError {
            return Self.response(id: object["id"] ?? .null, result: .failure(Aria2Error(UntrustedText.printable(error.message, limit: 500))))
        } catch {
            return Self.response(id: object["id"] ?? .null, result: .failure(Aria2Error(UntrustedText.printable("\(error)", limit: 500))))
        }
    }

    static func response(id: RPCValue, result: Result<RPCValue, Aria2Error>) -> RPCValue {
        switch result {
        case .success(let value): return ["jsonrpc": "2.0", "id": id, "result": value]
        case .failure(let error): return ["jsonrpc": "2.0", "id": id, "error": ["code": .int(Int64(error.code)), "message": .string(error.message)]]
        }
    }

    /// Calls one method with its parameters (the token still first).
    public func call(_ method: String, _ parameters: [RPCValue]) async throws -> RPCValue {
        switch method {
        case "system.listMethods": return .array(Self.methods.map(RPCValue.string))
        case "system.listNotifications": return .array(Self.notifications.map(RPCValue.string))
        case "system.multicall": return try await multicall(parameters)
        default: break
        }
        guard method.hasPrefix("aria2."), Self.methods.contains(method) else {
            throw Aria2Error("No such method: \(UntrustedText.printable(method, limit: 60))")
        }
        var params = parameters
        var token: String?
        if let first = params.first?.stringValue, first.hasPrefix("token:") {
            token = String(first.dropFirst(6))
            params.removeFirst()
        }
        guard daemon.authorizes(token) else { throw Aria2Error.unauthorized }
        return try await aria2(String(method.dropFirst(6)), Parameters(params))
    }

    private func multicall(_ parameters: [RPCValue]) async throws -> RPCValue {
        guard let calls = parameters.first?.arrayValue else { throw Aria2Error("system.multicall takes an array of calls") }
        guard calls.count <= daemon.configuration.maxBatch else {
            throw Aria2Error("system.multicall takes at most \(daemon.configuration.maxBatch) calls")
        }
        var results: [RPCValue] = []
        for call in calls {
            guard let name = call["methodName"]?.stringValue, name != "system.multicall" else {
                results.append(["code": 1, "message": "Invalid method call"])
                continue
            }
            let params = call["params"]?.arrayValue ?? []
            do {
                results.append(.array([try await self.call(name, params)]))
            } catch let error as Aria2Error {
                results.append(["code": .int(Int64(error.code)), "message": .string(error.message)])
            } catch {
                results.append(["code": 1, "message": .string(UntrustedText.printable("\(error)", limit: 500))])
            }
        }
        return .array(results)
    }

    /// Positional parameters with aria2's checks.
    struct Parameters {
        var values: [RPCValue]
        init(_ values: [RPCValue]) { self.values = values }

        func gid(_ index: Int) throws -> String {
            guard index < values.count, let gid = values[index].stringValue else { throw Aria2Error("the GID is missing") }
            return gid
        }

        func string(_ index: Int) -> String? { index < values.count ? values[index].stringValue : nil }

        func int(_ index: Int, name: String) throws -> Int {
            guard index < values.count, let value = values[index].intValue, let int = Int(exactly: value) else {
                throw Aria2Error("\(name) must be an integer")
            }
            return int
        }

        func object(_ index: Int) -> [String: RPCValue] {
            index < values.count ? values[index].objectValue ?? [:] : [:]
        }

        func keys(_ index: Int) -> [String]? {
            guard index < values.count, let array = values[index].arrayValue else { return nil }
            return array.compactMap(\.stringValue)
        }
    }

    private func aria2(_ method: String, _ params: Parameters) async throws -> RPCValue {
        switch method {
        case "addUri":
            guard let uris = params.values.first?.arrayValue?.compactMap(\.stringValue), !uris.isEmpty else {
                throw Aria2Error("addUri takes an array of URIs")
            }
            let options = try await daemon.addOptions(params.object(1))
            return .string(try await daemon.addURI(uris, options: options))
        case "addMetalink":
            guard let text = params.string(0), let document = Data(base64Encoded: text, options: .ignoreUnknownCharacters) else {
                throw Aria2Error("addMetalink takes a base64 Metalink document")
            }
            let options = try await daemon.addOptions(params.object(1))
            return .array(try await daemon.addMetalink(document, options: options).map(RPCValue.string))
        case "remove", "forceRemove":
            return .string(try await daemon.remove(try params.gid(0)))
        case "pause", "forcePause":
            return .string(try await daemon.pause(try params.gid(0)))
        case "unpause":
            return .string(try await daemon.unpause(try params.gid(0)))
        case "pauseAll", "forcePauseAll":
            await daemon.pauseAll()
            return "OK"
        case "unpauseAll":
            await daemon.unpauseAll()
            return "OK"
        case "tellStatus":
            return try await daemon.status(gid: try params.gid(0)).json(keys: params.keys(1))
        case "getFiles":
            let status = try await daemon.status(gid: try params.gid(0))
            return status.json(keys: ["files"])["files"] ?? []
        case "getUris":
            let status = try await daemon.status(gid: try params.gid(0))
            let uris = status.files.first?.uris ?? []
            return .array(uris.enumerated().map { index, uri in ["uri": .string(uri), "status": index == 0 ? "used" : "waiting"] })
        case "getPeers", "getServers":
            _ = try await daemon.status(gid: try params.gid(0))
            return []
        case "tellActive":
            return .array(await daemon.allStatuses().filter { $0.status == "active" }.map { $0.json(keys: params.keys(0)) })
        case "tellWaiting":
            let offset = try params.int(0, name: "offset")
            let count = try params.int(1, name: "num")
            let list = await daemon.allStatuses().filter { $0.status == "waiting" || $0.status == "paused" }
            return .array(Self.window(list, offset: offset, count: count).map { $0.json(keys: params.keys(2)) })
        case "tellStopped":
            let offset = try params.int(0, name: "offset")
            let count = try params.int(1, name: "num")
            return .array(await daemon.stoppedStatuses(offset: offset, count: count).map { $0.json(keys: params.keys(2)) })
        case "getOption":
            return .object((try await daemon.options(of: try params.gid(0))).mapValues(RPCValue.string))
        case "changeOption":
            _ = try await daemon.status(gid: try params.gid(0))
            let options = params.object(1)
            guard options.isEmpty else {
                throw Aria2Error("tessera serve has no per-download options to change (\(options.keys.sorted().joined(separator: ", ")))")
            }
            return "OK"
        case "getGlobalOption":
            return .object((await daemon.globalOptions()).mapValues(RPCValue.string))
        case "changeGlobalOption":
            try await daemon.changeGlobalOptions(params.object(0))
            return "OK"
        case "getGlobalStat":
            return .object((await daemon.globalStat()).mapValues(RPCValue.string))
        case "purgeDownloadResult":
            await daemon.purgeResults()
            return "OK"
        case "removeDownloadResult":
            try await daemon.removeResult(try params.gid(0))
            return "OK"
        case "getVersion":
            return [
                "version": .string(Tessera.version),
                "enabledFeatures": ["HTTP", "HTTPS", "Metalink", "DASH", "HLS", "playurl", "Async DNS", "GZip", "Checksum"],
            ]
        case "getSessionInfo":
            return ["sessionId": .string(daemon.sessionID)]
        case "shutdown", "forceShutdown":
            try await daemon.requestShutdown()
            return "OK"
        case "saveSession":
            await daemon.saveSession()
            return "OK"
        default:
            throw Aria2Error("No such method: aria2.\(UntrustedText.printable(method, limit: 60))")
        }
    }

    /// aria2's window of `tellWaiting`/`tellStopped`: `count` entries from `offset`; a negative
    /// offset counts from the end and goes backwards.
    static func window<T>(_ list: [T], offset: Int, count: Int) -> [T] {
        guard count > 0, !list.isEmpty else { return [] }
        if offset >= 0 {
            guard offset < list.count else { return [] }
            return Array(list[offset..<min(list.count, offset + min(count, list.count))])
        }
        // -1 is the last; entries are returned in reverse order.
        guard offset >= -list.count else { return [] }
        let start = list.count + offset
        let end = max(-1, start - min(count, list.count))
        return stride(from: start, to: end, by: -1).map { list[$0] }
    }
}
