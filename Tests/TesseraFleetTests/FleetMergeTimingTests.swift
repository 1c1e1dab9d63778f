import Foundation
import Tessera
import TesseraFleet
import TesseraTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A DASH task's merge in a fleet is a leased, fenced step of the task: real `tessera serve
/// --fleet` workers with a fake, slow ffmpeg on their PATH (``FakeFFmpeg``), a PostgreSQL 15 of
/// the test's own, one loopback origin.
@Suite(.serialized, .enabled(if: PostgresTestServer.shouldRun, Comment(rawValue: PostgresTestServer.skipReason)), .timeLimit(.minutes(5)))
struct FleetMergeTimingTests {
    /// The worker merging is SIGKILLed: another takes the task over and merges again; that one
    /// freezes (SIGSTOP, its ffmpeg still running) past its lease: a third merges. The frozen
    /// one, resumed once its ffmpeg has written its file, moves nothing into place. The merged
    /// file appears once, made of the tracks; the tracks are gone; one completion; each ffmpeg
    /// wrote a file of its own (named by its holder's epoch).
    @Test func aMergeIsTakenOverWhenItsWorkerDiesOrFreezesAndItsFileAppearsOnce() async throws {
        let fake = try FakeFFmpeg(modes: ["slow", "freeze", "slow"])
        defer { fake.remove() }
        try await FleetHarness.with(workers: 3, jobs: 1, lease: 2, environment: fake.environment) { fleet in
            let fixture = DASHFixture.install(on: fleet.origin, directory: "/dash/m", title: "merged")
            let added = try await fleet.fleetAdd(fixture.inputs)
            let key = try #require(try await Self.onlyTask(fleet), "\(added)")

            // 1. The first merger is killed while its ffmpeg runs.
            let first = try #require(await fake.run(1), "no merge started\n\(fleet.logs)")
            #expect(try await fleet.row(key)?.state == "running", "the task is not leased while it merges")
            let killed = try #require(fleet.worker(pid: Int(first.parent)))
            killed.process.send(SIGKILL)

            // 2. Another merges again, and freezes (its ffmpeg goes on, waiting for a word).
            let second = try #require(await fake.run(2), "nobody took the merge over\n\(fleet.logs)")
            let frozen = try #require(fleet.worker(pid: Int(second.parent)))
            #expect(frozen.pid != killed.pid)

            // 3. A third takes it over and completes it.
            #expect(await eventually(within: .seconds(60)) { (try? await fleet.row(key))?.state == "completed" }, "\(fleet.logs)")
            let third = try #require(await fake.run(3))
            #expect(third.parent != frozen.pid && third.parent != killed.pid)
            #expect(Set([first.output, second.output, third.output]).count == 3, "two ffmpegs wrote the same file")
            #expect([first, second, third].allSatisfy { $0.output.hasSuffix(".merging") && $0.output.contains(".e") })

            // The tracks go once the merged file is in place and recorded.
            let folder = fleet.root + "/merged"
            #expect(await eventually(within: .seconds(15)) { ((try? Self.visibleFiles(folder)) ?? []).count == 1 }, "\((try? Self.allFiles(folder)) ?? [])\n\(fleet.logs)")
            let merged = try #require(try Self.visibleFiles(folder).first, "no merged file in \((try? Self.allFiles(folder)) ?? [])")
            let stamp = FleetGuaranteeTimingTests.stamp(folder + "/" + merged)
            #expect(await Self.holdsTracks(folder + "/" + merged, of: fixture, inOrderOf: third.inputs), "the merged file is not the tracks'")

            // 4. The frozen worker's ffmpeg writes its file; the worker wakes and moves nothing.
            fake.release()
            #expect(await eventually(within: .seconds(30)) { fake.finished(2) })
            frozen.process.send(SIGCONT)
            #expect(await eventually(within: .seconds(15)) {
                guard frozen.log.contains("declared this worker dead") else { return false }
                return ((try? await fleet.activeWorkerPids()) ?? []).contains(Int(frozen.pid))
            }, "\(fleet.logs)")
            // Its temporary file goes (it gave up), and nothing else appears.
            #expect(await eventually(within: .seconds(15)) { ((try? Self.allFiles(folder)) ?? []).allSatisfy { !$0.hasSuffix(".merging") } },
                    "\((try? Self.allFiles(folder)) ?? [])")
            #expect(try Self.allFiles(folder) == [merged], "the merged file once, without the tracks")
            #expect(FleetGuaranteeTimingTests.stamp(folder + "/" + merged) == stamp, "the merged file was written again")
            #expect(try await fleet.completions() == [key: 1])
        }
    }

    /// The key of the one task the queue has, once it has it.
    static func onlyTask(_ fleet: FleetHarness) async throws -> String? {
        var key: String?
        _ = await eventually(within: .seconds(30)) {
            guard let rows = try? await fleet.connection.queue.client.query("SELECT id FROM tessera_fleet_tasks") else { return false }
            var keys: [String] = []
            do {
                for try await id in rows.decode(String.self) { keys.append(id) }
            } catch {
                return false
            }
            key = keys.count == 1 ? keys[0] : nil
            return key != nil
        }
        return key
    }

    /// The names in `folder`, hidden ones too.
    static func allFiles(_ folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
    }

    /// The names in `folder` that do not start with a dot.
    static func visibleFiles(_ folder: String) throws -> [String] {
        try allFiles(folder).filter { !$0.hasPrefix(".") }
    }

    /// Whether `path` holds the fixture's tracks one after the other, in the order ffmpeg was
    /// given them (the fake's merge).
    static func holdsTracks(_ path: String, of fixture: DASHFixture, inOrderOf inputs: [String]) async -> Bool {
        let tracks = inputs.compactMap { input in fixture.tracks.first { input.hasSuffix("/" + $0.file) } }
        guard tracks.count == inputs.count, tracks.count >= 2 else { return false }
        var offset: Int64 = 0
        for track in tracks {
            for part in track.parts {
                guard await fixture.origin.content(at: part.path).verifyFile(atPath: path, size: part.size, fileOffset: offset) else { return false }
                offset += part.size
            }
        }
        return FleetGuaranteeTimingTests.stamp(path)?.first == offset
    }
}

/// A fake ffmpeg on the workers' PATH: each run takes a number (1, 2, …) and records its parent
/// (the worker), its inputs and its output in `<directory>/run.<n>/` and reads its inputs one
/// after the other (its merge); then, by the mode of its number, `slow` waits 2 s and writes
/// the merge to its output, and `freeze` stops its parent (SIGSTOP), waits for ``release()``
/// and then writes it.
struct FakeFFmpeg: Sendable {
    /// What a run recorded.
    struct Run: Sendable {
        var parent: Int32
        var output: String
        var inputs: [String]
    }

    let directory: String

    init(modes: [String]) throws {
        directory = NSTemporaryDirectory() + "tessera-fake-ffmpeg-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/bin", withIntermediateDirectories: true)
        let script = """
            #!/bin/sh
            dir='\(directory)'
            n=1
            while ! mkdir "$dir/run.$n" 2>/dev/null; do n=$((n + 1)); done
            out=""
            : > "$dir/run.$n/inputs"
            while [ $# -gt 0 ]; do
                if [ "$1" = "-i" ]; then shift; printf '%s\\n' "$1" >> "$dir/run.$n/inputs"; fi
                out="$1"
                shift
            done
            printf '%s' "$out" > "$dir/run.$n/output"
            printf '%s' "$PPID" > "$dir/run.$n/parent"
            : > "$dir/run.$n/merged"
            while IFS= read -r input; do cat "$input" >> "$dir/run.$n/merged"; done < "$dir/run.$n/inputs"
            mode=$(sed -n "${n}p" "$dir/modes")
            if [ "$mode" = "freeze" ]; then
                kill -STOP "$PPID"
                i=0
                while [ ! -e "$dir/release" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
            else
                sleep 2
            fi
            cp "$dir/run.$n/merged" "$out.tmp"
            mv "$out.tmp" "$out"
            : > "$dir/run.$n/finished"
            """
        try script.write(toFile: directory + "/bin/ffmpeg", atomically: true, encoding: .utf8)
        chmod(directory + "/bin/ffmpeg", 0o755)
        try (modes.joined(separator: "\n") + "\n").write(toFile: directory + "/modes", atomically: true, encoding: .utf8)
    }

    /// The workers' environment: the fake first on PATH.
    var environment: [String: String] {
        ["PATH": directory + "/bin:" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]
    }

    /// Run `number` once it has recorded what it was given (`nil` after 30 s).
    func run(_ number: Int) async -> Run? {
        var run: Run?
        _ = await eventually(within: .seconds(30)) {
            let base = directory + "/run.\(number)/"
            guard let parent = try? String(contentsOfFile: base + "parent", encoding: .utf8), let pid = Int32(parent),
                let output = try? String(contentsOfFile: base + "output", encoding: .utf8),
                let inputs = try? String(contentsOfFile: base + "inputs", encoding: .utf8)
            else { return false }
            run = Run(parent: pid, output: output, inputs: inputs.split(separator: "\n").map(String.init))
            return true
        }
        return run
    }

    /// Whether run `number` has written its output.
    func finished(_ number: Int) -> Bool {
        FileManager.default.fileExists(atPath: directory + "/run.\(number)/finished")
    }

    /// Lets a frozen run write.
    func release() {
        _ = FileManager.default.createFile(atPath: directory + "/release", contents: nil)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }
}
