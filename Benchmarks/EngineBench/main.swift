// tessera-engine-bench: downloads every URL of a list with CurlEngine, N at a time.
//
//   tessera-engine-bench --input URLS.txt --dir OUTDIR --parallel N [--buffer-size BYTES] [--threads N] [--verbose]
//
// `--threads`: the engine's threads (the library's default is one; `tessera` runs two on a
// machine with two cores or more).
// Each URL is saved in OUTDIR under its last path component. Exit status 1 and one line on
// stderr on any failure; nothing on stdout on success unless --verbose.

import Foundation
import Tessera

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("tessera-engine-bench: \(message)\n".utf8))
    exit(1)
}

struct Options {
    var input = ""
    var directory = ""
    var parallel = 16
    var bufferSize: Int?
    var threads: Int?
    var verbose = false

    init(_ arguments: [String]) {
        var rest = arguments[...]
        func value(_ flag: String) -> String {
            guard let next = rest.popFirst() else { fail("\(flag) needs a value") }
            return next
        }
        func positive(_ flag: String) -> Int {
            guard let number = Int(value(flag)), number > 0 else { fail("\(flag) needs a positive integer") }
            return number
        }
        while let flag = rest.popFirst() {
            switch flag {
            case "--input": input = value(flag)
            case "--dir": directory = value(flag)
            case "--parallel": parallel = positive(flag)
            case "--buffer-size": bufferSize = positive(flag)
            case "--threads": threads = positive(flag)
            case "--verbose": verbose = true
            default:
                fail("unknown argument \(flag); usage: --input URLS.txt --dir OUTDIR --parallel N [--buffer-size BYTES] [--threads N] [--verbose]")
            }
        }
        if input.isEmpty || directory.isEmpty { fail("--input and --dir are required") }
    }
}

let options = Options(Array(CommandLine.arguments.dropFirst()))

// Plain string work only: Foundation's trimming and URL path appending (which stats the
// file system) would add measurable time to a run of thousands of small files.
let jobs: [(url: URL, path: String)]
do {
    guard let text = try? String(contentsOfFile: options.input, encoding: .utf8) else {
        fail("cannot read \(options.input)")
    }
    let directory = options.directory.hasSuffix("/") ? options.directory : options.directory + "/"
    jobs = try text.split(whereSeparator: { $0.isNewline || $0 == " " || $0 == "\t" }).map { line in
        guard let url = URL(string: String(line)), let name = url.path.split(separator: "/").last else {
            throw DownloadError(.invalidRequest, "not a URL with a file name: \(line)")
        }
        return (url, directory + name)
    }
    try FileManager.default.createDirectory(atPath: options.directory, withIntermediateDirectories: true)
} catch {
    fail("\(error)")
}

var configuration = CurlEngine.Configuration()
configuration.maxConnections = options.parallel
configuration.maxConnectionsPerHost = options.parallel
configuration.maxActiveTransfers = options.parallel
configuration.proxy = .none
if let size = options.bufferSize { configuration.receiveBufferSize = size }
if let threads = options.threads { configuration.threads = threads }

let start = ContinuousClock.now
let engine: CurlEngine
do { engine = try CurlEngine(configuration: configuration) } catch { fail("\(error)") }

let totalBytes: Int64
do {
    totalBytes = try await withThrowingTaskGroup(of: Int64.self) { group in
        var next = jobs.makeIterator()
        func addNext() -> Bool {
            guard let job = next.next() else { return false }
            group.addTask { try await engine.transfer(.download(job.url, to: job.path)).bytesWritten }
            return true
        }
        for _ in 0..<options.parallel { guard addNext() else { break } }
        var total: Int64 = 0
        while let bytes = try await group.next() {
            total += bytes
            _ = addNext()
        }
        return total
    }
} catch {
    await engine.shutdown()
    fail("\(error)")
}
await engine.shutdown()

if options.verbose {
    let elapsed = (ContinuousClock.now - start).components
    let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    let mib = Double(totalBytes) / 1_048_576
    print(String(format: "%d files, %.1f MiB in %.3f s (%.1f MiB/s), parallel %d",
                 jobs.count, mib, seconds, mib / max(seconds, 1e-9), options.parallel))
}
