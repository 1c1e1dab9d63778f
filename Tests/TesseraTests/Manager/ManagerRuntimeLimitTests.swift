import Foundation
import Testing
@testable import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct ManagerRuntimeLimitTests {
    /// `setMaxConcurrentTasks(_:)` (tessera serve's `max-concurrent-downloads`): a higher limit
    /// starts waiting tasks at once; a lower one starts no more until fewer are active.
    @Test func theTaskLimitChangesWhileTheManagerRuns() async throws {
        try await withManager(configure: { $0.maxConcurrentTasks = 1 }) { harness in
            // More segments than segment slots: a task keeps its task slot while some wait.
            let fixtures = (0..<3).map { harness.fixture("runtime-\($0)", segments: 40, size: 100_000) }
            for fixture in fixtures {
                for segment in 0..<40 {
                    harness.origin.inject(.throttle(bytesPerSecond: 50_000), at: harness.segmentPath(fixture.entity.entityKey, 0, segment, size: 100_000))
                }
                try await harness.manager.start(fixture.entity)
            }
            let running = { await harness.manager.checkAll().filter(\.state.isRunning).count }
            #expect(await eventually { await running() == 1 })
            // (What the wait rules out: a second task starting under the limit of 1.)
            #expect(await consistently(for: .milliseconds(300)) { await running() == 1 })
            #expect(await harness.manager.maxConcurrentTasks == 1)
            await harness.manager.setMaxConcurrentTasks(3)
            #expect(await harness.manager.maxConcurrentTasks == 3)
            #expect(await eventually { await running() == 3 })
            await harness.manager.setMaxConcurrentTasks(0)
            #expect(await harness.manager.maxConcurrentTasks == 1)
            await harness.manager.stopAll()
        }
    }
}
