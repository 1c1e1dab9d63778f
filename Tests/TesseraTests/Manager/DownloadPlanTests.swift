import Testing
@testable import Tessera

/// A download pass's decisions alone: events in, actions out. No network, no clock, no actor, no
/// files. Every kind of ``DownloadPlan/Event`` (and every way work ends) has a test here.
@Suite struct DownloadPlanTests {
    let policy = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(100), maxDelay: .seconds(1))
    let s0 = RunWork.segment(output: 0, segment: 0), s1 = RunWork.segment(output: 0, segment: 1)
    let s2 = RunWork.segment(output: 0, segment: 2)
    let piece = RunWork.piece(output: 0, attempt: nil)

    func plan(outputs: Int = 1) -> DownloadPlan {
        DownloadPlan(outputCount: outputs, policy: policy, baseSeed: 1)
    }

    func retryState(mirrors: Int = 1) -> RetryState {
        RetryState(
            attempt: SegmentAttempt(mirrorCount: mirrors, sharesFile: false, policy: policy, seed: 1),
            next: .fetch(mirror: 0, fromScratch: false), checkpoint: nil)
    }

    func status(_ code: Int) -> DownloadError {
        DownloadError(.httpStatus, "status \(code)", httpStatus: code)
    }

    /// Sends `event`; returns the actions, by name.
    @discardableResult
    func send(_ event: DownloadPlan.Event, to plan: inout DownloadPlan) -> [String] {
        var actions: [DownloadPlan.Action] = []
        plan.handle(event, into: &actions)
        return actions.map(name)
    }

    /// Sends `event`; returns the actions.
    func actions(_ event: DownloadPlan.Event, to plan: inout DownloadPlan) -> [DownloadPlan.Action] {
        var actions: [DownloadPlan.Action] = []
        plan.handle(event, into: &actions)
        return actions
    }

    func name(_ work: RunWork) -> String {
        switch work {
        case .segment(let output, let segment): "s\(output).\(segment)"
        case .piece(let output, let key): "p\(output)" + (key.map { "#\($0)" } ?? "")
        }
    }

    func name(_ action: DownloadPlan.Action) -> String {
        switch action {
        case .start(let work, let host, let retry): "start \(name(work))@\(host)" + (retry == nil ? "" : " retry")
        case .queued(let work, let host): "queued \(name(work))@\(host)"
        case .withdraw(let host, let count): "withdraw \(host) \(count)"
        case .giveBack(let host, let count): "giveBack \(host) \(count)"
        case .schedule(let work, let delay): "schedule \(name(work)) \(delay)"
        case .shareOut(let output, let connections): "shareOut \(output) \(connections)"
        case .finalize(let output): "finalize \(output)"
        case .updateCap: "updateCap"
        case .retrying(let error): "retrying \(error.message)"
        case .noteFailure(let output, _, let attempt): "noteFailure \(output) dead \(attempt.deadMirrors.sorted())"
        case .restart(let output): "restart \(output)"
        case .cancelAll: "cancelAll"
        }
    }

    /// `works` queued on host `h` and `count` slots granted.
    @discardableResult
    func started(_ works: [RunWork], granting count: Int, plan: inout DownloadPlan) -> [String] {
        for work in works { send(.add(work, host: "h", front: false), to: &plan) }
        return send(.granted(host: "h", count: count), to: &plan)
    }

    /// Whether the pass goes on (it has no outcome yet).
    func goesOn(_ plan: DownloadPlan) -> Bool {
        var copy = plan, actions: [DownloadPlan.Action] = []
        return copy.outcome(into: &actions) == nil
    }

    func outcome(_ plan: inout DownloadPlan) -> (Result<TaskRun.PassOutcome, any Error>, [String])? {
        var actions: [DownloadPlan.Action] = []
        guard let outcome = plan.outcome(into: &actions) else { return nil }
        return (outcome, actions.map(name))
    }

    // MARK: Slots

    @Test func addedWorkAsksTheSchedulerForASlot() {
        var plan = plan()
        #expect(send(.add(s0, host: "h", front: false), to: &plan) == ["queued s0.0@h"])
        #expect(plan.queued(on: "h") == 1)
    }

    @Test func aGrantStartsQueuedWorkInOrderAndAnUnusedOneGoesBack() {
        var plan = plan()
        #expect(started([s0, s1, s2], granting: 2, plan: &plan) == ["start s0.0@h", "start s0.1@h"])
        #expect(plan.queued(on: "h") == 1)
        #expect(plan.running == 2)
        #expect(send(.granted(host: "g", count: 1), to: &plan) == ["giveBack g 1"], "nothing waits for g")
    }

    @Test func workQueuedFirstStartsFirst() {
        var plan = plan()
        send(.add(s0, host: "h", front: false), to: &plan)
        send(.add(s1, host: "h", front: true), to: &plan)
        #expect(send(.granted(host: "h", count: 1), to: &plan) == ["start s0.1@h"])
    }

    @Test func workThatNeedsNothingPassesItsSlotOnAndWithdrawsTheNextDemand() {
        var plan = plan()
        #expect(started([s0, s1], granting: 1, plan: &plan) == ["start s0.0@h"])
        // The grant covered s0's demand; s1 starts on the same slot: its demand is withdrawn.
        #expect(send(.startedNothing(host: "h"), to: &plan) == ["withdraw h 1", "start s0.1@h"])
        #expect(send(.startedNothing(host: "h"), to: &plan) == ["giveBack h 1"])
        #expect(plan.running == 0)
    }

    @Test func aSlotIsKeptWithinTheShareAndGivenBackAboveIt() {
        var plan = plan()
        started([s0, s1, s2], granting: 2, plan: &plan)
        send(.share(1), to: &plan)
        #expect(send(.ended(s0, host: "h", .idle), to: &plan) == ["giveBack h 1"], "two held, one is the share")
        send(.share(4), to: &plan)
        #expect(send(.ended(s1, host: "h", .idle), to: &plan) == ["withdraw h 1", "start s0.2@h"])
        #expect(plan.holding(on: "h") == 1)
    }

    // MARK: Segments

    @Test func theLastSegmentOfAnOutputFinishesItAndThePassCompletes() {
        var plan = plan()
        started([s0, s1], granting: 2, plan: &plan)
        #expect(send(.ended(s0, host: "h", .done(outputComplete: false)), to: &plan) == ["updateCap", "giveBack h 1"])
        #expect(send(.ended(s1, host: "h", .done(outputComplete: true)), to: &plan) == ["finalize 0", "updateCap", "giveBack h 1"])
        #expect(goesOn(plan), "the output is being finished")
        #expect(send(.finalized(output: 0, nil), to: &plan).isEmpty)
        guard let (result, giveBack) = outcome(&plan), case .success(.complete) = result else {
            Issue.record("the pass is complete")
            return
        }
        #expect(giveBack.isEmpty)
    }

    @Test func aSegmentRetryWaitsWithoutItsSlotAndGoesFirstWhenDue() {
        var plan = plan()
        started([s0, s1, s2], granting: 1, plan: &plan)
        #expect(send(.ended(s0, host: "h", .retry(after: .seconds(2), retryState())), to: &plan) == [
            "schedule s0.0 2.0 seconds", "withdraw h 1", "start s0.1@h",
        ])
        #expect(send(.due(s0, host: "g"), to: &plan) == ["queued s0.0@g"], "it goes where its URLs are now")
        #expect(send(.granted(host: "g", count: 1), to: &plan) == ["start s0.0@g retry"])
    }

    @Test func aDueRetryOfAnEndingPassIsDropped() {
        var plan = plan()
        started([s0, s1], granting: 2, plan: &plan)
        send(.ended(s0, host: "h", .retry(after: .seconds(1), retryState())), to: &plan)
        send(.ended(s1, host: "h", .failed(status(400))), to: &plan)
        #expect(send(.due(s0, host: "h"), to: &plan).isEmpty)
    }

    @Test func staleURLsStopNewWorkAndEndThePassOnceNothingRuns() {
        var plan = plan()
        started([s0, s1, s2], granting: 2, plan: &plan)
        let stale = status(404)
        #expect(send(.ended(s0, host: "h", .reResolve(stale)), to: &plan) == ["giveBack h 1"], "no new work, nothing cancelled")
        #expect(goesOn(plan), "s1 still runs")
        send(.ended(s1, host: "h", .done(outputComplete: false)), to: &plan)
        guard let (result, giveBack) = outcome(&plan), case .success(.reResolve(let error)) = result else {
            Issue.record("the pass resolves again")
            return
        }
        #expect(error.httpStatus == 404)
        #expect(giveBack == ["withdraw h 1"], "s2's demand is withdrawn")
    }

    @Test func aFailureCancelsWhatRunsAndEndsThePass() {
        for ended in [DownloadPlan.Ended.failed(status(400)), .networkLost(DownloadError(.connectionRefused, "refused")),
            .resetOutput(0, DownloadError(.contentChanged, "changed"))]
        {
            var plan = plan()
            started([s0, s1], granting: 2, plan: &plan)
            #expect(send(.ended(s0, host: "h", ended), to: &plan) == ["cancelAll", "giveBack h 1"])
            #expect(goesOn(plan), "s1 still runs")
            send(.ended(s1, host: "h", .idle), to: &plan)
            switch (ended, outcome(&plan)?.0) {
            case (.failed, .failure(let error as DownloadError)?): #expect(error.httpStatus == 400)
            case (.networkLost, .failure(let error as TaskRun.NetworkUnavailable)?): #expect(error.error.code == .connectionRefused)
            case (.resetOutput, .success(.resetOutput(0, _))?): break
            default: Issue.record("unexpected outcome for \(ended)")
            }
        }
    }

    @Test func aFailureAfterStaleURLsStillCancels() {
        var plan = plan()
        started([s0, s1], granting: 2, plan: &plan)
        send(.ended(s0, host: "h", .reResolve(status(404))), to: &plan)
        #expect(send(.ended(s1, host: "h", .failed(status(400))), to: &plan) == ["cancelAll", "giveBack h 1"])
        guard case .failure? = outcome(&plan)?.0 else {
            Issue.record("the failure wins over resolving again")
            return
        }
    }

    // MARK: Single outputs

    @Test func aConnectionThatFinishedItsRangeTakesTheNextOnItsSlot() {
        var plan = plan()
        #expect(started([piece], granting: 1, plan: &plan) == ["start p0@h"])
        #expect(send(.ended(piece, host: "h", .pieceFree(host: "h")), to: &plan) == [
            "queued p0@h", "withdraw h 1", "start p0@h",
        ])
    }

    @Test func aConnectionWithNothingToTakeYetWaitsWithoutItsSlotAndQueuesFirstWhenDue() {
        var plan = plan()
        started([piece, s0], granting: 1, plan: &plan)
        // Its slot goes to the next work; it looks again later.
        #expect(send(.notYet(piece, host: "h", after: .milliseconds(500)), to: &plan) == [
            "withdraw h 1", "start s0.0@h", "schedule p0 0.5 seconds",
        ])
        #expect(send(.notYet(piece, host: "h", after: .milliseconds(300)), to: &plan) == ["giveBack h 1", "schedule p0 0.3 seconds"])
        #expect(plan.running == 0)
        #expect(send(.due(piece, host: "h"), to: &plan) == ["queued p0@h"])
        #expect(send(.granted(host: "h", count: 1), to: &plan) == ["start p0@h"])
    }

    @Test func aConnectionThatCompletedTheOutputFinishesIt() {
        var plan = plan()
        started([piece], granting: 1, plan: &plan)
        #expect(send(.ended(piece, host: "h", .pieceCompletedOutput), to: &plan) == ["finalize 0", "giveBack h 1"])
    }

    @Test func refusedRangesAskForTheWholeFileAtOnceWithTheSameAttempt() {
        var plan = plan()
        let retried = RunWork.piece(output: 0, attempt: 7)
        started([retried], granting: 1, plan: &plan)
        #expect(send(.ended(retried, host: "h", .rangesRefused(host: "h")), to: &plan) == [
            "queued p0#7@h", "withdraw h 1", "start p0#7@h",
        ])
    }

    @Test func aFailedConnectionTriesTheNextURLThenWaitsCarryingItsAttempt() {
        var plan = plan()
        let mirrors = DownloadPlan.Mirrors(count: 2, waits: [nil, nil], hosts: ["h", "g"])
        started([piece], granting: 1, plan: &plan)
        #expect(send(.ended(piece, host: "h", .pieceFailed(status(503), progressed: false, resumed: false, mirrors: mirrors)), to: &plan) == [
            "noteFailure 0 dead []", "retrying status 503", "queued p0#1@h", "withdraw h 1", "start p0#1@h retry",
        ])
        let retried = RunWork.piece(output: 0, attempt: 1)
        let second = actions(.ended(retried, host: "h", .pieceFailed(status(503), progressed: false, resumed: false, mirrors: mirrors)), to: &plan)
        #expect(second.map(name).prefix(2) == ["noteFailure 0 dead []", "retrying status 503"])
        guard case .schedule(retried, let delay) = second[2] else {
            Issue.record("every URL failed once: a wait")
            return
        }
        #expect(delay >= .milliseconds(50) && delay <= .milliseconds(100))
        #expect(second.map(name).suffix(1) == ["giveBack h 1"])
    }

    @Test func aGoneURLSendsTheRetryToTheNextLiveHost() {
        var plan = plan()
        let mirrors = DownloadPlan.Mirrors(count: 2, waits: [], hosts: ["h", "g"])
        started([piece], granting: 1, plan: &plan)
        #expect(send(.ended(piece, host: "h", .pieceFailed(status(410), progressed: false, resumed: false, mirrors: mirrors)), to: &plan) == [
            "noteFailure 0 dead [0]", "retrying status 410", "queued p0#1@g", "giveBack h 1",
        ])
    }

    @Test func aConnectionWithEveryURLUnreachableWaitsForTheNetwork() {
        var plan = plan()
        started([piece], granting: 1, plan: &plan)
        let refused = DownloadError(.connectionRefused, "refused")
        #expect(send(.ended(piece, host: "h", .pieceFailed(refused, progressed: false, resumed: false, mirrors: .init(count: 1))), to: &plan) == [
            "noteFailure 0 dead []", "cancelAll", "giveBack h 1",
        ])
        guard case .failure(let error as TaskRun.NetworkUnavailable)? = outcome(&plan)?.0 else {
            Issue.record("the task waits for the network")
            return
        }
        #expect(error.error.code == .connectionRefused)
    }

    @Test func aServersRetryAfterIsAWaitNotAFailure() {
        var plan = plan()
        started([piece], granting: 1, plan: &plan)
        var state = retryState()
        state.next = .fetch(mirror: 0, fromScratch: false)
        // No error is reported, no retry is spent: the connection waits without its slot.
        #expect(send(.ended(piece, host: "h", .pieceWaits(.seconds(3), state)), to: &plan) == [
            "schedule p0#1 3.0 seconds", "giveBack h 1",
        ])
        let retried = RunWork.piece(output: 0, attempt: 1)
        #expect(send(.due(retried, host: "h"), to: &plan) == ["queued p0#1@h"])
        let start = actions(.granted(host: "h", count: 1), to: &plan)
        guard case .start(retried, "h", let retry?) = start.first else {
            Issue.record("the connection starts with its attempt")
            return
        }
        #expect(retry.attempt.failures == 0)
    }

    @Test func moreConnectionsShareASingleOutput() {
        var plan = plan()
        started([piece], granting: 1, plan: &plan)
        #expect(send(.connectionsAdded(output: 0, count: 2, host: "h"), to: &plan) == [
            "shareOut 0 3", "queued p0@h", "queued p0@h",
        ])
        #expect(send(.connectionsAdded(output: 0, count: 0, host: "h"), to: &plan).isEmpty)
        send(.ended(piece, host: "h", .failed(status(400))), to: &plan)
        #expect(send(.connectionsAdded(output: 0, count: 2, host: "h"), to: &plan).isEmpty, "the pass ends")
    }

    // MARK: Outputs

    @Test func anOutputCompleteAtTheStartIsFinishedOnce() {
        var plan = plan(outputs: 2)
        #expect(send(.complete(output: 1), to: &plan) == ["finalize 1"])
        #expect(send(.complete(output: 1), to: &plan).isEmpty)
        send(.finalized(output: 1, nil), to: &plan)
        #expect(send(.complete(output: 1), to: &plan).isEmpty)
        #expect(goesOn(plan), "output 0 is not finished")
    }

    @Test func anOutputThatFailsItsChecksumIsFetchedOnceMoreThenTheTaskFails() {
        var plan = plan()
        send(.complete(output: 0), to: &plan)
        let mismatch = DownloadError(.checksumMismatch, "bad")
        #expect(send(.finalized(output: 0, mismatch), to: &plan) == ["retrying bad", "restart 0"])
        send(.complete(output: 0), to: &plan)
        #expect(send(.finalized(output: 0, DownloadError(.sizeMismatch, "short")), to: &plan) == ["cancelAll"])
        guard case .failure(let error as DownloadError)? = outcome(&plan)?.0 else {
            Issue.record("the second mismatch fails the task")
            return
        }
        #expect(error.message == "short, again after downloading it a second time")
    }

    @Test func anOutputThatCannotBeMovedFailsTheTask() {
        var plan = plan()
        send(.complete(output: 0), to: &plan)
        #expect(send(.finalized(output: 0, DownloadError(.writeFailed, "denied")), to: &plan) == ["cancelAll"])
        guard case .failure(let error as DownloadError)? = outcome(&plan)?.0 else {
            Issue.record("the task fails")
            return
        }
        #expect(error.code == .writeFailed)
    }

    // MARK: Cancel

    @Test func cancellingStopsEverythingAndGivesBackWhatIsHeld() {
        var plan = plan()
        started([s0, s1, s2], granting: 2, plan: &plan)
        #expect(send(.cancelled, to: &plan) == ["cancelAll"])
        send(.ended(s0, host: "h", .idle), to: &plan)
        #expect(goesOn(plan), "s1 still runs")
        #expect(send(.ended(s1, host: "h", .idle), to: &plan) == ["giveBack h 1"], "no new work starts on its slot")
        guard let (result, rest) = outcome(&plan), case .failure(let error) = result else {
            Issue.record("the pass ends cancelled")
            return
        }
        #expect(error is CancellationError)
        #expect(rest == ["withdraw h 1"], "s2's demand is withdrawn")
    }
}
