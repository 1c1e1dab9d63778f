import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// Child processes: a group of their own (ffmpeg: a terminal's Ctrl-C must not reach it), and
/// waits that end when their caller is cancelled.
@Suite(.timeLimit(.minutes(1))) struct SpawnedProcessTests {
    @Test func aChildInAGroupOfItsOwnIsOutOfItsParentsGroupAndStoppedWithWhatItStarted() async throws {
        let plain = try SpawnedProcess("/bin/sleep", ["30"])
        defer { plain.send(SIGKILL); plain.waitUntilExit() }
        #expect(getpgid(plain.pid) == getpgrp(), "by default, in the parent's group")

        // A shell that starts a child of its own and waits for it.
        let marker = NSTemporaryDirectory() + "group-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let leader = try SpawnedProcess("/bin/sh", ["-c", "sleep 30 & echo $! > '\(marker)'; wait"], newProcessGroup: true)
        #expect(getpgid(leader.pid) == leader.pid)
        #expect(getpgid(leader.pid) != getpgrp())
        var grandchild: pid_t = 0
        #expect(await eventually(within: .seconds(20)) {
            grandchild = pid_t(fileText(marker).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            return grandchild > 0
        })
        #expect(getpgid(grandchild) == leader.pid, "what it starts is in its group")
        leader.send(SIGTERM)
        #expect(leader.waitUntilExit() == .signalled(SIGTERM))
        // The whole group got it: the shell's child is gone too (a zombie until init reaps it).
        #expect(await eventually(within: .seconds(20)) { kill(grandchild, 0) != 0 || Self.isZombie(grandchild) })
    }

    static func isZombie(_ pid: pid_t) -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        guard let close = status.lastIndex(of: ")") else { return false }
        return status[status.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    /// A wait whose caller is cancelled ends at once (its cancellation is not its limit: it
    /// used to spin until the limit).
    @Test func aCancelledWaitForTheChildEndsAtOnce() async throws {
        let child = try SpawnedProcess("/bin/sleep", ["120"])
        defer { child.send(SIGKILL); child.waitUntilExit() }
        let waiting = Task { await child.exited(within: .seconds(600)) }
        waiting.cancel()
        #expect(await waiting.value == false)
        #expect(child.termination == nil)
    }
}
