// hls-sample: download HLS streams with Tessera and the HLSEntity plugin.
//
//   hls-sample                               the built-in demo stream from a loopback origin, verified
//   hls-sample URL… [--format F] [--output DIR]
//
// --format: best (default: the best variant and its audio), worst, all, or names such as 720p+English.
// --output: where files go (default ./downloads; for the demo, a temporary directory removed afterwards).
import Foundation
import HLSEntity
import Tessera
import TesseraTesting

/// Every line leaves through Tessera's one sanitizer: titles, names and error messages come from
/// the network, and none of their control or bidirectional characters may reach the terminal.
func say(_ text: String) {
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        print(UntrustedText.printable(String(line), limit: .max, marksCut: false))
    }
}

var urls: [String] = []
var format = "best"
var outputDirectory: String?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--format", "--output":
        guard let value = arguments.popFirst() else {
            say("\(argument) needs a value")
            exit(2)
        }
        if argument == "--format" { format = value } else { outputDirectory = value }
    case "-h", "--help":
        say("usage: hls-sample [URL…] [--format best|worst|all|NAME+NAME] [--output DIR]")
        exit(0)
    default:
        urls.append(argument)
    }
}

// 1. A registry that knows the plugin, an engine, a cache and a manager.
let registry = EntityRegistry()
HLSEntity.register(in: registry)
let demo = urls.isEmpty
var engineConfiguration = CurlEngine.Configuration()
if demo { engineConfiguration.proxy = .none }  // the origin is on 127.0.0.1
let engine = try CurlEngine(configuration: engineConfiguration)
let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("hls-sample-\(UUID().uuidString)").path
let root = outputDirectory ?? (demo ? scratch + "/downloads" : "downloads")
let manager = DownloadTaskManager(
    configuration: .init(downloadRoot: root), engine: engine,
    cache: try SegmentCache(directory: scratch + "/cache"), registry: registry)

// 2. For the demo, an origin serving the fixture stream.
var origin: LoopbackOrigin?
var fixture: HLSFixture?
if demo {
    let server = try await LoopbackOrigin.start()
    let installed = HLSFixture.install(on: server)
    origin = server
    fixture = installed
    urls = installed.inputs
    say("demo: serving \(installed.masterURL.absoluteString)")
}

// 3. Inputs become entities; start them all, then follow the events.
let events = manager.events()
var pending = Set<DownloadTaskID>()
var failed = false
for url in urls {
    do {
        let input = EntityInput(url, format: format)
        for entity in try await registry.makeEntities(for: input, context: ResolveContext(engine: engine)) {
            pending.insert(try await manager.start(entity).id)
        }
    } catch {
        say("\(url): \(error)")
        failed = true
    }
}
if !pending.isEmpty {  // (nothing to wait for when no input was accepted)
    for await event in events {
        switch event {
        case .taskStateChanged(let info, let previous):
            say("\(info.title): \(previous) -> \(info.state)\(info.error.map { " (\($0))" } ?? "")")
            if info.state.isFinal {
                pending.remove(info.id)
                if info.state == .completed {
                    for output in info.outputs { say("  \(output.path)") }
                } else {
                    failed = true
                }
            }
        case .taskProgress(let info):
            let total = info.bytesTotal.map { " of \($0)" } ?? ""
            say("\(info.title): \(info.bytesDone)\(total) bytes, \(info.segmentsDone)/\(info.segmentsTotal) segments")
        case .taskError(let id, let error, let willRetry) where willRetry:
            say("\(id.entityKey): retrying after \(error)")
        default:
            break
        }
        if pending.isEmpty { break }
    }
}

// 4. The demo checks every byte against what the origin served.
if let fixture {
    let problems = await fixture.verify(downloadRoot: root)
    for problem in problems { say("verify: \(problem)") }
    if problems.isEmpty { say("verify: \(fixture.expectedFiles.joined(separator: ", ")) byte-identical") }
    failed = failed || !problems.isEmpty
}
await manager.stopAll()
await engine.shutdown()
try? await origin?.shutdown()
try? FileManager.default.removeItem(atPath: scratch)  // the cache (and the demo's files unless --output)
exit(failed ? 1 : 0)
