import Testing
import Tessera

@Suite struct TaskStateMachineTests {
    /// The table, written out here independently: every pair not listed must be refused.
    static let allowed: [DownloadTaskState.Kind: Set<DownloadTaskState.Kind>] = [
        .idle: [.waiting, .paused, .removed],
        .waiting: [.resolving, .paused, .interrupted, .removed],
        .resolving: [.downloading, .waiting, .paused, .interrupted, .failed, .invalid, .removed],
        .downloading: [.resolving, .waiting, .paused, .interrupted, .completed, .failed, .invalid, .removed],
        .paused: [.waiting, .removed],
        .interrupted: [.waiting, .paused, .failed, .removed],
        .completed: [.waiting, .removed],
        .failed: [.waiting, .removed],
        .invalid: [.waiting, .removed],
        .removed: [],
    ]

    static func state(_ kind: DownloadTaskState.Kind) -> DownloadTaskState {
        switch kind {
        case .idle: .idle
        case .waiting: .waiting
        case .resolving: .resolving
        case .downloading: .downloading
        case .paused: .paused
        case .interrupted: .interrupted(.network)
        case .completed: .completed
        case .failed: .failed
        case .invalid: .invalid
        case .removed: .removed
        }
    }

    @Test(arguments: DownloadTaskState.Kind.allCases)
    func everyTransitionFrom(kind: DownloadTaskState.Kind) {
        for target in DownloadTaskState.Kind.allCases {
            var machine = DownloadTaskStateMachine(Self.state(kind))
            let expected = Self.allowed[kind]!.contains(target)
            #expect(Self.state(kind).canTransition(to: Self.state(target)) == expected, "\(kind) -> \(target)")
            do {
                let previous = try machine.transition(to: Self.state(target))
                #expect(expected, "\(kind) -> \(target) should be refused")
                #expect(previous == Self.state(kind))
                #expect(machine.state == Self.state(target))
            } catch {
                #expect(!expected, "\(kind) -> \(target) should be allowed")
                #expect(error.code == .invalidState)
                #expect(machine.state == Self.state(kind), "a refused transition changes nothing")
            }
        }
    }

    @Test func theTableCoversEveryState() {
        #expect(Set(DownloadTaskState.transitions.keys) == Set(DownloadTaskState.Kind.allCases))
        #expect(DownloadTaskState.transitions == Self.allowed)
    }

    @Test func pausingADownloadingTaskIsAllowed() throws {
        // ZZDownloader's last version refused this; Tessera must not.
        var machine = DownloadTaskStateMachine(.downloading)
        try machine.transition(to: .paused)
        #expect(machine.state == .paused)
    }

    @Test func interruptionsKeepTheirReason() throws {
        var machine = DownloadTaskStateMachine(.downloading)
        try machine.transition(to: .interrupted(.diskSpace))
        #expect(machine.state == .interrupted(.diskSpace))
        #expect(machine.state.isInterrupted)
        #expect(machine.state.description == "interrupted(diskSpace)")
    }

    @Test func taskIDsRoundTripThroughText() {
        let id = DownloadTaskID(entityType: "playurl", entityKey: "cid:1001", variantKey: "80")
        #expect(id.description == "playurl:cid:1001#80")
        #expect(DownloadTaskID(id.description) == id)
        #expect(DownloadTaskID("direct:https://a/b#frag#v") == DownloadTaskID(entityType: "direct", entityKey: "https://a/b#frag", variantKey: "v"))
        #expect(DownloadTaskID("nocolon") == nil)
    }
}
