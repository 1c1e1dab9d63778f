import Synchronization

/// Identifies a segment within a task.
struct SegmentKey: Hashable, Sendable, Comparable {
    var output: Int
    var segment: Int

    static func < (lhs: SegmentKey, rhs: SegmentKey) -> Bool {
        (lhs.output, lhs.segment) < (rhs.output, rhs.segment)
    }
}

/// A task's bytes, updated from the engine thread by progress callbacks and read by the
/// manager's ticker: the finished segments' bytes plus each in-flight segment's checkpoint.
final class ProgressCounter: Sendable {
    private struct State {
        var doneBytes: Int64 = 0
        var doneSegments = 0
        var inFlight: [SegmentKey: TransferCheckpoint] = [:]
    }

    private let state = Mutex(State())

    /// Bytes done, counting in-flight ones.
    var bytes: Int64 {
        state.withLock { state in state.inFlight.values.reduce(state.doneBytes) { $0 + $1.bytesWritten } }
    }

    var doneSegments: Int { state.withLock { $0.doneSegments } }

    /// The in-flight segments' checkpoints, for the store.
    var inFlight: [SegmentKey: TransferCheckpoint] { state.withLock { $0.inFlight } }

    func reset(doneBytes: Int64, doneSegments: Int) {
        state.withLock { state in
            state.doneBytes = doneBytes
            state.doneSegments = doneSegments
            state.inFlight.removeAll()
        }
    }

    func update(_ key: SegmentKey, _ checkpoint: TransferCheckpoint) {
        state.withLock { $0.inFlight[key] = checkpoint }
    }

    func finish(_ key: SegmentKey, bytes: Int64) {
        state.withLock { state in
            state.inFlight[key] = nil
            state.doneBytes += bytes
            state.doneSegments += 1
        }
    }

    func abandon(_ key: SegmentKey) {
        _ = state.withLock { $0.inFlight.removeValue(forKey: key) }
    }
}
