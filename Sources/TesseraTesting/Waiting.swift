import Foundation
import Tessera

// How tests wait for what happens asynchronously: they poll an observable condition with a
// deadline instead of sleeping a fixed time and hoping it was long enough. A fixed wait is only
// right for showing that something does *not* happen, and then ``consistently(for:every:_:)``
// says so.

/// Whether `condition` holds, checking it every `interval` for at most `timeout`: the way tests
/// wait for something that happens asynchronously, instead of sleeping and hoping.
///
/// Returns as soon as the condition holds; after `timeout` (or when the task is cancelled, say
/// by a `.timeLimit`) it checks once more and returns that answer. The default limit is generous
/// (30 s): a condition that holds costs only the time it takes, and a test process that starts
/// a thousand tests on two cores can take seconds to give any one of them its first turn.
public func eventually(
    within timeout: Duration = .seconds(30), every interval: Duration = .milliseconds(10),
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline, !Task.isCancelled {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}

/// Whether `condition` holds throughout `duration`, checked every `interval`; `false` as soon as
/// it does not.
///
/// For showing that something does *not* happen (no request goes out, a paused task stays
/// paused, no extra value arrives): absence can only be observed by watching for a while, so
/// keep `duration` short and say at the call what the wait rules out. Anything that does happen
/// is awaited with ``eventually(within:every:_:)`` instead.
public func consistently(
    for duration: Duration, every interval: Duration = .milliseconds(10), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let end = ContinuousClock.now + duration
    while ContinuousClock.now < end, !Task.isCancelled {
        guard try await condition() else { return false }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}

/// The value `read` comes to rest at: once it has not changed for `quiet` (read every
/// `interval`), that value; `nil` when it is still changing after `timeout`.
///
/// For counters that grow until something pushes back (bytes an origin writes into a socket
/// nobody reads).
public func settledValue<Value: Equatable>(
    within timeout: Duration = .seconds(30), quiet: Duration = .milliseconds(100), every interval: Duration = .milliseconds(10),
    _ read: () async throws -> Value
) async rethrows -> Value? {
    let deadline = ContinuousClock.now + timeout
    var value = try await read()
    var unchangedSince = ContinuousClock.now
    while ContinuousClock.now - unchangedSince < quiet {
        guard ContinuousClock.now < deadline, !Task.isCancelled else { return nil }
        try? await Task.sleep(for: interval)
        let next = try await read()
        if next != value {
            value = next
            unchangedSince = ContinuousClock.now
        }
    }
    return value
}

extension DownloadTaskManager {
    /// Polls the snapshot of task `id` every 10 ms until `condition` holds for it or `timeout`
    /// passes; returns the last snapshot (`nil` when the manager does not know the task).
    ///
    /// After a timeout the condition does not hold for what is returned: a test checks it again
    /// (or uses ``waitForState(_:_:timeout:)`` and compares the state).
    public nonisolated func waitFor(
        _ id: DownloadTaskID, timeout: Duration = .seconds(30), _ condition: (DownloadTaskInfo) -> Bool
    ) async -> DownloadTaskInfo? {
        var last: DownloadTaskInfo?
        _ = await eventually(within: timeout) {
            last = await check(id)
            return last.map(condition) ?? false
        }
        return last
    }

    /// Polls task `id` until it is in `state` or `timeout` passes; the last snapshot (its state
    /// is another after a timeout): `#expect(await manager.waitForState(id, .completed)?.state == .completed)`.
    public nonisolated func waitForState(
        _ id: DownloadTaskID, _ state: DownloadTaskState, timeout: Duration = .seconds(30)
    ) async -> DownloadTaskInfo? {
        await waitFor(id, timeout: timeout) { $0.state == state }
    }

    /// Polls the tasks `ids` until every one is final (completed, failed, invalid, removed) or
    /// `timeout` passes; the last snapshots (after a timeout some are not final, and a task the
    /// manager does not know has none).
    public nonisolated func waitForFinal(
        _ ids: [DownloadTaskID], timeout: Duration = .seconds(60)
    ) async -> [DownloadTaskID: DownloadTaskInfo] {
        var snapshots: [DownloadTaskID: DownloadTaskInfo] = [:]
        _ = await eventually(within: timeout) {
            for id in ids { snapshots[id] = await check(id) }
            return snapshots.count == ids.count && snapshots.values.allSatisfy(\.state.isFinal)
        }
        return snapshots
    }
}
