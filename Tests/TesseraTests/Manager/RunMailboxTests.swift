import Testing
@testable import Tessera

/// A run's mailbox: what it posts reaches the manager in order, with as few wake-ups as can be.
@Suite struct RunMailboxTests {
    final class Wakes: Sendable {
        let count = Locked(0)
        func wake(_: RunTicket) { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    let ticket = RunTicket(handle: TaskHandle(7), generation: 1)

    @Test func aBatchOfPostsWakesTheManagerOnceUntilItTakes() {
        let wakes = Wakes()
        let mailbox = RunMailbox(ticket: ticket) { wakes.wake($0) }
        mailbox.demand("a")
        mailbox.returned("a")
        mailbox.report(.reResolving(DownloadError(.httpStatus, "gone")))
        #expect(wakes.value == 1)
        let items = mailbox.take()
        #expect(items.count == 2, "the counts merged, then the report")
        if case .counts(let counts) = items.first {
            #expect(counts.demand == ["a": 1] && counts.returned == ["a": 1])
        } else {
            Issue.record("counts first: \(items)")
        }
        mailbox.withdraw("a")
        #expect(wakes.value == 2, "taken: the next post wakes again")
    }

    @Test func whileHeldPostsWaitAndTheReleaseWakesOnce() {
        let wakes = Wakes()
        let mailbox = RunMailbox(ticket: ticket) { wakes.wake($0) }
        mailbox.hold()
        mailbox.withdraw("a")
        mailbox.returned("b")
        mailbox.withdraw("a")
        #expect(wakes.value == 0, "a run handling a batch of events sends nothing yet")
        mailbox.release()
        #expect(wakes.value == 1)
        mailbox.release()
        #expect(wakes.value == 1, "nothing new: no wake")
        let items = mailbox.take()
        if case .counts(let counts) = items.first, items.count == 1 {
            #expect(counts.withdrawn == ["a": 2] && counts.returned == ["b": 1])
        } else {
            Issue.record("one tally: \(items)")
        }
    }

    @Test func aHoldWithNothingPostedOrAlreadyScheduledOwesNoWake() {
        let wakes = Wakes()
        let mailbox = RunMailbox(ticket: ticket) { wakes.wake($0) }
        mailbox.demand("a")
        #expect(wakes.value == 1)
        // Already scheduled (the manager has not taken yet): posts while held add to that batch.
        mailbox.hold()
        mailbox.demand("a")
        mailbox.release()
        #expect(wakes.value == 1)
        _ = mailbox.take()
        mailbox.hold()
        mailbox.release()
        #expect(wakes.value == 1)
    }
}
