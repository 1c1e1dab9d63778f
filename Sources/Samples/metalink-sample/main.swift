// metalink-sample: download the files of Metalink documents with Tessera.
//
//   metalink-sample                         a built-in loopback origin serving a 3-file .meta4 with
//                                           a broken mirror and a corrupted piece; checks the result
//   metalink-sample URL... [--output DIR] [--location de,fr]
//
// Each <file> of a Metalink is a task of its own; the document is their group.
import Foundation
import MetalinkEntity
import Tessera
import TesseraTesting

/// Every line leaves through Tessera's one sanitizer: titles, names and error messages come from
/// the network, and none of their control or bidirectional characters may reach the terminal.
func say(_ text: String) {
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        print(UntrustedText.printable(String(line), limit: .max, marksCut: false))
    }
}

// 1. Arguments, parsed by hand.
var urls: [String] = []
var output: String?
var pluginArguments = PluginArguments()
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--output", "-o": output = arguments.popFirst()
    case "--location": try pluginArguments.add("metalink:location=\(arguments.popFirst() ?? "")")
    case "--help", "-h":
        say("usage: metalink-sample [URL.meta4 ...] [--output DIR] [--location de,fr]")
        exit(0)
    default: urls.append(argument)
    }
}

// 2. No URL: serve the fixture from a loopback origin and download that.
let origin = urls.isEmpty ? try await LoopbackOrigin.start() : nil
let fixture = origin.map { MetalinkFixture.install(on: $0) }
let inputs = fixture?.inputs ?? urls
let scratch = NSTemporaryDirectory() + "metalink-sample-\(UUID().uuidString)"
let root = output ?? (fixture != nil ? scratch + "/downloads" : "downloads")

// 3. A registry that knows Metalink, one engine, one manager with a segment cache.
let registry = EntityRegistry()
MetalinkEntity.register(in: registry)
var engineConfiguration = CurlEngine.Configuration()
if origin != nil { engineConfiguration.proxy = .none }  // loopback: never through a proxy
let engine = try CurlEngine(configuration: engineConfiguration)
let manager = DownloadTaskManager(
    configuration: .init(downloadRoot: root), engine: engine,
    cache: try SegmentCache(directory: scratch + "/cache"), registry: registry)
let events = manager.events()

// 4. Each input becomes one entity per file (the registry fetches the document), then starts.
var tasks = Set<DownloadTaskID>()
for input in inputs {
    do {
        let entities = try await registry.makeEntities(
            for: EntityInput(input, arguments: pluginArguments), context: ResolveContext(engine: engine))
        for entity in entities { tasks.insert(try await manager.start(entity).id) }
    } catch {
        say("\(input): \(error)")
    }
}

// 5. Follow the events until every task has finished.
var finished: [DownloadTaskID: DownloadTaskInfo] = [:]
var groupStates: [String: String] = [:]
func megabytes(_ bytes: Int64) -> String { String(format: "%.2f MB", Double(bytes) / 1_000_000) }
func rollUp(_ group: DownloadGroupInfo) -> String {
    let total = group.rollUp.bytesTotal.map(megabytes) ?? "?"
    return "group \(group.key): \(group.state), \(group.childCount) files, \(megabytes(group.rollUp.bytesDone)) of \(total)"
}
if tasks.isEmpty {
    say("nothing to download")
    exit(1)
}
for await event in events {
    switch event {
    case .taskStateChanged(let info, let previous) where tasks.contains(info.id):
        let why = info.state.isFinal && info.state != .completed ? ": \(info.error?.message ?? "?")" : ""
        say("\(info.title): \(previous) -> \(info.state)\(why)")
        if info.state.isFinal { finished[info.id] = info }
    case .taskProgress(let info) where tasks.contains(info.id):
        let percent = info.fractionDone.map { String(format: "%3.0f%%", $0 * 100) } ?? "  ?"
        say("  \(info.title): \(percent) \(megabytes(info.bytesDone)) at \(megabytes(Int64(info.bytesPerSecond)))/s")
    case .taskError(let id, let error, true) where tasks.contains(id):
        say("  \(id.entityKey.split(separator: "|").last ?? ""): retrying after \(error.code): \(error.message)")
    case .groupUpdated(let group) where groupStates[group.key] != "\(group.state) \(group.childCount)":
        groupStates[group.key] = "\(group.state) \(group.childCount)"
        say(rollUp(group))
    default: break
    }
    if finished.count == tasks.count { break }
}

// 6. Sum up; with the fixture, compare every byte with the origin's.
var success = !tasks.isEmpty && finished.values.allSatisfy { $0.state == .completed }
for info in finished.values.sorted(by: { $0.title < $1.title }) {
    say("\(info.state == .completed ? "ok  " : "FAIL") \(info.outputs.first?.path ?? info.title)")
}
for group in await manager.checkAllGroups() { say(rollUp(group)) }
if let fixture {
    let problems = await fixture.verify(downloadRoot: root)
    for problem in problems { say("problem: \(problem)") }
    success = success && problems.isEmpty
    say(problems.isEmpty ? "verified: every file is byte-identical to the origin's" : "verification failed")
}
await engine.shutdown()
try? await origin?.shutdown()
try? FileManager.default.removeItem(atPath: scratch)  // the cache, and the downloads unless --output
exit(success ? 0 : 1)
