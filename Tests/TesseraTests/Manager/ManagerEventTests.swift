import Foundation
import Testing
@testable import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct ManagerEventTests {
    @Test func progressComesAtMostOncePerIntervalAndEveryStateChangeIsDelivered() async throws {
        try await withManager(configure: { $0.progressInterval = .milliseconds(300) }) { harness in
            let fixture = harness.fixture("events", segments: 4, size: 400_000)
            for segment in 0..<4 {
                harness.origin.inject(.throttle(bytesPerSecond: 800_000), at: harness.segmentPath("events", 0, segment, size: 400_000))
            }
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            #expect(await harness.sawEvent { if case .taskStateChanged(let info, _) = $0 { return info.state == .completed } else { return false } })
            var progressCount = 0
            var states: [DownloadTaskState] = []
            var bytes: [Int64] = []
            for event in harness.log.all {
                switch event {
                case .taskProgress(let info) where info.id == fixture.id:
                    progressCount += 1
                    bytes.append(info.bytesDone)
                case .taskStateChanged(let info, let previous) where info.id == fixture.id:
                    if let last = states.last { #expect(previous == last, "no state change is skipped") }
                    states.append(info.state)
                default:
                    break
                }
            }
            // 1.6 MB at 800 kB/s per segment takes half a second or more: a few progress events,
            // not dozens (their spacing is measured in ManagerProgressTimingTests).
            #expect(progressCount >= 1)
            #expect(progressCount <= 8, "\(progressCount) progress events")
            #expect(bytes == bytes.sorted(), "progress never goes backwards")
            #expect(states == [.waiting, .resolving, .downloading, .completed])
        }
    }

}

/// Wall-clock spacing of events: run on its own in `make test`'s timing phase.
@Suite(.timeLimit(.minutes(2))) struct ManagerProgressTimingTests {
    @Test func progressEventsAreSpacedByTheInterval() async throws {
        let recorder = TimedEvents()
        try await withManager(configure: { $0.progressInterval = .milliseconds(250) }) { harness in
            let stream = harness.manager.events()
            let listener = Task { for await event in stream { recorder.note(event) } }
            let fixture = harness.fixture("spacing", segments: 2, size: 600_000)
            for segment in 0..<2 {
                harness.origin.inject(.throttle(bytesPerSecond: 600_000), at: harness.segmentPath("spacing", 0, segment, size: 600_000))
            }
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            listener.cancel()
            let times = recorder.progressTimes
            #expect(times.count >= 2)
            for (earlier, later) in zip(times, times.dropFirst()) {
                #expect(later - earlier >= .milliseconds(200), "progress events \(later - earlier) apart")
            }
        }
    }
}

final class TimedEvents: @unchecked Sendable {
    private let lock = NSLock()
    private var times: [ContinuousClock.Instant] = []

    func note(_ event: DownloadEvent) {
        if case .taskProgress = event { lock.withLock { times.append(.now) } }
    }

    var progressTimes: [ContinuousClock.Instant] { lock.withLock { times } }
}

/// Segments whose sizes the manifest does not give (HLS, DASH): the total is an estimate, said
/// so, and only once enough segments have arrived to make one; it is exact once every segment's
/// response has told its size.
@Suite(.timeLimit(.minutes(2))) struct EstimatedTotalTests {
    @Test func theTotalIsMarkedAsAnEstimateAndWaitsForATenthOfTheSegments() async throws {
        try await withManager(configure: { $0.maxConcurrentSegments = 1 }) { harness in
            let fixture = harness.fixture("estimate", segments: 20, size: 10_000) { document in
                for index in document.outputs[0].segments.indices { document.outputs[0].segments[index].size = nil }
            }
            for segment in 0..<20 {
                harness.origin.inject(.throttle(bytesPerSecond: 200_000), at: harness.segmentPath("estimate", 0, segment, size: 10_000))
            }
            try await harness.manager.start(fixture.entity)
            // A snapshot every 10 ms until the task ends.
            var samples: [DownloadTaskInfo] = []
            let ended = await eventually(within: .seconds(30)) {
                guard let info = await harness.manager.check(fixture.id), !info.state.isFinal else { return true }
                samples.append(info)
                return false
            }
            #expect(ended)
            let running = samples.filter { $0.state == .downloading }
            #expect(running.count > 20)
            for info in running {
                if info.segmentsDone < 3 {
                    #expect(info.bytesTotal == nil, "no guess from \(info.segmentsDone) segments")
                } else if let total = info.bytesTotal {
                    #expect(total >= info.bytesDone)
                    if !info.bytesTotalIsEstimate { #expect(total == 200_000, "exact once every size is known") }
                }
            }
            #expect(running.contains { $0.bytesTotal != nil && $0.bytesTotalIsEstimate }, "an estimate once enough segments are done")
            let done = try #require(await harness.manager.check(fixture.id))
            #expect(done.state == .completed)
            #expect(done.bytesTotal == 200_000)
        }
    }
}
