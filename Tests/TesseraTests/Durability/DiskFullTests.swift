import Foundation
import Testing
import Tessera
@testable import Tessera
import TesseraTesting

/// A real full disk: a 2 MiB tmpfs as the download root (needs the right to mount; skipped
/// where it is not given).
@Suite(.enabled(if: TinyFileSystem.canMount, "needs permission to mount a tmpfs"), .timeLimit(.minutes(2)))
struct DiskFullTests {
    @Test func aWriteThatFailsWithENOSPCInterruptsAndResumesWhenSpaceIsBack() async throws {
        let disk = try TinyFileSystem(megabytes: 2)
        defer { disk.remove() }
        try await withLoopbackOrigin { origin in
            var engineConfiguration = CurlEngine.Configuration.forTests()
            engineConfiguration.maxConnections = 4
            let engine = try CurlEngine(configuration: engineConfiguration)
            var configuration = DownloadTaskManager.Configuration(downloadRoot: disk.path)
            configuration.diskSpace = DiskSpacePolicy(warningBytes: 10_000_000, stopBytes: 500_000, checkInterval: .seconds(3600))
            configuration.sleeper = RecordingSleeper()
            let manager = DownloadTaskManager(configuration: configuration, engine: engine)
            let events = EventLog(manager.events())
            let path = "/bytes/6000000/big.bin"
            let entity = DirectEntity(url: origin.url(path))
            try await manager.start(entity)
            let interrupted = try #require(await manager.waitForState(entity.taskID, .interrupted(.diskSpace), timeout: .seconds(20)))
            #expect(interrupted.state == .interrupted(.diskSpace))
            // Stopped by the write that failed, or by the check that saw the writes coming close
            // to the limit first: either way the task waits, and says why.
            let told = await events.eventually { all in
                interrupted.error?.code == .diskFull || all.contains {
                    if case .notice(let notice) = $0 { return notice.kind == .diskSpaceCritical } else { return false }
                }
            }
            #expect(told)
            #expect(!FileManager.default.fileExists(atPath: disk.path + "/big.bin"), "nothing is marked complete")
            let work = disk.path + "/.tessera/work"
            let part = try #require(try FileManager.default.contentsOfDirectory(atPath: work).first { $0.hasSuffix(".part") })
            let partial = fileSize(work + "/" + part) ?? 0
            #expect(partial > 1_000_000, "the bytes that fit are kept (\(partial))")

            try disk.resize(megabytes: 40)
            await manager.checkDiskSpace()
            #expect(await manager.waitForState(entity.taskID, .completed)?.state == .completed)
            #expect(await origin.content(at: path).verifyFile(atPath: disk.path + "/big.bin", size: 6_000_000))
            // The resume continued from the bytes on disk (what was in flight when the write
            // failed is lost, as it must be).
            let resumed = try #require(origin.requests(for: path).last)
            let start = resumed.header("Range").flatMap { Int64($0.dropFirst("bytes=".count).prefix { $0 != "-" }) } ?? 0
            #expect(start > 1_000_000 && start <= partial, "continued from the bytes on disk (\(resumed.header("Range") ?? "no Range"), partial \(partial), requests \(origin.requests(for: path).map { $0.header("Range") ?? "-" }))")
            #expect(events.all.contains { if case .notice(let notice) = $0 { return notice.kind == .diskSpaceRecovered } else { return false } })
            events.stop()
            await manager.shutdown()
            await engine.shutdown()
        }
    }
}

/// A tmpfs mounted for a test.
struct TinyFileSystem {
    let path: String

    static let canMount: Bool = {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/mount") || FileManager.default.isExecutableFile(atPath: "/bin/mount") else { return false }
        guard let probe = try? TinyFileSystem(megabytes: 1) else { return false }
        probe.remove()
        return true
    }()

    init(megabytes: Int) throws {
        path = NSTemporaryDirectory() + "/tessera-tinyfs-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try Self.run(["mount", "-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", path])
    }

    func resize(megabytes: Int) throws {
        try Self.run(["mount", "-o", "remount,size=\(megabytes)m", path])
    }

    func remove() {
        try? Self.run(["umount", path])
        try? FileManager.default.removeItem(atPath: path)
    }

    private static func run(_ arguments: [String]) throws {
        let process = try SpawnedProcess("/usr/bin/env", arguments, output: .null, error: .null)
        guard process.waitUntilExit() == .exited(0) else { throw OriginFailure("\(arguments.joined(separator: " ")) failed") }
    }
}
