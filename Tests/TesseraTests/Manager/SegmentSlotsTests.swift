import Foundation
import Testing
@testable import Tessera

/// The manager's segment slots: a task that arrives while another holds every slot gets the
/// next one, and released slots go to the task holding the fewest.
@Suite struct SegmentSlotsTests {
    let a = DownloadTaskID(entityType: "t", entityKey: "a")
    let b = DownloadTaskID(entityType: "t", entityKey: "b")

    /// Starts an acquire and returns a flag that turns true once it is granted.
    func pending(_ slots: AsyncSemaphore, _ owner: DownloadTaskID) -> (Task<Void, any Error>, Granted) {
        let granted = Granted()
        let task = Task {
            try await slots.acquire(for: owner)
            granted.set()
        }
        return (task, granted)
    }

    final class Granted: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        func set() { lock.withLock { value = true } }
        var isSet: Bool { lock.withLock { value } }
    }

    func settle() async throws { try await Task.sleep(for: .milliseconds(50)) }

    @Test func aTaskThatJoinsLateGetsTheNextSlot() async throws {
        let slots = AsyncSemaphore(limit: 4)
        slots.join(a)
        for _ in 0..<4 { try await slots.acquire(for: a) }
        let (aMore, aGranted) = pending(slots, a)  // a wants a fifth: it waits
        try await settle()
        slots.join(b)
        let (bFirst, bGranted) = pending(slots, b)
        try await settle()
        #expect(!aGranted.isSet && !bGranted.isSet)
        slots.release(for: a)
        try await bFirst.value
        #expect(bGranted.isSet, "the released slot goes to the task holding none")
        #expect(!aGranted.isSet)
        #expect(slots.held(by: a) == 3 && slots.held(by: b) == 1)
        aMore.cancel()
        await #expect(throws: CancellationError.self) { try await aMore.value }
        #expect(slots.inUse == 4)
    }

    @Test func aTaskMayNotHoldEverySlotWhileAnotherRuns() async throws {
        let slots = AsyncSemaphore(limit: 3)
        slots.join(a)
        slots.join(b)
        // Two running tasks: each may hold at most 3 - 1 = 2.
        try await slots.acquire(for: a)
        try await slots.acquire(for: a)
        let (third, granted) = pending(slots, a)
        try await settle()
        #expect(!granted.isSet, "a third slot for a would leave b none")
        #expect(slots.inUse == 2)
        // b's run ends: a's share is the whole limit again.
        slots.leave(b)
        try await third.value
        #expect(slots.held(by: a) == 3)
    }

    @Test func releasedSlotsGoToTheTaskHoldingFewest() async throws {
        let slots = AsyncSemaphore(limit: 4)
        slots.join(a)
        slots.join(b)
        for _ in 0..<3 { try await slots.acquire(for: a) }
        try await slots.acquire(for: b)
        let (aWait, aGranted) = pending(slots, a)
        try await settle()
        let (bWait, bGranted) = pending(slots, b)
        try await settle()
        // a waited longer, but b holds fewer: b goes first.
        slots.release(for: a)
        try await bWait.value
        #expect(bGranted.isSet && !aGranted.isSet)
        slots.release(for: b)
        try await aWait.value
        #expect(aGranted.isSet)
        #expect(slots.held(by: a) == 3 && slots.held(by: b) == 1)
    }

    @Test func oneTaskAloneUsesEverySlotInOrder() async throws {
        let slots = AsyncSemaphore(limit: 2)
        slots.join(a)
        try await slots.acquire(for: a)
        try await slots.acquire(for: a)
        let (first, firstGranted) = pending(slots, a)
        try await settle()
        let (second, secondGranted) = pending(slots, a)
        try await settle()
        slots.release(for: a)
        try await first.value
        #expect(firstGranted.isSet && !secondGranted.isSet, "the longest waiter first")
        slots.release(for: a)
        try await second.value
        #expect(slots.inUse == 2)
    }
}
