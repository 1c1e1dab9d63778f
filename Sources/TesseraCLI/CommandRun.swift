import Foundation
import Synchronization
import Tessera

/// Runs tasks to their end with a display: every task in the set completed, failed or invalid
/// (interrupted ones resume by themselves, so the run waits for them), and the merges of the
/// completed ones done (the manager merges as tasks complete). Ctrl-C (SIGINT, SIGTERM,
/// SIGHUP) pauses every task cleanly, stops a merge (its files stay) and ends with exit code
/// 130. Commands from other `tessera` processes (`pause`, `resume`, `remove`) are applied while
/// it runs.
package struct CommandRun {
    let session: Session
    let display: Display

    /// A run of `session`'s manager, shown on `display`.
    package init(session: Session, display: Display) {
        self.session = session
        self.display = display
    }

    package struct Outcome {
        package var exitCode: Int32
        /// The tasks' end states, with `--json` or for up to 10,000 tasks (the text summary of a
        /// longer list asks the manager for them a thousand at a time, see ``summarize(_:)``).
        package var tasks: [DownloadTaskInfo]
        /// Every task the run followed, in order.
        var ids: [DownloadTaskID] = []
        var interrupted: Bool
        package var times: [DownloadTaskID: Duration]
        /// What merging did, by task.
        var merges: [DownloadTaskID: MergeOutcome] = [:]
    }

    /// What a run learns from the manager's events, taken from the moment it is made: made
    /// before the inputs are added, a list of 100,000 tasks is shown and counted as it is added
    /// instead of waiting, every event of it, in the stream's buffer.
    package final class Watch: Sendable {
        // Everything the loop needs to know comes from the events (times exact, states as they
        // change); the manager is asked once at the start and once at the end, whatever the
        // number of tasks.
        let clock = TaskClock()
        let tracker: RunTracker
        let merges: MergeTracker
        let wakeups: AsyncStream<Void>
        let wake: AsyncStream<Void>.Continuation
        let task: Task<Void, Never>

        /// Subscribes to `manager`'s events, those the run uses
        /// (``CommandRun/filter(for:timesTasks:)``). `timesTasks`: each task's time is taken from
        /// the events as they come (`--json` reports it, `tessera demo` shows it); by default
        /// with `--json` only.
        package init(manager: DownloadTaskManager, display: Display, timesTasks: Bool? = nil) {
            (wakeups, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
            let timed = timesTasks ?? (display.mode == .json)
            let events = manager.events(CommandRun.filter(for: display.mode, timesTasks: timed))
            // (Only the live board draws from the latest snapshots.)
            let tracker = RunTracker(keepsSnapshots: display.mode == .live)
            let merges = MergeTracker(display: display)
            let clock = self.clock, wake = self.wake
            self.tracker = tracker
            self.merges = merges
            task = Task {
                for await event in events {
                    // Shown before it counts: when the loop sees a task settled, its line is out.
                    display.handle(event)
                    merges.record(event)
                    if timed { clock.record(event) }
                    if tracker.record(event) { wake.yield() }
                }
            }
        }
    }

    /// The events a run shown in `mode` uses: all of them for `--json` (each is printed), the
    /// live board (it draws from the latest snapshots and their progress) and a run that times
    /// its tasks (from their start); one line per change without the additions and the
    /// progress (not shown); with `-q`, not the changes into `resolving` and `downloading`
    /// either. What a quiet run follows, whether each task has settled, changes only through
    /// `waiting` (a task leaves a settled state only into it) and the settled states, which it
    /// keeps; its tasks are added idle, which it does not count (see ``RunTracker/record(_:)``).
    static func filter(for mode: Display.Mode, timesTasks: Bool) -> DownloadEventFilter {
        switch mode {
        case .json, .live: return .all
        case _ where timesTasks: return .all
        case .lines: return DownloadEventFilter(additions: false, progress: false)
        case .quiet:
            return DownloadEventFilter(
                states: Set(DownloadTaskState.Kind.allCases).subtracting([.resolving, .downloading]), additions: false, progress: false)
        }
    }

    /// Runs until every task of `ids` (and any a `resume` command adds) has settled, or until
    /// Ctrl-C has paused them; then shuts the session's manager down and returns once the events
    /// `watch` takes (since it was made) have ended, so every event has been shown before the
    /// summary. Nothing here polls for the end: the loop wakes on the events that change a
    /// task's state, on Ctrl-C, and four times a second for other processes' commands and the
    /// live board.
    package func run(_ ids: [DownloadTaskID], watch: Watch, inputErrors: Int) async -> Outcome {
        let interrupt = InterruptSignal.shared
        interrupt.install()
        let display = self.display
        let (wakeups, wake, clock, tracker, merges, eventTask) = (watch.wakeups, watch.wake, watch.clock, watch.tracker, watch.merges, watch.task)
        interrupt.notify(wake)
        tracker.track(ids)
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(250))
                wake.yield()
            }
        }
        // A resized terminal gets its board redrawn at once, at the new width.
        let resized = ResizeSignal(enabled: display.mode == .live, wake: wake)
        defer { resized.cancel() }
        // A thousand at a time: the snapshots of a list of 100,000 tasks at once were the
        // run's peak of memory.
        for start in stride(from: 0, to: ids.count, by: 1_000) {
            await seed(tracker, Array(ids[start..<min(start + 1_000, ids.count)]))
        }
        var tracked = ids
        let mailbox = MailboxApplier(session: session) { input, error in display.inputError(input, error) }
        // (Ctrl-C may have come while the inputs were expanded, before any task was added.)
        var interrupted = interrupt.fired
        var wakes = wakeups.makeAsyncIterator()
        var lastPoll = ContinuousClock.now - .seconds(1)
        while !tracker.allSettled {
            if interrupt.fired {
                interrupted = true
                break
            }
            if ContinuousClock.now - lastPoll >= .milliseconds(250) || resized.take() {
                lastPoll = .now
                let added = await mailbox.applyWaiting().filter { !tracked.contains($0) }
                if !added.isEmpty {
                    tracked += added
                    tracker.track(added)
                    await seed(tracker, added)
                }
                if display.mode == .live {
                    let infos = tracker.infos(tracked)
                    for info in infos { clock.observe(info) }
                    let trackedSet = Set(tracked)
                    let groups = await session.manager.checkAllGroups().filter { group in group.children.contains { trackedSet.contains($0.id) } }
                    display.redraw(tasks: infos, groups: groups)
                }
            }
            guard await wakes.next() != nil else { break }
        }
        // From here to the shutdown (a Ctrl-C's pauses, the merges: minutes, for a long video)
        // this run starts nothing more: a command sent meanwhile is answered so, and its sender
        // waits for this process to end and does it itself.
        let finishing = Task { await MailboxApplier(session: session, deferring: true).serve() }
        defer { finishing.cancel() }
        if interrupted {
            // A live recording ends (its file is complete and playable, merged like any other);
            // every other task pauses, to continue next time.
            let ended = Set(session.manager.endAllRecordings())
            if !ended.isEmpty {
                display.permanent("Interrupted: ending the recording of \(Display.count(ended.count, "live stream")); what was recorded is kept, playable.")
            }
            var paused = false
            for info in await session.manager.checkAll() where !ended.contains(info.id) {
                guard [.idle, .waiting, .resolving, .downloading, .interrupted].contains(info.state.kind) else { continue }
                if !paused { display.permanent("Interrupted: pausing; run the same command again to continue.") }
                paused = true
                await session.manager.stop(info.id)
            }
            // Ctrl-C that only ended recordings ends the run as their end would have.
            interrupted = paused || ended.isEmpty
            // Each run stops its transfers and keeps what it has (a recording finishes its
            // files); the summary waits for that (a second Ctrl-C exits at once).
            let deadline = ContinuousClock.now + .seconds(10)
            while !tracker.allSettled, ContinuousClock.now < deadline, await wakes.next() != nil {}
        }
        if !interrupted {
            // The merges of the tasks that completed (each began as its task completed) end
            // before the summary; Ctrl-C stops them (the shutdown stops ffmpeg).
            let manager = session.manager
            if interrupt.fired {
                // Ctrl-C that only ended recordings: their merges finish (a second Ctrl-C
                // exits at once).
                await manager.finishMerging()
            } else {
                _ = try? await interrupt.unlessInterrupted({ await manager.finishMerging() })
                interrupted = interrupt.fired
            }
        }
        ticker.cancel()
        await session.manager.shutdown()
        finishing.cancel()
        await finishing.value
        await eventTask.value
        merges.warnAboutSkipped()
        // The end state, asked a thousand tasks at a time; with -q (no summary) only what the
        // exit code needs is kept, not a snapshot of each of 100,000 tasks.
        let keepsTasks = display.mode == .json || display.mode != .quiet && tracked.count <= Self.keptTasksLimit
        var infos: [DownloadTaskInfo] = []
        var found = 0
        var failed = merges.anyFailed
        // Paused (from another shell) or still waiting: not done, not failed (aria2c's 7).
        var unfinished = false
        var times: [DownloadTaskID: Duration] = [:]
        for start in stride(from: 0, to: tracked.count, by: 1_000) {
            let chunk = Array(tracked[start..<min(start + 1_000, tracked.count)])
            let states: [DownloadTaskState]
            if keepsTasks {
                let part = await snapshot(chunk)
                states = part.map(\.state)
                for info in part { clock.observe(info) }
                times.merge(clock.times(for: part.map(\.id))) { first, _ in first }
                infos += part
            } else {
                // (Without a summary, the states are all the exit code needs: no snapshot of each.)
                states = await session.manager.states(chunk).map(\.state)
            }
            found += states.count
            for state in states {
                if state == .failed || state == .invalid { failed = true }
                if state != .completed { unfinished = true }
            }
        }
        let code: Int32 =
            if interrupted { 130 }
            else if failed || inputErrors > 0 || found < tracked.count { 1 }
            else if unfinished { 7 }
            else { 0 }
        return Outcome(exitCode: code, tasks: infos, ids: tracked, interrupted: interrupted, times: times, merges: merges.outcomes)
    }

    /// The latest state of each tracked task, from the events (and a first snapshot): the run
    /// ends when every one is settled (finished, paused or idle) without asking the manager.
    final class RunTracker: Sendable {
        private struct State {
            var latest: [DownloadTaskID: DownloadTaskInfo] = [:]
            /// What is known of each task, in one table (a run of 100,000 tasks keeps one).
            var marks: [DownloadTaskID: Mark] = [:]
            /// Tracked tasks not settled (kept as changes come, so the end is known at once).
            var unsettled = 0
        }

        /// Whether a task is followed by the run, settled, and seen in an event.
        struct Mark: OptionSet {
            let rawValue: UInt8
            static let tracked = Mark(rawValue: 1)
            static let settled = Mark(rawValue: 2)
            static let seen = Mark(rawValue: 4)
        }

        private let state = Locked(State())
        /// Whether every task's latest snapshot is kept (for ``infos(_:)``), not only its state.
        let keepsSnapshots: Bool

        init(keepsSnapshots: Bool = true) {
            self.keepsSnapshots = keepsSnapshots
        }

        static func isSettled(_ state: DownloadTaskState) -> Bool { state.isFinal || state == .paused || state == .idle }

        func track(_ ids: [DownloadTaskID]) {
            state.withLock { state in
                for id in ids where state.marks[id, default: []].insert(.tracked).inserted && !state.marks[id, default: []].contains(.settled) {
                    state.unsettled += 1
                }
            }
        }

        /// Snapshots taken by asking the manager; an event seen since wins over them.
        func seed(_ infos: [DownloadTaskInfo]) {
            state.withLock { state in
                for info in infos where !(state.marks[info.id]?.contains(.seen) ?? false) { Self.update(&state, info, keepingSnapshot: keepsSnapshots) }
            }
        }

        /// States taken by asking the manager (a tracker that keeps no snapshots); an event seen
        /// since wins over them.
        func seed(states: [(id: DownloadTaskID, state: DownloadTaskState)]) {
            state.withLock { state in
                for (id, taskState) in states where !(state.marks[id]?.contains(.seen) ?? false) {
                    Self.setSettled(&state, id, Self.isSettled(taskState))
                }
            }
        }

        /// Notes what the event tells; returns whether the run loop should look again: every
        /// tracked task has just settled (not at each change: a list of thousands wakes it once).
        func record(_ event: DownloadEvent) -> Bool {
            let info: DownloadTaskInfo
            switch event {
            case .taskAdded(let added) where added.state == .idle:
                // Told as it is added, before it is started: not a task that settled idle.
                if keepsSnapshots { state.withLock { state in if state.latest[added.id] == nil { state.latest[added.id] = added } } }
                return false
            case .taskProgress where !keepsSnapshots: return false
            case .taskAdded(let added), .taskStateChanged(let added, _), .taskProgress(let added): info = added
            case .taskRemoved(let id):
                return state.withLock { state in
                    state.latest[id] = nil
                    let wasUnsettled = state.unsettled
                    Self.setSettled(&state, id, true, seen: true)
                    return state.unsettled == 0 && wasUnsettled > 0
                }
            default: return false
            }
            return state.withLock { state in
                let wasUnsettled = state.unsettled
                Self.update(&state, info, keepingSnapshot: keepsSnapshots, seen: true)
                return state.unsettled == 0 && wasUnsettled > 0
            }
        }

        private static func update(_ state: inout State, _ info: DownloadTaskInfo, keepingSnapshot: Bool, seen: Bool = false) {
            if keepingSnapshot { state.latest[info.id] = info }
            setSettled(&state, info.id, isSettled(info.state), seen: seen)
        }

        /// Marks the task settled or not (and seen in an event), with one lookup of its mark for
        /// every event of the run.
        private static func setSettled(_ state: inout State, _ id: DownloadTaskID, _ settled: Bool, seen: Bool = false) {
            state.unsettled += change(&state.marks[id, default: []], settled: settled, seen: seen)
        }

        /// What marking a task settled or not changes in the count of unsettled tracked tasks.
        private static func change(_ mark: inout Mark, settled: Bool, seen: Bool) -> Int {
            if seen { mark.insert(.seen) }
            let changed = settled ? mark.insert(.settled).inserted : mark.remove(.settled) != nil
            guard changed, mark.contains(.tracked) else { return 0 }
            return settled ? -1 : 1
        }

        /// Whether every tracked task is settled.
        var allSettled: Bool { state.withLock { $0.unsettled == 0 } }

        func infos(_ ids: [DownloadTaskID]) -> [DownloadTaskInfo] {
            state.withLock { state in ids.compactMap { state.latest[$0] } }
        }
    }

    /// The tracked tasks' snapshots, in their order.
    private func snapshot(_ tracked: [DownloadTaskID]) async -> [DownloadTaskInfo] {
        await session.manager.check(tracked)
    }

    /// Tells the tracker where `ids` stand now: their snapshots when it keeps them (the live
    /// board), else their states only.
    private func seed(_ tracker: RunTracker, _ ids: [DownloadTaskID]) async {
        if tracker.keepsSnapshots {
            tracker.seed(await snapshot(ids))
        } else {
            tracker.seed(states: await session.manager.states(ids))
        }
    }

    /// When each task started downloading and when it finished, from the events.
    final class TaskClock: Sendable {
        private let marks = Locked<[DownloadTaskID: (start: ContinuousClock.Instant, end: ContinuousClock.Instant?)]>([:])

        func record(_ event: DownloadEvent) {
            guard case .taskStateChanged(let info, _) = event else { return }
            observe(info)
        }

        /// Notes a task's state as seen now (from an event or a poll; the earliest sighting wins,
        /// because either may lag behind the other).
        func observe(_ info: DownloadTaskInfo) {
            let now = ContinuousClock.now
            marks.withLock { marks in
                if info.state == .downloading || info.state == .resolving {
                    // A task resumed after it ended counts from its latest start.
                    if marks[info.id] == nil || marks[info.id]?.end != nil && info.state == .downloading { marks[info.id] = (now, nil) }
                } else if info.state.isFinal || info.state == .paused, let mark = marks[info.id], mark.end == nil {
                    marks[info.id] = (mark.start, now)
                }
            }
        }

        func times(for ids: [DownloadTaskID]) -> [DownloadTaskID: Duration] {
            let now = ContinuousClock.now
            return marks.withLock { marks in
                var times: [DownloadTaskID: Duration] = [:]
                for id in ids { if let mark = marks[id] { times[id] = (mark.end ?? now) - mark.start } }
                return times
            }
        }
    }

    /// The summary: one line per task (and its files), as text and as the last JSON line.
    /// Up to how many tasks a run keeps every end state for its summary (10,000;
    /// `TESSERA_TEST_KEPT_TASKS` sets it for the tests of the longer lists' summary).
    static let keptTasksLimit = ProcessInfo.processInfo.environment["TESSERA_TEST_KEPT_TASKS"].flatMap(Int.init) ?? 10_000

    package func summarize(_ outcome: Outcome) async {
        // (-q prints no summary: nothing to build, no file to look at.)
        guard display.mode != .quiet else { return }
        let merges = outcome.merges
        // (Each mode builds only what it prints: a list of 100,000 tasks is one or the other.)
        let json = display.mode == .json
        var tasks: [[String: Any]] = []
        var lines = [""]
        var count = 0, completed = 0
        // The tasks as the run kept them, or (a longer list) a thousand at a time.
        let kept = outcome.tasks.count == outcome.ids.count
        for start in stride(from: 0, to: outcome.ids.count, by: 1_000) {
            let chunk = Array(outcome.ids[start..<min(start + 1_000, outcome.ids.count)])
            let part = kept ? Array(outcome.tasks[start..<start + chunk.count]) : await snapshot(chunk)
            count += part.count
            completed += part.lazy.filter { $0.state == .completed }.count
            for info in part {
                let merged = merges[info.id]?.result
                if json {
                    tasks.append(jsonObject(info, merged: merged, seconds: outcome.times[info.id]))
                    continue
                }
                let mark = info.state == .completed ? "✓" : (info.state == .paused ? "‖" : "✗")
                var line = "\(mark) \(info.state.description.padding(toLength: 11, withPad: " ", startingAt: 0)) \(ByteCount.format(info.bytesDone).padding(toLength: 11, withPad: " ", startingAt: 0)) \(info.title)"
                if info.state != .completed, let error = info.error { line += " — \(error.message)" }
                if let live = info.live, info.state == .completed { line += " — " + Display.liveSummary(live) }
                lines.append(line)
                if let merged {
                    // The parts are gone: the merged file stands for them (and any output not merged).
                    for output in info.outputs where !merged.removedInputs.contains(output.path) && output.path != merged.path {
                        lines.append("    → \(output.path)")
                    }
                    lines.append("    → \(merged.path) (merged)")
                } else if info.state == .completed {
                    for output in info.outputs { lines.append("    → \(output.path)") }
                }
            }
            // Printed as it is built, a thousand tasks at a time (a list of 100,000 tasks is
            // never one string).
            if !json, lines.count >= 1_000 {
                display.permanent(lines.joined(separator: "\n"))
                lines.removeAll(keepingCapacity: true)
            }
        }
        if count == 0 {
            lines.append("Nothing was downloaded" + (outcome.interrupted ? " (interrupted)." : "."))
        } else {
            lines.append("\(completed) of \(count) completed" + (outcome.interrupted ? " (interrupted)" : ""))
        }
        display.summary(
            ["type": "summary", "exitCode": Int(outcome.exitCode), "interrupted": outcome.interrupted, "tasks": tasks],
            text: lines.joined(separator: "\n"))
    }

    /// A task's object in the `--json` summary.
    private func jsonObject(_ info: DownloadTaskInfo, merged: MergeResult?, seconds time: Duration?) -> [String: Any] {
        var object: [String: Any] = [
            "id": info.id.description, "title": info.title, "state": info.state.description, "bytes": info.bytesDone,
            "outputs": info.outputs.map { output -> [String: Any] in
                ["name": output.name, "path": output.path, "size": FileSize.of(output.path) ?? 0, "complete": output.isComplete]
            },
        ]
        if let error = info.error, info.state != .completed { object["error"] = JSONEvent.error(error) }
        if let time { object["seconds"] = Double(time.components.seconds) + Double(time.components.attoseconds) / 1e18 }
        if let live = info.live { object["live"] = JSONEvent.live(live) }
        if let merged { object["merged"] = ["path": merged.path, "size": merged.size] }
        return object
    }
}

/// Ctrl-C, SIGTERM and SIGHUP, noticed by the run loop instead of killing the process.
package final class InterruptSignal: Sendable {
    package static let shared = InterruptSignal()
    private let flag = Atomic(false)
    private let installed = Atomic(false)

    private let listeners = Locked<[AsyncStream<Void>.Continuation]>([])

    package var fired: Bool { flag.load(ordering: .relaxed) }

    /// `listener` is told when Ctrl-C (or SIGTERM) arrives.
    func notify(_ listener: AsyncStream<Void>.Continuation) {
        listeners.withLock { $0.append(listener) }
        if fired { listener.yield() }
    }

    /// `body`'s value, or `nil` when Ctrl-C (or SIGTERM) arrives first: `body` is then
    /// cancelled (a fetch in flight stops at once).
    func unlessInterrupted<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T? {
        guard !fired else { return nil }
        let (signals, listener) = AsyncStream.makeStream(of: Void.self)
        notify(listener)
        let work = Task { try await body() }
        let watcher = Task {
            for await _ in signals {
                work.cancel()
                return
            }
        }
        defer {
            watcher.cancel()
            listener.finish()
        }
        do {
            return try await work.value
        } catch {
            if fired { return nil }
            throw error
        }
    }

    package func install() {
        guard !installed.exchange(true, ordering: .relaxed) else { return }
        // SIGHUP (the terminal closed) too: ffmpeg, in a process group of its own, would not
        // hear of it, and this process would die without stopping it.
        for number in [SIGINT, SIGTERM, SIGHUP] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in
                if flag.exchange(true, ordering: .relaxed) {
                    // A second Ctrl-C: stop at once (the store is consistent anyway).
                    exit(130)
                }
                for listener in listeners.withLock({ $0 }) { listener.yield() }
            }
            source.resume()
            Self.sources.append(source)
        }
    }

    /// Kept alive for the life of the process; written once, under `installed`.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []
}

enum FileSize {
    static func of(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }
}

/// SIGWINCH, for the live board: `take()` says whether the terminal was resized since the last
/// call, and each resize wakes the run loop. (The dispatch source is only cancelled.)
final class ResizeSignal: @unchecked Sendable {
    private final class Flag: Sendable {
        let value = Atomic<Bool>(false)
    }

    private let flag = Flag()
    private let source: (any DispatchSourceSignal)?

    init(enabled: Bool, wake: AsyncStream<Void>.Continuation) {
        guard enabled else {
            source = nil
            return
        }
        let flag = self.flag
        let source = DispatchSource.makeSignalSource(signal: SIGWINCH, queue: .global())
        source.setEventHandler {
            flag.value.store(true, ordering: .relaxed)
            wake.yield()
        }
        source.resume()
        self.source = source
    }

    func take() -> Bool { flag.value.exchange(false, ordering: .relaxed) }

    func cancel() { source?.cancel() }
}
