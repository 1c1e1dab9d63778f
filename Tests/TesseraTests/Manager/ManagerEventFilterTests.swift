import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// ``DownloadEventFilter``: what a subscriber is told of, and that the manager tells each
/// subscriber what its filter includes while another subscriber gets every event.
@Suite(.timeLimit(.minutes(2))) struct ManagerEventFilterTests {
    private static let quiet = DownloadEventFilter(
        states: Set(DownloadTaskState.Kind.allCases).subtracting([.resolving, .downloading]), additions: false, progress: false)

    @Test func aFilterIncludesTheEventsItNamesAndAlwaysTheRareOnes() {
        let id = DownloadTaskID(entityType: "direct", entityKey: "http://127.0.0.1/a")
        let info = DownloadTaskInfo(
            id: id, title: "a", groupKey: nil, state: .idle, mode: .download, bytesDone: 0, bytesTotal: nil, segmentsDone: 0,
            segmentsTotal: 1, bytesPerSecond: 0, eta: nil, outputs: [], error: nil, resolveCount: 0, weight: 0)
        var downloading = info
        downloading.state = .downloading
        var completed = info
        completed.state = .completed
        var interrupted = info
        interrupted.state = .interrupted(.network)
        let error = DownloadError(.transport, "reset")
        for filter in [Self.quiet, .all] {
            let isAll = filter == .all
            #expect(filter.includes(.taskAdded(info)) == isAll)
            #expect(filter.includes(.taskProgress(downloading)) == isAll)
            #expect(filter.includes(.taskStateChanged(downloading, previous: .resolving)) == isAll)
            #expect(filter.includes(.taskStateChanged(completed, previous: .downloading)))
            #expect(filter.includes(.taskStateChanged(interrupted, previous: .downloading)))
            #expect(filter.includes(.taskRemoved(id)))
            #expect(filter.includes(.taskError(id, error, willRetry: true)))
            #expect(filter.includes(.groupRemoved(key: "g")))
            #expect(filter.includes(.notice(DownloadNotice(kind: .networkLost, message: "gone"))))
        }
        // An interruption's reason does not matter: the kind is what is filtered.
        let onlyInterrupted = DownloadEventFilter(states: [.interrupted], additions: false, progress: false)
        #expect(onlyInterrupted.includes(.taskStateChanged(interrupted, previous: .downloading)))
        #expect(!onlyInterrupted.includes(.taskStateChanged(completed, previous: .downloading)))
    }

    /// `wait(for:)` is told only of the changes that settle a task (and of removals).
    @Test func waitingForATaskListensForTheSettledStatesOnly() {
        let filter = DownloadTaskManager.settlingChanges
        #expect(filter.states == [.paused, .completed, .failed, .invalid, .removed])
        #expect(!filter.additions && !filter.progress)
    }

    @Test func theHubKnowsWhatAnySubscriberIsToldOfAsSubscribersComeAndGo() async {
        let hub = EventHub()
        #expect(!hub.tellsChanges(into: .downloading) && !hub.tellsAdditions && !hub.tellsProgress)
        let quiet = hub.subscribe(Self.quiet)
        #expect(hub.tellsChanges(into: .completed) && hub.tellsChanges(into: .waiting))
        #expect(!hub.tellsChanges(into: .downloading) && !hub.tellsChanges(into: .resolving))
        #expect(!hub.tellsAdditions && !hub.tellsProgress)
        var everything: DownloadEventStream? = hub.subscribe()
        #expect(hub.tellsChanges(into: .downloading) && hub.tellsAdditions && hub.tellsProgress)
        _ = everything
        // The subscriber that let go of its stream is told nothing more, and counts no more.
        everything = nil
        #expect(!hub.tellsChanges(into: .downloading) && !hub.tellsAdditions && !hub.tellsProgress)
        #expect(hub.tellsChanges(into: .failed))
        _ = quiet
        hub.finish()
        #expect(!hub.tellsChanges(into: .failed) && !hub.hasSubscribers)
    }

    @Test func eachSubscriberGetsWhatItsFilterIncludes() async throws {
        try await withManager(configure: { $0.progressInterval = .milliseconds(50) }) { harness in
            let quiet = EventLog(harness.manager.events(Self.quiet))
            defer { quiet.stop() }
            let fixture = harness.fixture("filtered", segments: 3, size: 300_000)
            for segment in 0..<3 {
                harness.origin.inject(.throttle(bytesPerSecond: 1_500_000), at: harness.segmentPath("filtered", 0, segment, size: 300_000))
            }
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            await harness.manager.shutdown()
            // The harness's own subscriber (every event) saw the whole life of the task.
            var allStates: [DownloadTaskState] = []
            var allAdded = 0, allProgress = 0
            for event in harness.log.all where event.taskID == fixture.id {
                switch event {
                case .taskStateChanged(let info, _): allStates.append(info.state)
                case .taskAdded: allAdded += 1
                case .taskProgress: allProgress += 1
                default: break
                }
            }
            #expect(allStates == [.waiting, .resolving, .downloading, .completed])
            #expect(allAdded == 1)
            #expect(allProgress >= 1)
            // The quiet one: the changes into waiting and completed, in order, and nothing else.
            #expect(await quiet.eventually { events in
                events.contains { if case .taskStateChanged(let info, _) = $0 { info.state == .completed } else { false } }
            })
            var quietStates: [DownloadTaskState] = []
            for event in quiet.all where event.taskID == fixture.id {
                switch event {
                case .taskStateChanged(let info, let previous):
                    quietStates.append(info.state)
                    // (The previous state is the task's, told or not.)
                    if info.state == .completed { #expect(previous == .downloading) }
                case .taskAdded, .taskProgress:
                    Issue.record("a quiet subscriber was told of \(event)")
                default: break
                }
            }
            #expect(quietStates == [.waiting, .completed])
        }
    }
}
