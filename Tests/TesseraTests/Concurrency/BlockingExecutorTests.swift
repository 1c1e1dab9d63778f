import Foundation
import Testing
@testable import Tessera

/// The threads for blocking file work: every job runs once, none is lost at shutdown.
@Suite(.timeLimit(.minutes(1))) struct BlockingExecutorTests {
    @Test func oneThreadRunsTheJobsInTheOrderTheyCame() async {
        let executor = BlockingExecutor(threads: 1, name: "test-io")
        let order = Locked<[Int]>([])
        for index in 0..<100 { executor.submit { order.withLock { $0.append(index) } } }
        #expect(await executor.run { order.withLock { $0.count } } == 100)
        #expect(order.withLock { $0 } == Array(0..<100))
        await executor.shutdown()
    }

    @Test func jobsFromManyThreadsEachRunOnceWhileTheThreadsComeAndGoIdle() async {
        let executor = BlockingExecutor(threads: 2, name: "test-io")
        let counts = Locked<[Int: Int]>([:])
        await withTaskGroup(of: Void.self) { group in
            for producer in 0..<8 {
                group.addTask {
                    for index in 0..<500 {
                        let key = producer * 1_000 + index
                        executor.submit { counts.withLock { $0[key, default: 0] += 1 } }
                        // Now and then wait, so the threads go idle and must be woken again.
                        if index % 50 == 0 { _ = await executor.run { 0 } }
                    }
                }
            }
        }
        await executor.shutdown()
        let all = counts.withLock { $0 }
        #expect(all.count == 4_000)
        #expect(all.values.allSatisfy { $0 == 1 })
    }

    @Test func shutdownFinishesWhatIsQueuedAndLaterJobsRunOnTheCaller() async {
        let executor = BlockingExecutor(threads: 1, name: "test-io")
        let ran = Locked(0)
        let gate = DispatchSemaphore(value: 0)
        // The thread is held by the first job while more queue behind it.
        executor.submit { gate.wait() }
        for _ in 0..<10 { executor.submit { ran.withLock { $0 += 1 } } }
        gate.signal()
        await executor.shutdown()
        #expect(ran.withLock { $0 } == 10)
        // Run before submit returns: on the caller's thread.
        let done = Locked(false)
        executor.submit { done.withLock { $0 = true } }
        #expect(done.withLock { $0 })
    }
}
