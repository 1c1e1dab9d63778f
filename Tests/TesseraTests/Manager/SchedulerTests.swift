import Foundation
import Testing
@testable import Tessera

/// The scheduler alone: events in, actions out. No network, no clock, no actor.
@Suite struct SchedulerTests {
    let a = TaskHandle(1), b = TaskHandle(2), c = TaskHandle(3), d = TaskHandle(4)

    func scheduler(tasks: Int = 2, segments: Int = 4, perHost: Int? = nil, metered: Bool = true, wait: Duration? = nil)
        -> Scheduler
    {
        Scheduler(limits: Scheduler.Limits(
            tasks: tasks, segments: segments, segmentsPerHost: perHost ?? segments, allowsMeteredNetwork: metered,
            maxNetworkWait: wait))
    }

    /// Adds and starts tasks in order; returns every action.
    @discardableResult
    func add(_ ids: [TaskHandle], to scheduler: inout Scheduler, start: Bool = true) -> [Scheduler.Action] {
        var actions: [Scheduler.Action] = []
        for (index, id) in ids.enumerated() {
            _ = scheduler.beginCommand()
            actions += scheduler.handle(.added(id, sequence: index + 1, start: start))
        }
        return actions
    }

    func launched(_ actions: [Scheduler.Action]) -> [TaskHandle] {
        actions.compactMap { if case .launch(let id, _) = $0 { id } else { nil } }
    }

    func granted(_ actions: [Scheduler.Action]) -> [TaskHandle: Int] {
        var result: [TaskHandle: Int] = [:]
        for case .grant(let id, _, _, let count) in actions { result[id, default: 0] += count }
        return result
    }

    func generation(_ scheduler: Scheduler, _ id: TaskHandle) -> Int { scheduler.entry(id)!.generation }

    // MARK: Queue and task slots

    @Test func tasksLaunchInOrderUpToTheTaskLimit() {
        var scheduler = scheduler(tasks: 2)
        let actions = add([a, b, c], to: &scheduler)
        #expect(launched(actions) == [a, b])
        #expect(scheduler.state(of: c) == .waiting)
        #expect(scheduler.state(of: a) == .resolving)
    }

    @Test func aTaskWhoseSegmentsAreAllInFlightLetsTheNextOneStart() {
        var scheduler = scheduler(tasks: 1, segments: 4)
        add([a, b], to: &scheduler)
        // a wants two segments; both get slots at once: a holds no task slot any more.
        let actions = scheduler.handle(.resolved(a, generation: generation(scheduler, a), demand: ["h": 2]))
        #expect(granted(actions)[a] == 2)
        #expect(launched(actions) == [b], "b starts while a's last segments are in flight")
        #expect(scheduler.activeCount == 1)
    }

    @Test func aTaskWithSegmentsWaitingKeepsItsTaskSlot() {
        var scheduler = scheduler(tasks: 1, segments: 2)
        add([a, b], to: &scheduler)
        let actions = scheduler.handle(.resolved(a, generation: generation(scheduler, a), demand: ["h": 5]))
        #expect(granted(actions)[a] == 2)
        #expect(launched(actions).isEmpty, "a still has three segments waiting")
        #expect(scheduler.state(of: b) == .waiting)
    }

    @Test func aRestartedTaskJumpsAheadOfTasksThatNeverRan() {
        var scheduler = scheduler(tasks: 1)
        add([a, b, c], to: &scheduler)
        _ = scheduler.beginCommand()
        _ = scheduler.handle(.stop(a))
        // b took the slot; c waits. Resuming a puts it ahead of c.
        #expect(scheduler.state(of: b) == .resolving)
        _ = scheduler.beginCommand()
        _ = scheduler.handle(.resume(a))
        let ending = scheduler.handle(.ended(b, generation: generation(scheduler, b), .completed))
        #expect(launched(ending) == [a])
    }

    @Test func stoppingManyLaunchesNothingInBetween() {
        var scheduler = scheduler(tasks: 1)
        add([a, b, c], to: &scheduler)
        _ = scheduler.beginCommand()
        let actions = scheduler.handle(.stopMany([a, b, c]))
        #expect(launched(actions).isEmpty, "stopping a must not launch b, which is stopped next")
        #expect([a, b, c].allSatisfy { scheduler.state(of: $0) == .paused })
        #expect(actions.contains(.cancel(a)))
    }

    @Test func startAllSkipsTasksACommandTouchedSince() {
        var scheduler = scheduler(tasks: 1)
        add([a, b], to: &scheduler, start: false)
        let epoch = scheduler.beginCommand()
        _ = scheduler.beginCommand()
        _ = scheduler.handle(.stop(b))  // a later command touched b
        _ = scheduler.handle(.startIfUntouched(a, since: epoch))
        _ = scheduler.handle(.startIfUntouched(b, since: epoch))
        #expect(scheduler.state(of: a) == .waiting)
        #expect(scheduler.state(of: b) == .paused)
    }

    @Test func aCompletedTaskStartedAgainInTheSameModeStaysCompleted() {
        var scheduler = scheduler()
        add([a], to: &scheduler)
        _ = scheduler.handle(.resolved(a, generation: generation(scheduler, a), demand: [:]))
        _ = scheduler.handle(.ended(a, generation: generation(scheduler, a), .completed))
        _ = scheduler.beginCommand()
        #expect(scheduler.handle(.start(a, redo: false)).isEmpty)
        #expect(scheduler.state(of: a) == .completed)
        _ = scheduler.beginCommand()
        #expect(launched(scheduler.handle(.start(a, redo: true))) == [a])
    }

    @Test func restoredTasksKeepTheirStateAndPlaceAndWaitForSchedule() {
        // After a restart the store gives each task back as it was: restoring launches nothing
        // (the manager restores every task first), then `schedule` starts the waiting ones,
        // heaviest first; a paused one stays paused.
        var scheduler = scheduler(tasks: 1)
        #expect(scheduler.handle(.restored(a, sequence: 1, weight: 0, state: .waiting)).isEmpty)
        #expect(scheduler.handle(.restored(b, sequence: 2, weight: 5, state: .waiting)).isEmpty)
        #expect(scheduler.handle(.restored(c, sequence: 3, weight: 9, state: .paused)).isEmpty)
        #expect(scheduler.handle(.restored(b, sequence: 4, weight: 0, state: .paused)).isEmpty, "a task is restored once")
        #expect(scheduler.handle(.schedule) == [.changed(b, from: .waiting, to: .resolving), .launch(b, generation: 1)])
        #expect(scheduler.state(of: a) == .waiting)
        #expect(scheduler.state(of: c) == .paused)
        // A command still puts a task ahead of every restored weight.
        _ = scheduler.beginCommand()
        #expect(scheduler.handle(.resume(c)) == [.changed(c, from: .paused, to: .waiting)])
        #expect(scheduler.weight(of: c) == 10)
        #expect(launched(scheduler.handle(.ended(b, generation: 1, .completed))) == [c], "c before a")
    }

    @Test func scheduleLaunchesWhatALargerTaskLimitMakesRoomFor() {
        var scheduler = scheduler(tasks: 1)
        add([a, b, c], to: &scheduler)
        #expect(scheduler.handle(.schedule).isEmpty, "nothing more fits")
        scheduler.setTaskLimit(3)
        #expect(scheduler.handle(.schedule) == [
            .changed(b, from: .waiting, to: .resolving), .launch(b, generation: 1),
            .changed(c, from: .waiting, to: .resolving), .launch(c, generation: 1),
        ])
        #expect(scheduler.handle(.schedule).isEmpty)
    }

    @Test func removingATaskCancelsItsRunForgetsItAndStartsTheNext() {
        var scheduler = scheduler(tasks: 1, segments: 2)
        add([a, b], to: &scheduler)
        let run = generation(scheduler, a)
        _ = scheduler.handle(.resolved(a, generation: run, demand: ["h": 5]))
        #expect(scheduler.segmentsInUse == 2)
        _ = scheduler.beginCommand()
        #expect(scheduler.handle(.remove(a)) == [
            .cancel(a), .changed(a, from: .downloading, to: .removed),
            .changed(b, from: .waiting, to: .resolving), .launch(b, generation: 1),
        ])
        #expect(scheduler.entry(a) == nil, "forgotten")
        #expect(scheduler.segmentsInUse == 0, "its slots are free")
        #expect(scheduler.activeCount == 1, "only b holds a task slot")
        // What its cancelled run still reports, and a second remove, do nothing.
        #expect(scheduler.handle(.returned(a, generation: run, host: "h", count: 2)).isEmpty)
        #expect(scheduler.handle(.ended(a, generation: run, .stopped)).isEmpty)
        #expect(scheduler.handle(.remove(a)).isEmpty)
    }

    @Test func aRunThatReResolvesHoldsATaskSlotAgainAndKeepsItsSegmentSlots() {
        // A segment URL expired: the run fetches a fresh manifest while its other transfers go on.
        var scheduler = scheduler(tasks: 1, segments: 4)
        add([a, b], to: &scheduler)
        let run = generation(scheduler, a)
        _ = scheduler.handle(.resolved(a, generation: run, demand: ["h": 1]))
        #expect(scheduler.activeCount == 1, "a's one segment is in flight: b took the task slot")
        #expect(scheduler.handle(.reResolving(a, generation: run)) == [.changed(a, from: .downloading, to: .resolving)])
        #expect(scheduler.activeCount == 2, "resolving holds a task slot, even over the limit: nothing is stopped for it")
        #expect(scheduler.segmentsInUse == 1, "the transfer in flight keeps its slot")
        #expect(scheduler.handle(.reResolving(a, generation: run)).isEmpty, "already resolving")
        #expect(scheduler.handle(.reResolving(a, generation: run - 1)).isEmpty, "an older run")
        // Resolved again: downloading, and what it wants next is granted.
        let again = scheduler.handle(.resolved(a, generation: run, demand: ["h": 1]))
        #expect(again == [
            .changed(a, from: .resolving, to: .downloading), .share(a, generation: run, limit: 2),
            .grant(a, generation: run, host: "h", count: 1),
        ])
    }

    @Test func aRunAskingForMoreSegmentsGetsThemUpToItsShareAndHoldsItsTaskSlotWhileAnyWait() {
        var scheduler = scheduler(tasks: 1, segments: 2)
        add([a, b], to: &scheduler)
        let run = generation(scheduler, a)
        let resolved = scheduler.handle(.resolved(a, generation: run, demand: ["h": 1]))
        #expect(launched(resolved) == [b], "a wants one slot and has it: b starts")
        // A split: a wants three more. One slot is free; its share grows to both slots.
        #expect(scheduler.handle(.demand(a, generation: run, host: "h", count: 3)) == [
            .share(a, generation: run, limit: 2), .grant(a, generation: run, host: "h", count: 1),
        ])
        #expect(scheduler.entry(a)?.demandTotal == 2, "two still wait for a slot")
        #expect(scheduler.entry(a)?.isActive == true)
        #expect(scheduler.handle(.demand(a, generation: run, host: "h", count: 0)).isEmpty, "nothing asked")
        #expect(scheduler.handle(.demand(a, generation: run - 1, host: "h", count: 1)).isEmpty, "an older run")
        // A slot comes back: it goes to what a still waits for.
        #expect(scheduler.handle(.returned(a, generation: run, host: "h", count: 1)) == [.grant(a, generation: run, host: "h", count: 1)])
    }

    @Test func aRunThatGoesAwayWithoutACommandIsPaused() {
        // The manager shuts down: its runs end `stopped`; the tasks resume at the next start.
        var scheduler = scheduler(tasks: 1)
        add([a, b], to: &scheduler)
        #expect(scheduler.handle(.ended(a, generation: generation(scheduler, a), .stopped)) == [
            .changed(a, from: .resolving, to: .paused),
            .changed(b, from: .waiting, to: .resolving), .launch(b, generation: 1),
        ])
    }

    /// Every case of `Scheduler.Event` is handed to `handle` somewhere in this file (the source of
    /// both is read): a new event comes with its test.
    @Test func everyEventIsSentByATest() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let sources = folder.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let scheduler = try String(contentsOf: sources.appendingPathComponent("Sources/Tessera/Manager/Scheduler.swift"), encoding: .utf8)
        let tests = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let body = try #require(scheduler.range(of: "enum Event: Sendable {").flatMap { start in
            scheduler.range(of: "\n    }\n", range: start.upperBound..<scheduler.endIndex).map { scheduler[start.upperBound..<$0.lowerBound] }
        })
        let events = body.matches(of: /\n\s+case ([a-zA-Z]+)/).map { String($0.1) }
        #expect(events.count >= 19)
        for event in events {
            #expect(tests.contains("handle(.\(event)(") || tests.contains("handle(.\(event))"), "no test sends .\(event)")
        }
    }

    // MARK: Segment slots

    @Test func slotsAreSharedFairlyBetweenTasks() {
        var scheduler = scheduler(tasks: 2, segments: 4)
        add([a, b], to: &scheduler)
        let first = scheduler.handle(.resolved(a, generation: generation(scheduler, a), demand: ["h": 10]))
        #expect(granted(first)[a] == 4, "alone, a takes every slot")
        let second = scheduler.handle(.resolved(b, generation: generation(scheduler, b), demand: ["h": 10]))
        #expect(second.contains(.share(a, generation: generation(scheduler, a), limit: 2)), "a is told to give two back")
        #expect(granted(second)[b] == nil, "no slot is free yet")
        // a gives back two as its transfers end: b gets both.
        let returned = scheduler.handle(.returned(a, generation: generation(scheduler, a), host: "h", count: 2))
        #expect(granted(returned)[b] == 2)
        #expect(scheduler.segmentsInUse == 4)
    }

    @Test func aTaskWantingLessThanItsShareGetsWhatItWantsAndTheRestGoesToTheOther() {
        var scheduler = scheduler(tasks: 2, segments: 8)
        add([a, b], to: &scheduler)
        _ = scheduler.handle(.resolved(a, generation: generation(scheduler, a), demand: ["h": 1]))
        let actions = scheduler.handle(.resolved(b, generation: generation(scheduler, b), demand: ["h": 100]))
        #expect(granted(actions)[b] == 7)
        #expect(actions.contains(.share(b, generation: generation(scheduler, b), limit: 7)))
    }

    @Test func aCappedRunGetsNoMoreThanItsCapAndTheRestGoesToOthers() {
        var scheduler = scheduler(tasks: 2, segments: 8)
        add([a, b], to: &scheduler)
        let first = scheduler.handle(.resolved(a, generation: generation(scheduler, a), demand: ["h": 100]))
        #expect(granted(first)[a] == 8)
        // a says it wants two at most (a rate limit): its share drops, it gives the rest back.
        let capped = scheduler.handle(.cap(a, generation: generation(scheduler, a), slots: 2))
        #expect(capped.contains(.share(a, generation: generation(scheduler, a), limit: 2)))
        _ = scheduler.handle(.returned(a, generation: generation(scheduler, a), host: "h", count: 6))
        #expect(scheduler.segmentsInUse == 2, "a keeps two, none is granted to it again")
        let other = scheduler.handle(.resolved(b, generation: generation(scheduler, b), demand: ["h": 100]))
        #expect(granted(other)[b] == 6, "b takes what a does not want")
        // Lifted, a may take its share again as slots free up.
        let lifted = scheduler.handle(.cap(a, generation: generation(scheduler, a), slots: nil))
        #expect(lifted.contains(.share(a, generation: generation(scheduler, a), limit: 4)))
        #expect(scheduler.handle(.cap(a, generation: generation(scheduler, a) - 1, slots: 1)).isEmpty, "an older run's cap is ignored")
    }

    @Test func theHostLimitHoldsAcrossTasks() {
        var scheduler = scheduler(tasks: 3, segments: 8, perHost: 2)
        add([a, b], to: &scheduler)
        let first = scheduler.handle(.resolved(a, generation: generation(scheduler, a), demand: ["x": 5, "y": 1]))
        #expect(granted(first)[a] == 3, "two for x, one for y")
        let second = scheduler.handle(.resolved(b, generation: generation(scheduler, b), demand: ["x": 5]))
        #expect(granted(second)[b] == nil, "x is at its limit")
        let freed = scheduler.handle(.returned(a, generation: generation(scheduler, a), host: "x", count: 1))
        #expect(granted(freed)[b] == 1, "the freed x slot goes to the task holding fewer")
    }

    @Test func aHostsOwnLimitCapsItsGrantsBelowThePerHostLimit() {
        var scheduler = scheduler(tasks: 3, segments: 8, perHost: 4)
        add([a, b], to: &scheduler)
        _ = scheduler.handle(.hostLimit("x", 2))
        #expect(scheduler.hostCap("x") == 2 && scheduler.hostCap("y") == 4)
        let first = scheduler.handle(.resolved(a, generation: generation(scheduler, a), demand: ["x": 3, "y": 3]))
        #expect(scheduler.entry(a)!.held == ["x": 2, "y": 3], "x stops at its own limit, y at the per-host one")
        let second = scheduler.handle(.resolved(b, generation: generation(scheduler, b), demand: ["x": 2]))
        #expect(granted(second)[b] == nil, "x is at its own limit")
        #expect(granted(first)[a] == 5)
        #expect(scheduler.transfersByHost == ["x": 2, "y": 3])
        #expect(scheduler.demandByHost == ["x": 3])
        // Raised: the next slot goes at once, to the task holding fewer.
        let raised = scheduler.handle(.hostLimit("x", 3))
        #expect(granted(raised) == [b: 1])
        // Above the per-host limit, the per-host limit still holds.
        let above = scheduler.handle(.hostLimit("x", 10))
        #expect(granted(above) == [b: 1], "x reaches the per-host limit of 4")
        #expect(scheduler.transfersByHost["x"] == 4)
    }

    @Test func aLoweredHostLimitStopsNothingAndGrantsAgainOnlyBelowIt() {
        var scheduler = scheduler(tasks: 3, segments: 8, perHost: 4)
        add([a, b], to: &scheduler)
        _ = scheduler.handle(.resolved(a, generation: generation(scheduler, a), demand: ["x": 4]))
        _ = scheduler.handle(.resolved(b, generation: generation(scheduler, b), demand: ["x": 4]))
        #expect(scheduler.transfersByHost["x"] == 4 && scheduler.demandByHost["x"] == 4)
        let lowered = scheduler.handle(.hostLimit("x", 2))
        #expect(!lowered.contains { if case .cancel = $0 { true } else { false } } && granted(lowered).isEmpty)
        #expect(scheduler.transfersByHost["x"] == 4, "transfers above the new limit run to their end")
        let three = scheduler.handle(.returned(a, generation: generation(scheduler, a), host: "x", count: 1))
        let two = scheduler.handle(.returned(a, generation: generation(scheduler, a), host: "x", count: 1))
        #expect(granted(three).isEmpty && granted(two).isEmpty, "4 -> 2 in flight: nothing granted down to the new limit")
        let one = scheduler.handle(.returned(a, generation: generation(scheduler, a), host: "x", count: 1))
        #expect(granted(one) == [b: 1], "one below the limit: one slot goes out again, to the task holding fewer")
        #expect(scheduler.transfersByHost["x"] == 2)
    }

    @Test func underAnUnlistedLimitOfZeroAHostWaitsForItsOwnLimit() {
        var scheduler = scheduler(tasks: 3, segments: 8)
        add([a], to: &scheduler)
        _ = scheduler.handle(.unlistedHostLimit(0))
        let resolved = scheduler.handle(.resolved(a, generation: generation(scheduler, a), demand: ["x": 3, "y": 1]))
        #expect(granted(resolved).isEmpty, "no host is leased yet")
        #expect(scheduler.demandByHost == ["x": 3, "y": 1])
        let leased = scheduler.handle(.hostLimit("x", 2))
        #expect(leased.contains(.grant(a, generation: generation(scheduler, a), host: "x", count: 2)))
        #expect(scheduler.transfersByHost == ["x": 2])
        _ = scheduler.handle(.hostLimit("x", nil))
        #expect(scheduler.hostCap("x") == 0, "a cleared limit falls back to the unlisted hosts' one")
        let lifted = scheduler.handle(.unlistedHostLimit(nil))
        #expect(lifted.contains(.grant(a, generation: generation(scheduler, a), host: "y", count: 1)))
        #expect(scheduler.transfersByHost == ["x": 3, "y": 1])
    }

    @Test func singleSlotTasksRespectAHostsOwnLimit() {
        var scheduler = scheduler(tasks: 6, segments: 8)
        let ids = (1...5).map { TaskHandle($0) }
        add(ids, to: &scheduler)
        _ = scheduler.handle(.hostLimit("x", 2))
        var grants = 0
        for id in ids {
            grants += granted(scheduler.handle(.resolved(id, generation: generation(scheduler, id), demand: ["x": 1]))).values.reduce(0, +)
        }
        #expect(grants == 2 && scheduler.transfersByHost["x"] == 2)
        let raised = scheduler.handle(.hostLimit("x", 3))
        #expect(granted(raised) == [ids[2]: 1], "by weight, then age")
    }

    @Test func reportsOfAnOlderRunAreIgnored() {
        var scheduler = scheduler(tasks: 1, segments: 2)
        add([a], to: &scheduler)
        let old = generation(scheduler, a)
        _ = scheduler.beginCommand()
        _ = scheduler.handle(.stop(a))
        _ = scheduler.beginCommand()
        _ = scheduler.handle(.resume(a))
        #expect(scheduler.handle(.resolved(a, generation: old, demand: ["h": 3])).isEmpty)
        #expect(scheduler.handle(.ended(a, generation: old, .completed)).isEmpty)
        #expect(scheduler.state(of: a) == .resolving)
    }

    @Test func stoppingARunningTaskCancelsItAndFreesItsSlots() {
        var scheduler = scheduler(tasks: 1, segments: 2)
        add([a, b], to: &scheduler)
        _ = scheduler.handle(.resolved(a, generation: generation(scheduler, a), demand: ["h": 5]))
        #expect(scheduler.segmentsInUse == 2)
        _ = scheduler.beginCommand()
        let actions = scheduler.handle(.stop(a))
        #expect(actions.contains(.cancel(a)))
        #expect(actions.contains(.changed(a, from: .downloading, to: .paused)))
        #expect(launched(actions) == [b])
        #expect(scheduler.segmentsInUse == 0)
    }

    // MARK: Endings and environment

    @Test func endingsMapToStates() {
        var scheduler = scheduler(tasks: 4)
        add([a, b, c, d], to: &scheduler)
        _ = scheduler.handle(.ended(a, generation: generation(scheduler, a), .failed(permanent: true)))
        _ = scheduler.handle(.ended(b, generation: generation(scheduler, b), .failed(permanent: false)))
        _ = scheduler.handle(.resolved(c, generation: generation(scheduler, c), demand: [:]))
        _ = scheduler.handle(.ended(c, generation: generation(scheduler, c), .completed))
        _ = scheduler.handle(.ended(d, generation: generation(scheduler, d), .networkLost(host: "h:80")))
        #expect(scheduler.state(of: a) == .invalid)
        #expect(scheduler.state(of: b) == .failed)
        #expect(scheduler.state(of: c) == .completed)
        #expect(scheduler.state(of: d) == .interrupted(.network))
        #expect(scheduler.hostsToProbe == ["h:80"])
    }

    @Test func aTaskWaitingForTheNetworkResumesWhenItsHostAnswersAndFailsAfterTheWait() {
        var scheduler = scheduler(tasks: 2, wait: .seconds(30))
        add([a, b], to: &scheduler)
        let lostA = scheduler.handle(.ended(a, generation: generation(scheduler, a), .networkLost(host: "x:80")))
        #expect(lostA.contains(.armNetworkWait(a, wait: 1, after: .seconds(30))))
        #expect(lostA.contains(.startProbing))
        _ = scheduler.handle(.ended(b, generation: generation(scheduler, b), .networkLost(host: "y:80")))
        let reached = scheduler.handle(.hostReachable("x:80"))
        #expect(launched(reached) == [a])
        #expect(scheduler.state(of: b) == .interrupted(.network))
        // b's wait runs out; an expiry of an older wait of a would do nothing.
        _ = scheduler.handle(.networkWaitExpired(b, wait: 1))
        #expect(scheduler.state(of: b) == .failed)
        #expect(scheduler.handle(.networkWaitExpired(a, wait: 1)).isEmpty)
    }

    @Test func aCriticalDiskStopsEveryRunningTaskAndResumesThemWhenSpaceIsBack() {
        var scheduler = scheduler(tasks: 2)
        add([a, b, c], to: &scheduler)
        let critical = scheduler.handle(.diskLevel(.critical, free: "10 MB free"))
        #expect(critical.contains(.cancel(a)) && critical.contains(.cancel(b)))
        #expect(scheduler.state(of: a) == .interrupted(.diskSpace))
        #expect(scheduler.state(of: c) == .waiting, "c waits; nothing starts on a critical disk")
        #expect(critical.contains { if case .notice(let notice) = $0 { notice.kind == .diskSpaceCritical } else { false } })
        let back = scheduler.handle(.diskLevel(.ample, free: "900 MB free"))
        #expect(back.contains { if case .notice(let notice) = $0 { notice.kind == .diskSpaceRecovered } else { false } })
        #expect(launched(back).count == 2)
    }

    @Test func aDiskFullEndingMakesTheDiskCritical() {
        var scheduler = scheduler(tasks: 2)
        add([a, b], to: &scheduler)
        let actions = scheduler.handle(.ended(a, generation: generation(scheduler, a), .diskFull))
        #expect(scheduler.state(of: a) == .interrupted(.diskSpace))
        #expect(scheduler.state(of: b) == .interrupted(.diskSpace))
        #expect(scheduler.disk == .critical)
        #expect(actions.contains(.cancel(b)))
    }

    @Test func aMeteredNetworkHoldsTasksBackUnlessAllowed() {
        var held = scheduler(metered: false)
        _ = held.handle(.network(NetworkStatus(isOnline: true, isMetered: true)))
        let heldActions = add([a], to: &held)
        #expect(held.state(of: a) == .interrupted(.meteredNetwork))
        #expect(heldActions.contains(.meteredNetwork(a, allowed: false)), "the subscribers hear why it waits")
        let unmetered = held.handle(.network(.online))
        #expect(launched(unmetered) == [a])

        var allowed = scheduler(metered: true)
        _ = allowed.handle(.network(NetworkStatus(isOnline: true, isMetered: true)))
        let actions = add([a], to: &allowed)
        #expect(launched(actions) == [a])
        #expect(actions.contains(.meteredNetwork(a, allowed: true)))
    }

    @Test func everyStateChangeFollowsTheTransitionTable() {
        // Drive a scheduler through many commands and endings; every change it reports must be
        // one the table allows, and its own states must match what it reported.
        var scheduler = scheduler(tasks: 2, segments: 3)
        let ids = [a, b, c, d]
        add(ids, to: &scheduler)
        var states: [TaskHandle: DownloadTaskState] = Dictionary(uniqueKeysWithValues: ids.map { ($0, .waiting) })
        for id in ids where scheduler.state(of: id) == .resolving { states[id] = .resolving }
        var random = SplitMixRandom(seed: 7)
        for _ in 0..<2_000 {
            let id = ids[Int(random.next() % 4)]
            let gen = generation(scheduler, id)
            _ = scheduler.beginCommand()
            let event: Scheduler.Event
            switch random.next() % 9 {
            case 0: event = .stop(id)
            case 1: event = .resume(id)
            case 2: event = .start(id, redo: random.next() % 2 == 0)
            case 3: event = .resolved(id, generation: gen, demand: ["h": Int(random.next() % 4)])
            case 4: event = .returned(id, generation: gen, host: "h", count: 1)
            case 5:
                // A run ends completed only after it downloaded.
                let ending: Scheduler.RunEnding = [.completed, .failed(permanent: false), .networkLost(host: "h")][Int(random.next() % 3)]
                event = .ended(id, generation: gen, ending == .completed && scheduler.state(of: id) != .downloading ? .failed(permanent: true) : ending)
            case 6: event = .diskLevel([.ample, .critical, .low][Int(random.next() % 3)], free: "")
            case 7: event = random.next() % 2 == 0 ? .hostReachable("h") : .cap(id, generation: gen, slots: Int(random.next() % 3))
            default: event = .network(random.next() % 2 == 0 ? .online : .offline)
            }
            for action in scheduler.handle(event) {
                switch action {
                case .changed(let changed, let from, let to):
                    #expect(from.canTransition(to: to), "\(from) -> \(to)")
                    #expect(states[changed] == from, "the change starts where the last one ended")
                    states[changed] = to
                case .refused(_, let from, let to):
                    Issue.record("refused \(from) -> \(to)")
                default:
                    break
                }
            }
            #expect(scheduler.segmentsInUse <= 3)
            #expect(scheduler.segmentsInUse >= 0)
            // The count of active tasks is kept as changes come: it is what a walk would find.
            #expect(scheduler.activeCount == scheduler.running.count { scheduler.entry($0)?.isActive == true })
            expectIndexesMatchAWalk(scheduler)
        }
        for id in ids { #expect(scheduler.state(of: id) == states[id]) }
    }
}

/// The single-slot rule (every running task wants one slot: a list of small files) hands out
/// slots without the general rule's picture of every task; it must decide exactly as that rule
/// does. Random event sequences go to two schedulers, one of them without the fast path.
@Suite struct SchedulerSingleSlotTests {
    @Test(arguments: 0..<40) func theSingleSlotRuleDecidesAsTheGeneralRule(seed: Int) {
        var random = SplitMixRandom(seed: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1)
        let limits = Scheduler.Limits(
            tasks: Int.random(in: 1...6, using: &random), segments: Int.random(in: 1...8, using: &random),
            segmentsPerHost: Int.random(in: 1...4, using: &random))
        var fast = Scheduler(limits: limits)
        var general = Scheduler(limits: limits)
        general.singleSlotFastPath = false
        let hosts = ["a", "b", "c"]
        // Mostly one-slot files, now and then a task that wants more (the general rule's case).
        let ids = (1...12).map { TaskHandle($0) }
        var added = 0
        for step in 0..<400 {
            let id = ids[Int.random(in: 0..<ids.count, using: &random)]
            let generation = fast.entry(id)?.generation ?? 0
            let host = hosts[Int.random(in: 0..<hosts.count, using: &random)]
            let many = Int.random(in: 0..<8, using: &random) == 0
            let event: Scheduler.Event
            switch Int.random(in: 0..<12, using: &random) {
            case 0 where added < ids.count:
                added += 1
                event = .added(ids[added - 1], sequence: added, start: Bool.random(using: &random))
            case 1: event = .start(id, redo: false)
            case 2: event = .stop(id)
            case 3, 4: event = .resolved(id, generation: generation, demand: [host: many ? 3 : 1])
            case 5: event = .demand(id, generation: generation, host: host, count: many ? 2 : 1)
            case 6, 7:
                let held = fast.entry(id)?.held.first
                event = .returned(id, generation: generation, host: held?.key ?? host, count: 1, withdrawn: Int.random(in: 0...1, using: &random))
            case 8: event = .ended(id, generation: generation, [.completed, .failed(permanent: false), .stopped].randomElement(using: &random)!)
            // A fleet's host limits: raised, lowered below what is in flight, cleared.
            case 9: event = .hostLimit(host, Bool.random(using: &random) ? nil : Int.random(in: 0...3, using: &random))
            case 10: event = .unlistedHostLimit([nil, 0, 1].randomElement(using: &random)!)
            default: event = .cap(id, generation: generation, slots: many ? 1 : nil)
            }
            _ = fast.beginCommand()
            _ = general.beginCommand()
            let fastActions = fast.handle(event)
            let generalActions = general.handle(event)
            #expect(fastActions == generalActions, "step \(step): \(event)")
            #expect(fast.segmentsInUse == general.segmentsInUse && fast.running == general.running, "step \(step)")
            #expect(fast.transfersByHost == general.transfersByHost, "step \(step)")
            for case .grant(_, _, let host, _) in fastActions {
                #expect(fast.transfersByHost[host, default: 0] <= fast.hostCap(host), "step \(step): a grant above \(host)'s limit")
            }
            for id in ids { #expect(fast.entry(id) == general.entry(id), "step \(step), task \(id)") }
            expectIndexesMatchAWalk(fast, "step \(step)")
            expectIndexesMatchAWalk(general, "step \(step)")
            if fastActions != generalActions { return }
        }
    }
}

/// The scheduler's indexes (tasks wanting many slots, tasks waiting for their one) hold what a
/// walk over its running tasks finds, in the order the rule serves them.
func expectIndexesMatchAWalk(_ scheduler: Scheduler, _ comment: String = "", sourceLocation: SourceLocation = #_sourceLocation) {
    let running = scheduler.running.compactMap { id in scheduler.entry(id).map { (id: id, entry: $0) } }
    let many = running.count { $0.entry.heldTotal + $0.entry.demandTotal > 1 }
    #expect(scheduler.manyWanting == many, "\(comment): tasks wanting many slots", sourceLocation: sourceLocation)
    let waiting = running
        .filter { $0.entry.heldTotal + $0.entry.demandTotal == 1 && $0.entry.demandTotal == 1 }
        .map { Scheduler.OneSlotWaiting(weight: $0.entry.weight, sequence: $0.entry.sequence, id: $0.id) }
        .sorted { $0.comesBefore($1) }
    #expect(scheduler.oneSlotWaiting == waiting, "\(comment): tasks waiting for one slot", sourceLocation: sourceLocation)
}
