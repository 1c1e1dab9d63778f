// playurl-sample: download videos by cid through a playurl API with Tessera.
//
//   playurl-sample                         the built-in demo: a loopback origin serves a playurl
//                                          API (JSON, XML, failing primary URLs); verified after
//   playurl-sample --api 'https://…/playurl?cid={cid}&qn={quality}' [--quality 64]
//                  [--referer https://www.bilibili.com] [--output DIR] 170001/1001 1002 …
//
// Inputs are <cid>, <aid>/<cid> or playurl:<aid>/<cid>; the cids of one aid form one group.
import Foundation
import PlayurlEntity
import Tessera
import TesseraTesting

/// Every line leaves through Tessera's one sanitizer: titles, names and error messages come from
/// the network, and none of their control or bidirectional characters may reach the terminal.
func say(_ text: String) {
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        print(UntrustedText.printable(String(line), limit: .max, marksCut: false))
    }
}

func describe(_ error: any Error) -> String { (error as? DownloadError)?.message ?? "\(error)" }

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("playurl-sample: \(message)\n".utf8))
    exit(2)
}

// 1. Arguments, parsed by hand.
var output: String?
var inputs: [String] = []
var pluginArguments = PluginArguments()
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    func value() -> String {
        guard let value = arguments.popFirst() else { fail("\(argument) needs a value") }
        return value
    }
    do {
        switch argument {
        case "--output", "-o": output = value()
        case "--api": try pluginArguments.add("playurl:api=\(value())")
        case "--quality": try pluginArguments.add("playurl:quality=\(value())")
        case "--referer": try pluginArguments.add("playurl:referer=\(value())")
        case "--plugin-arg": try pluginArguments.add(value())
        case "--help", "-h": fail("usage: playurl-sample [--output DIR] [--api TEMPLATE] [--quality N] [--referer URL] [CID | AID/CID ...]")
        default: inputs.append(argument.hasPrefix("playurl:") ? argument : "playurl:\(argument)")
        }
    } catch { fail(describe(error)) }
}

// 2. No inputs: serve the fixture on a loopback origin and download that.
let origin: LoopbackOrigin? = inputs.isEmpty ? try await LoopbackOrigin.start() : nil
let fixture = origin.map { PlayurlFixture.install(on: $0) }
if let fixture {
    inputs = fixture.inputs
    for text in fixture.pluginArguments { try pluginArguments.add(text) }
}
let temporary = NSTemporaryDirectory() + "playurl-sample-\(getpid())"
let root = output ?? (fixture != nil ? temporary + "/downloads" : "downloads")

// 3. A registry that knows the plugin, one engine, a manager with a segment cache.
let registry = EntityRegistry()
PlayurlEntity.register(in: registry)
var engineConfiguration = CurlEngine.Configuration()
if origin != nil { engineConfiguration.proxy = .none }  // the loopback origin is never behind a proxy
let engine = try CurlEngine(configuration: engineConfiguration)
let manager = DownloadTaskManager(
    configuration: .init(downloadRoot: root), engine: engine,
    cache: try SegmentCache(directory: temporary + "/cache"), registry: registry)
let events = manager.events()

// 4. Inputs become entities, entities become tasks.
var pending = Set<DownloadTaskID>()
var failures = 0
for text in inputs {
    do {
        let input = EntityInput(text, arguments: pluginArguments)
        for entity in try await registry.makeEntities(for: input, context: ResolveContext(engine: engine)) {
            pending.insert(try await manager.start(entity).id)
        }
    } catch {
        say("✗ \(text): \(describe(error))")
        failures += 1
    }
}
say("Downloading \(pending.count) cids into \(root)")

// 5. Follow the events until every task is finished; the count of tasks that did not complete.
func follow(_ events: DownloadEventStream, until ids: Set<DownloadTaskID>) async -> Int {
    func megabytes(_ bytes: Int64) -> String { String(format: "%.2f MB", Double(bytes) / 1_000_000) }
    var pending = ids, failed = 0
    var groupStates: [String: DownloadGroupInfo.State] = [:]
    var stream = events.makeAsyncIterator()
    while !pending.isEmpty, let event = await stream.next() {
        switch event {
        case .taskStateChanged(let info, let previous):
            let why = info.state == .completed ? "" : info.error.map { " — \($0.code): \($0.message)" } ?? ""
            say("\(info.title): \(previous) → \(info.state)\(why)")
            if info.state.isFinal, pending.remove(info.id) != nil, info.state != .completed { failed += 1 }
        case .taskProgress(let info):
            let percent = info.fractionDone.map { String(format: "%3.0f%%", $0 * 100) } ?? "   ?"
            say("  \(info.title): \(percent) \(megabytes(info.bytesDone)) at \(megabytes(Int64(info.bytesPerSecond)))/s")
        case .taskError(let id, let error, true):
            say("  \(id.entityKey): retrying after \(error.code): \(error.message)")
        case .groupUpdated(let group) where groupStates[group.key] != group.state:
            groupStates[group.key] = group.state
            say("group \(group.key): \(group.state), \(group.childCount) cids, \(megabytes(group.rollUp.bytesDone))")
        default:
            break
        }
    }
    return failed
}
failures += await follow(events, until: pending)
for group in await manager.checkAllGroups() {
    let total = group.rollUp.bytesTotal.map { " of \($0)" } ?? ""
    say("group \(group.key): \(group.state), \(group.childCount) cids, \(group.rollUp.bytesDone)\(total) bytes")
}

// 6. The demo checks every byte against what the origin served.
if let fixture {
    let problems = await fixture.verify(downloadRoot: root)
    for problem in problems { say("✗ \(problem)") }
    if problems.isEmpty { say("✓ \(fixture.expectedFiles.count) files verified byte for byte") }
    failures += problems.count
}
await engine.shutdown()
try await origin?.shutdown()
try? FileManager.default.removeItem(atPath: temporary)  // the cache, and the demo's downloads unless --output
say(failures == 0 ? "All done." : "\(failures) problem(s).")
exit(failures == 0 ? 0 : 1)
