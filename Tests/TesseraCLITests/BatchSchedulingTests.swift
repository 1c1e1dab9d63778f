import CTesseraSystem
import Foundation
import Testing
import TesseraTesting
@testable import TesseraCLI

/// `get`, `cache` and `resume` move the process's threads to `SCHED_BATCH` (``BatchScheduling``); threads
/// they start inherit it, and a class the user chose stays.
@Suite(.timeLimit(.minutes(3))) struct BatchSchedulingTests {
    /// What a thread of the test's own saw, on that thread (the test's threads on the
    /// cooperative pool are not moved: other tests share them).
    private struct Seen: Sendable {
        var listed = false
        var movedCount = -1
        var policyAfter = -1
        var childPolicy = -1
        var movedAgain = -1
        var idleMoved = -1
        var idlePolicyAfter = -1
    }

    /// Runs `body` on a thread of its own and returns what it returns, without blocking the
    /// cooperative pool.
    private static func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: body()) }
            thread.start()
        }
    }

    /// The policy of a thread started by the calling one (read on that thread).
    private static func policyOfAThreadStartedHere() -> Int32 {
        final class Box: @unchecked Sendable { var policy: Int32 = -1 }
        let box = Box()
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { argument in
            let box = Unmanaged<Box>.fromOpaque(argument!).takeUnretainedValue()
            box.policy = tessera_scheduling_policy(0)
            return nil
        }, Unmanaged.passUnretained(box).toOpaque())
        guard started == 0 else { return -1 }
        pthread_join(thread, nil)
        return box.policy
    }

    @Test func aThreadInTheDefaultClassMovesAndWhatItStartsInheritsIt() async {
        let seen = await Self.onOwnThread { () -> Seen in
            var seen = Seen()
            let me = tessera_gettid()
            seen.listed = BatchScheduling.processThreads().contains(me)
            seen.movedCount = BatchScheduling.apply(to: [me])
            seen.policyAfter = Int(tessera_scheduling_policy(0))
            seen.childPolicy = Int(Self.policyOfAThreadStartedHere())
            // Already a batch thread: nothing to move.
            seen.movedAgain = BatchScheduling.apply(to: [me])
            // A class the user chose (here SCHED_IDLE, which needs no privilege) stays.
            var parameters = sched_param()
            if sched_setscheduler(0, 5 /* SCHED_IDLE */, &parameters) == 0 {
                seen.idleMoved = BatchScheduling.apply(to: [me])
                seen.idlePolicyAfter = Int(tessera_scheduling_policy(0))
            }
            return seen
        }
        #expect(seen.listed, "the thread is among the process's")
        #expect(seen.movedCount == 1)
        #expect(seen.policyAfter == TESSERA_SCHED_BATCH)
        #expect(seen.childPolicy == TESSERA_SCHED_BATCH, "a thread it starts inherits the class")
        #expect(seen.movedAgain == 0)
        #expect(seen.idleMoved == 0)
        #expect(seen.idlePolicyAfter == 5, "SCHED_IDLE stays")
    }

    @Test func aThreadThatIsGoneIsSkipped() {
        // Thread ids are below pid_max (at most 2^22); this one names no thread.
        #expect(BatchScheduling.apply(to: [pid_t(Int32.max)]) == 0)
    }

    /// The policy (sched(7) numbers) of each thread of `pid`, by thread name; empty when it is gone.
    private static func threadPolicies(of pid: pid_t) -> [(name: String, policy: Int)] {
        let directory = "/proc/\(pid)/task"
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        return threads.compactMap { thread in
            guard let stat = try? String(contentsOfFile: "\(directory)/\(thread)/stat", encoding: .utf8),
                let name = try? String(contentsOfFile: "\(directory)/\(thread)/comm", encoding: .utf8),
                let end = stat.lastIndex(of: ")")
            else { return nil }
            // After the name: field 3 (state) onwards; the policy is field 41.
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            guard fields.count > 38, let policy = Int(fields[38]) else { return nil }
            return (name.trimmingCharacters(in: .whitespacesAndNewlines), policy)
        }
    }

    @Test func getRunsItsThreadsAsABatch() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let gate = LoopbackOrigin.Gate()
            let path = "/bytes/200000/held.bin"
            origin.inject(.hold(gate, afterBytes: 50_000), at: path)
            let (process, _, err) = try cli.start(["get", "-q", origin.url(path).absoluteString])
            // While the transfer is held: every thread, the engine's among them, is a batch one.
            var last: [(name: String, policy: Int)] = []
            let seen = await eventually(within: .seconds(60)) {
                last = Self.threadPolicies(of: process.pid)
                return last.contains { $0.name.hasPrefix("tessera-curl") } && last.allSatisfy { $0.policy == 3 }
            }
            gate.open()
            #expect(seen, "\(last)")
            #expect(await process.exited(within: .seconds(60)))
            let status = await process.ended()
            #expect(status == .exited(0), "\(fileText(err))")
            #expect(await origin.content(at: path).verifyFile(atPath: cli.downloads + "/held.bin", size: 200_000))
        }
    }
}
