import CTesseraSystem
import Foundation
import MetalinkEntity
import Tessera
import TesseraTesting

/// A Metalink 4 document of `count` files as Benchmarks/run.py's `ml` scenarios write it: files
/// of 512 bytes, one URL and a SHA-256 each, one `<file>` a line.
func manyFilesMetalink(count: Int, base: String = "http://127.0.0.1:9/ml") -> Data {
    var document = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n" + #"<metalink xmlns="urn:ietf:params:xml:ns:metalink">"# + "\n"
    document.reserveCapacity(count * 200 + 200)
    for index in 0..<count {
        let name = "f" + String(repeating: "0", count: max(0, 5 - String(index).count)) + String(index) + ".bin"
        let digest = Checksum.compute(.sha256, bytes: Array(name.utf8)).hexDigest
        document += #"<file name="\#(name)"><size>512</size><hash type="sha-256">\#(digest)</hash><url>\#(base)/f/\#(name)</url></file>"#
        document += "\n"
    }
    document += "</metalink>\n"
    return Data(document.utf8)
}

/// `metalink COUNT stream|tree [keep]`: the growth of resident memory while every file of a
/// Metalink of COUNT files is read, by MetalinkStreamReader or by MetalinkDocument (the tree of
/// the whole document); with `keep`, every file is kept, as the expansion keeps one per entity.
func metalinkScenario(count: Int, mode: String, keep: Bool) throws {
    let url = URL(string: "http://127.0.0.1:9/ml/many.meta4")!
    // Warm up both readers, so one-time allocations (libxml2's) are in the baseline.
    let small = manyFilesMetalink(count: 10)
    _ = try MetalinkDocument.parse(small, url: url).file(at: 0)
    _ = try MetalinkStreamReader(data: small, url: url).next()
    let data = manyFilesMetalink(count: count)
    let start = ContinuousClock.now
    var firstFile: Duration?
    var read = 0
    var last: MetalinkFile?
    var kept: [MetalinkFile] = []
    func note(_ file: MetalinkFile) {
        if firstFile == nil { firstFile = ContinuousClock.now - start }
        read += 1
        last = file
        if keep { kept.append(file) }
    }
    let (growth, _) = try peakGrowth { () throws in
        switch mode {
        case "stream":
            let reader = try MetalinkStreamReader(data: data, url: url)
            while let item = try reader.next() { note(try item.file.get()) }
        case "tree":
            let document = try MetalinkDocument.parse(data, url: url)
            for index in document.entries.indices { note(try document.file(at: index)) }
        default:
            fail("usage: tessera-test-helper metalink COUNT stream|tree [keep]")
        }
    }
    let elapsed = ContinuousClock.now - start
    emit([
        "files": read, "kept": kept.count, "growth": growth, "documentBytes": data.count, "seconds": seconds(elapsed),
        "firstFileSeconds": firstFile.map { seconds($0) } ?? -1, "lastName": last?.name ?? "",
        "lastMirror": last?.mirrors.first?.url.absoluteString ?? "",
    ])
}

/// `metalink-expand COUNT`: the growth of resident memory while MetalinkEntity expands a
/// Metalink of COUNT files served by a loopback origin into its entities (each keeping its file).
func metalinkExpandScenario(count: Int) async throws {
    try await withLoopbackOrigin { origin in
        let engine = try CurlEngine(configuration: makeEngineConfiguration())
        let context = ResolveContext(engine: engine)
        // Warm up: the origin, the engine and both readers.
        origin.serve("/ml/small.meta4", .bytes(Array(manyFilesMetalink(count: 10)), contentType: "application/metalink4+xml"))
        let small = origin.url("/ml/small.meta4").absoluteString
        _ = try await MetalinkEntity.entities(for: EntityInput(small), key: small, context: context)
        origin.serve("/ml/many.meta4", .bytes(Array(manyFilesMetalink(count: count)), contentType: "application/metalink4+xml"))
        let url = origin.url("/ml/many.meta4").absoluteString
        let sampler = MemorySampler()
        let start = ContinuousClock.now
        let entities = try await MetalinkEntity.entities(for: EntityInput(url), key: url, context: context)
        let elapsed = ContinuousClock.now - start
        let growth = sampler.stop()
        await engine.shutdown()
        emit([
            "entities": entities.count, "growth": growth, "seconds": seconds(elapsed),
            "lastTitle": entities.last?.title ?? "",
        ])
    }
}

/// The bytes malloc has handed out and not taken back (in use). Exact with one arena
/// (`MALLOC_ARENA_MAX=1`, as the tests run this helper): glibc counts the main arena only.
func heapInUse() -> Int64 {
    Int64(tessera_heap_in_use())
}

/// `metalink-complete COUNT`: a Metalink of COUNT files of 512 bytes (one URL and a SHA-256
/// each) served by a loopback origin, expanded and downloaded to the end by a manager with a
/// SQLite store, as `tessera get` does; the heap it keeps per completed file (the tasks, their
/// entities, what each keeps of its manifest, the scheduler's and the group's entries).
func metalinkCompleteScenario(count: Int) async throws {
    let directory = temporaryDirectory("tessera-metalink-complete")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    try await withLoopbackOrigin { origin in
        func serve(_ prefix: String, count: Int) -> String {
            var document = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n" + #"<metalink xmlns="urn:ietf:params:xml:ns:metalink">"# + "\n"
            for index in 0..<count {
                let name = prefix + String(repeating: "0", count: max(0, 5 - String(index).count)) + String(index) + ".bin"
                let bytes = Array((name + String(repeating: ".", count: 512 - name.utf8.count)).utf8)
                origin.serve("/\(prefix)/f/\(name)", .bytes(bytes, contentType: "application/octet-stream"))
                let digest = Checksum.compute(.sha256, bytes: bytes).hexDigest
                let url = origin.url("/\(prefix)/f/\(name)").absoluteString
                document += #"<file name="\#(name)"><size>512</size><hash type="sha-256">\#(digest)</hash><url>\#(url)</url></file>"# + "\n"
            }
            document += "</metalink>\n"
            origin.serve("/\(prefix)/many.meta4", .bytes(Array(document.utf8), contentType: "application/metalink4+xml"))
            return origin.url("/\(prefix)/many.meta4").absoluteString
        }
        let engine = try CurlEngine(configuration: makeEngineConfiguration())
        let store = try SQLiteDownloadStore(path: directory + "/state.sqlite")
        let manager = DownloadTaskManager(
            configuration: DownloadTaskManager.Configuration(downloadRoot: directory + "/files"), engine: engine, store: store)
        let context = ResolveContext(engine: engine)
        func download(_ url: String) async throws -> Int {
            var entities: [DownloadBaseEntity] = try await MetalinkEntity.entities(for: EntityInput(url), key: url, context: context)
            let count = entities.count
            for start in stride(from: 0, to: count, by: 1_000) {
                _ = await manager.start(contentsOf: Array(entities[start..<min(start + 1_000, count)]))
            }
            entities = []
            let done = await eventually(within: .seconds(600), every: .milliseconds(200)) {
                await manager.checkAll().allSatisfy { $0.state == .completed }
            }
            if !done { fail("the files did not all complete") }
            await manager.flushStore()
            return count
        }
        // Warm up: the origin, the engine, the store, the manager and the reader.
        _ = try await download(serve("warm", count: 20))
        let many = serve("ml", count: count)
        // (The origin's log of requests is not the manager's.)
        origin.resetCounters()
        let baseline = heapInUse()
        let start = ContinuousClock.now
        let completed = try await download(many)
        let elapsed = ContinuousClock.now - start
        origin.resetCounters()
        let retained = heapInUse() - baseline
        await manager.shutdown()
        await engine.shutdown()
        emit([
            "completed": completed, "retainedBytes": retained, "bytesPerTask": retained / Int64(max(1, count)),
            "seconds": seconds(elapsed),
        ])
    }
}
