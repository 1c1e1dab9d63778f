import Testing
@testable import Tessera

/// How each stored state comes back at a restore, without a store or a manager.
@Suite struct RestorePlanTests {
    static let unfinished: [DownloadTaskState] = [.waiting, .resolving, .downloading, .interrupted(.network), .interrupted(.diskSpace), .interrupted(.meteredNetwork)]

    @Test(arguments: unfinished) func anUnfinishedTaskComesBackPausedAndQueuedWhenResuming(_ state: DownloadTaskState) {
        #expect(RestorePlan(stored: state, resuming: true) == RestorePlan(state: .paused, requeues: true))
        #expect(RestorePlan(stored: state, resuming: false) == RestorePlan(state: .paused, requeues: false))
    }

    @Test func aRemovedTaskComesBackPaused() {
        #expect(RestorePlan(stored: .removed, resuming: true) == RestorePlan(state: .paused, requeues: false))
    }

    @Test(arguments: [DownloadTaskState.idle, .paused, .completed, .failed, .invalid])
    func aSettledTaskStaysAsItWas(_ state: DownloadTaskState) {
        #expect(RestorePlan(stored: state, resuming: true) == RestorePlan(state: state, requeues: false))
    }
}

extension RestorePlan {
    init(state: DownloadTaskState, requeues: Bool) {
        self.init(stored: .idle, resuming: false)
        self.state = state
        self.requeues = requeues
    }
}
