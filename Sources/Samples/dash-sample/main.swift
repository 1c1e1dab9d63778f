// dash-sample: download MPEG-DASH streams with Tessera's DASHEntity plugin.
//
//   dash-sample                                  a demo stream from a loopback origin, verified
//   dash-sample [--output DIR] [--format SEL] [--network-wait SECONDS] URL.mpd ...
//
// SEL is best (best video + best audio, the default), worst, all, or representation ids
// joined by + (v720+a128). A task whose host cannot be reached waits for the network (the
// manager retries by itself) for at most --network-wait seconds (default 30), then is given up.
// Exits 0 when every task completed (and the demo verified), 1 otherwise, 2 for bad arguments.

import DASHEntity
import Foundation
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
var outputDirectory: String?
var format: String?
var urls: [String] = []
var networkWait = Duration.seconds(30)
let usage = "usage: dash-sample [--output DIR] [--format best|worst|all|ID+ID] [--network-wait SECONDS] [URL.mpd ...]"
func fail(_ message: String) -> Never {
    say("dash-sample: \(message)\n\(usage)")
    exit(2)
}
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--output", "-o":
        guard let value = arguments.popFirst(), !value.isEmpty else { fail("--output needs a value") }
        outputDirectory = value
    case "--format", "-f":
        guard let value = arguments.popFirst(), !value.isEmpty else { fail("--format needs a value") }
        format = value
    case "--network-wait":
        guard let value = arguments.popFirst(), let seconds = Double(value), seconds >= 0 else {
            fail("--network-wait needs a number of seconds")
        }
        networkWait = .milliseconds(Int64(seconds * 1000))
    case "--help", "-h":
        say(usage)
        exit(0)
    default:
        if argument.hasPrefix("-") { fail("unknown option \(argument)") }
        urls.append(argument)
    }
}

// 2. With no URL, serve the demo stream from a loopback origin (and ignore any proxy).
var origin: LoopbackOrigin?
var fixture: DASHFixture?
var engineConfiguration = CurlEngine.Configuration()
if urls.isEmpty {
    let demo = try await LoopbackOrigin.start()
    fixture = DASHFixture.install(on: demo)
    urls = fixture!.inputs
    origin = demo
    engineConfiguration.proxy = .none
}
let scratch = NSTemporaryDirectory() + "dash-sample-\(UUID().uuidString)"
let root = outputDirectory ?? (fixture != nil ? scratch + "/downloads" : "downloads")

// 3. A registry that knows DASH, one engine, one manager with a segment cache.
let registry = EntityRegistry()
DASHEntity.register(in: registry)
let engine = try CurlEngine(configuration: engineConfiguration)
var configuration = DownloadTaskManager.Configuration(downloadRoot: root)
configuration.maxNetworkWait = networkWait  // an unreachable host fails the task after this long
let manager = DownloadTaskManager(
    configuration: configuration, engine: engine,
    cache: try SegmentCache(directory: scratch + "/cache"), registry: registry)
let events = manager.events()  // subscribe before starting, so no event is missed

// 4. Inputs -> entities -> tasks.
var pending = Set<DownloadTaskID>()
var failures = 0
for url in urls {
    do {
        let input = EntityInput(url, format: format)
        for entity in try await registry.makeEntities(for: input, context: ResolveContext(engine: engine)) {
            let info = try await manager.start(entity)
            say("added   \(info.id)")
            pending.insert(info.id)
        }
    } catch {
        say("refused \(url): \(error)")
        failures += 1
    }
}

// 5. Follow the events until every task is finished.
if !pending.isEmpty {  // with nothing started, no event would ever come
    for await event in events {
        switch event {
        case .taskStateChanged(let info, let previous):
            say("state   \(info.title): \(previous) -> \(info.state)")
            guard info.state.isFinal, pending.remove(info.id) != nil else { break }
            if info.state == .completed {
                for output in info.outputs { say("saved   \(output.path)") }
            } else {
                failures += 1
                say("failed  \(info.title): \(info.error?.message ?? "\(info.state)")")
            }
        case .taskProgress(let info):
            let total = info.bytesTotal.map { " of \($0)" } ?? ""
            say("progress \(info.title): \(info.bytesDone)\(total) bytes, segment \(info.segmentsDone)/\(info.segmentsTotal), \(Int(info.bytesPerSecond / 1024)) KiB/s")
        case .taskError(let id, let error, let willRetry):
            say("error   \(id.entityKey): \(error.message)\(willRetry ? " (retrying)" : "")")
        default:
            break
        }
        if pending.isEmpty { break }
    }
}

// 6. The demo checks every byte against the origin.
if let fixture {
    let problems = await fixture.verify(downloadRoot: root)
    for problem in problems { say("verify  \(problem)") }
    if problems.isEmpty { say("verify  \(fixture.expectedFiles.count) files byte-identical to the origin") }
    failures += problems.count
}

await engine.shutdown()
try? await origin?.shutdown()
try? FileManager.default.removeItem(atPath: scratch)  // cache and default demo output; never --output
exit(failures == 0 ? 0 : 1)
