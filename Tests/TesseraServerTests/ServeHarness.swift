import DASHEntity
import Foundation
import MetalinkEntity
import Tessera
import TesseraServer
import TesseraTesting

/// A loopback origin, an engine, a manager and a daemon over a temporary download root; the
/// RPC is called directly (no server).
struct ServeHarness {
    let origin: LoopbackOrigin
    let engine: CurlEngine
    let manager: DownloadTaskManager
    let daemon: TesseraDaemon
    let rpc: Aria2RPC
    let root: TemporaryDirectory
    let secret: String?

    /// `cache`: the manager has a segment cache. The engine and the cache report to the daemon's
    /// metrics (no global bootstrap).
    static func with(
        secret: String? = "s3cret", maxBatch: Int = 100, cache: Bool = false, fleet: (any DaemonFleet)? = nil,
        _ body: (ServeHarness) async throws -> Void
    ) async throws {
        let origin = try await LoopbackOrigin.start()
        let root = TemporaryDirectory("serve")
        let metrics = DaemonMetrics()
        var engineConfiguration = CurlEngine.Configuration.forTests()
        engineConfiguration.metricsFactory = metrics.factory
        let engine = try CurlEngine(configuration: engineConfiguration)
        let registry = EntityRegistry()
        DASHEntity.register(in: registry)
        MetalinkEntity.register(in: registry)
        var configuration = DownloadTaskManager.Configuration(downloadRoot: root.file("downloads"))
        configuration.progressInterval = .milliseconds(50)
        configuration.maxConcurrentTasks = 2
        let segmentCache = cache ? try SegmentCache(directory: root.file("cache"), metricsFactory: metrics.factory) : nil
        let manager = DownloadTaskManager(configuration: configuration, engine: engine, cache: segmentCache, registry: registry)
        var daemonConfiguration = TesseraDaemon.Configuration(
            downloadRoot: root.file("downloads"), secret: secret, documentDirectory: root.file("documents"))
        daemonConfiguration.maxBatch = maxBatch
        daemonConfiguration.fleet = fleet
        let daemon = TesseraDaemon(manager: manager, configuration: daemonConfiguration, metrics: metrics) { input, directory in
            try await registry.makeEntities(
                for: EntityInput(input, destinationDirectory: directory), context: ResolveContext(engine: engine))
        }
        await daemon.start()
        let harness = ServeHarness(
            origin: origin, engine: engine, manager: manager, daemon: daemon, rpc: Aria2RPC(daemon: daemon), root: root, secret: secret)
        do {
            try await body(harness)
        } catch {
            await harness.tearDown()
            throw error
        }
        await harness.tearDown()
    }

    func tearDown() async {
        await manager.shutdown()
        await daemon.shutdown()
        await engine.shutdown()
        try? await origin.shutdown()
        root.cleanUp()
    }

    /// Calls `method` with the token first (when there is a secret) and returns the whole response.
    func call(_ method: String, _ params: [RPCValue] = [], id: RPCValue = 1) async -> RPCValue {
        let all = (secret.map { [RPCValue.string("token:" + $0)] } ?? []) + params
        return await rpc.respond(to: ["jsonrpc": "2.0", "id": id, "method": .string(method), "params": .array(all)])
    }

    /// The result of a call, or `nil` when it answered an error.
    func result(_ method: String, _ params: [RPCValue] = []) async -> RPCValue? {
        await call(method, params)["result"]
    }

    /// A status field of `gid`.
    func field(_ gid: String, _ key: String) async -> RPCValue? {
        await result("aria2.tellStatus", [.string(gid), [.string(key)]])?[key]
    }

    /// Polls `gid`'s status until it is `status` (10 s at most).
    func waitForStatus(_ gid: String, _ status: String, timeout: Duration = .seconds(20)) async -> Bool {
        await eventually(within: timeout) { await field(gid, "status")?.stringValue == status }
    }
}
