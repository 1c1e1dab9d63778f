// tessera-test-helper SCENARIO [ARGUMENTS]: runs one measured scenario in its own process and
// prints its figures as one JSON object on standard output. Used by the test suites.
import Foundation
import Tessera
import TesseraTesting

/// Resident memory of this process, in bytes.
func residentMemory() -> Int64 {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return (line.split(separator: " ").dropFirst().first.flatMap { Int64($0) } ?? 0) * 1024
    }
    return 0
}

func emit(_ values: [String: Any]) {
    let data = try! JSONSerialization.data(withJSONObject: values, options: [.sortedKeys])
    print(String(decoding: data, as: UTF8.self))
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("tessera-test-helper: \(message)\n".utf8))
    exit(1)
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func temporaryDirectory(_ name: String) -> String {
    let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("\(name)-\(getpid())")
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

func makeEngineConfiguration() -> CurlEngine.Configuration {
    var configuration = CurlEngine.Configuration()
    configuration.proxy = .none
    return configuration
}

/// An entity that needs no manifest request: its one segment is its key's URL.
final class SingleSegmentEntity: PayloadEntity<String>, DownloadParserProtocol, @unchecked Sendable {
    override class var entityType: String { "single" }

    func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        let url = URL(string: payload)!
        return DownloadManifest(outputs: [DownloadOutput(name: url.lastPathComponent, segments: [DownloadSegment(url: url, expectedSize: 1000)])])
    }
}

/// `memory SIZE`: one download of SIZE bytes through the engine; peak resident memory growth.
func memoryScenario(size: Int64) async throws {
    let directory = temporaryDirectory("tessera-memory")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try await withLoopbackOrigin { origin in
        let engine = try CurlEngine(configuration: makeEngineConfiguration())
        // Warm up both sides so their one-time allocations are in the baseline.
        _ = try await engine.transfer(.download(origin.url("/bytes/4194304/warm"), to: directory + "/warm"))
        let baseline = residentMemory()
        let peak = Peak(baseline)
        let path = "/bytes/\(size)/big.bin", file = directory + "/big.bin"
        let result = try await engine.transfer(.download(origin.url(path), to: file)) { _ in peak.note(residentMemory()) }
        let verified = await origin.content(at: path).verifyFile(atPath: file, size: size)
        await engine.shutdown()
        emit(["bytes": result.bytesWritten, "baseline": baseline, "peak": peak.value, "verified": verified])
    }
}

/// `scale COUNT`: COUNT single-segment tasks added, then started at once, and added one by one.
func scaleScenario(count: Int) async throws {
    let directory = temporaryDirectory("tessera-scale")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try await withLoopbackOrigin { origin in
        let engine = try CurlEngine(configuration: makeEngineConfiguration())
        var configuration = DownloadTaskManager.Configuration(downloadRoot: directory)
        configuration.maxConcurrentTasks = 3
        let manager = DownloadTaskManager(configuration: configuration, engine: engine)
        let events = manager.events()
        let drain = Task { for await _ in events {} }
        let baseline = residentMemory()
        let addStart = ContinuousClock.now
        for index in 0..<count {
            try await manager.add(SingleSegmentEntity(payload: origin.url("/bytes/1000/q/\(index).bin").absoluteString, entityKey: "q\(index)"))
        }
        let added = ContinuousClock.now - addStart
        let queuedRSS = residentMemory()
        let start = ContinuousClock.now
        await manager.startAll()
        _ = await eventually(within: .seconds(10), every: .milliseconds(1)) { !origin.requests.isEmpty }
        guard let first = origin.requests.first else { fail("no request reached the origin") }
        let infos = await manager.checkAll()
        let runningRSS = residentMemory()
        let running = infos.filter { $0.state.isRunning }.count
        let resolving = infos.filter { $0.state == .resolving }.count
        await manager.stopAll()

        // The same, added one by one with start (a command line reading a list).
        origin.resetCounters()
        let streamed = DownloadTaskManager(configuration: configuration, engine: engine)
        let streamStart = ContinuousClock.now
        for index in 0..<count {
            try await streamed.start(SingleSegmentEntity(payload: origin.url("/bytes/1000/s/\(index).bin").absoluteString, entityKey: "s\(index)"))
        }
        let streamedAdded = ContinuousClock.now - streamStart
        _ = await eventually(within: .seconds(10), every: .milliseconds(1)) { !origin.requests.isEmpty }
        let streamedFirst = origin.requests.first.map { seconds($0.receivedAt - streamStart) } ?? -1
        let streamedRSS = residentMemory()
        await streamed.stopAll()
        drain.cancel()
        await engine.shutdown()
        emit([
            "count": count, "baselineRSS": baseline, "queuedRSS": queuedRSS, "runningRSS": runningRSS,
            "addSeconds": seconds(added), "firstTransferSeconds": seconds(first.receivedAt - start),
            "runningTasks": running, "resolvingTasks": resolving, "tasks": infos.count,
            "streamedAddSeconds": seconds(streamedAdded), "streamedFirstTransferSeconds": streamedFirst,
            "streamedRSS": streamedRSS,
        ])
    }
}

final class Peak: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Int64
    init(_ value: Int64) { stored = value }
    var value: Int64 { lock.withLock { stored } }
    func note(_ value: Int64) { lock.withLock { stored = max(stored, value) } }
    func set(_ value: Int64) { lock.withLock { stored = value } }
}

let arguments = CommandLine.arguments.dropFirst()
do {
    switch arguments.first {
    case "memory":
        try await memoryScenario(size: Int64(arguments.dropFirst().first ?? "") ?? (200 << 20))
    case "scale":
        try await scaleScenario(count: Int(arguments.dropFirst().first ?? "") ?? 10_000)
    case "hash":
        guard let path = arguments.dropFirst().first else { fail("usage: tessera-test-helper hash FILE") }
        try hashScenario(path: path)
    case "decrypt":
        let values = Array(arguments.dropFirst())
        guard values.count == 4 else { fail("usage: tessera-test-helper decrypt IN OUT KEY-HEX IV-HEX") }
        try decryptScenario(input: values[0], output: values[1], key: values[2], iv: values[3])
    case "metalink":
        let values = Array(arguments.dropFirst())
        guard (2...3).contains(values.count), let count = Int(values[0]) else {
            fail("usage: tessera-test-helper metalink COUNT stream|tree [keep]")
        }
        try metalinkScenario(count: count, mode: values[1], keep: values.count == 3 && values[2] == "keep")
    case "metalink-expand":
        guard let count = Int(arguments.dropFirst().first ?? "") else { fail("usage: tessera-test-helper metalink-expand COUNT") }
        try await metalinkExpandScenario(count: count)
    case "metalink-complete":
        guard let count = Int(arguments.dropFirst().first ?? "") else { fail("usage: tessera-test-helper metalink-complete COUNT") }
        try await metalinkCompleteScenario(count: count)
    case "durable":
        let values = Array(arguments.dropFirst())
        guard values.count == 3 else { fail("usage: tessera-test-helper durable STORE ROOT MANIFEST-URL") }
        try await durableScenario(store: values[0], root: values[1], manifest: values[2])
    case "live-origin":
        try await liveOriginScenario(Array(arguments.dropFirst()))
    default:
        fail("usage: tessera-test-helper memory [SIZE] | scale [COUNT] | metalink COUNT stream|tree [keep] | metalink-expand COUNT | metalink-complete COUNT | durable STORE ROOT MANIFEST-URL | live-origin KEY=VALUE...")
    }
} catch {
    fail("\(error)")
}
