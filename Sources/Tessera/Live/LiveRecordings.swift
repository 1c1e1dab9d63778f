/// The live recordings running in a manager, so that one can be ended on request (its run is
/// the manager's; ending it is not cancelling it: the recording finishes its outputs).
final class LiveRecordings: Sendable {
    private let ends = Locked<[DownloadTaskID: AsyncStream<Void>.Continuation]>([:])

    /// A recording of task `id` begins: the stream yields when it is asked to end.
    func register(_ id: DownloadTaskID) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        ends.withLock { ends in
            ends[id]?.finish()
            ends[id] = continuation
        }
        return stream
    }

    /// The recording of task `id` is over.
    func unregister(_ id: DownloadTaskID) {
        ends.withLock { $0.removeValue(forKey: id) }?.finish()
    }

    /// Asks the recording of task `id` to end; whether one was running.
    func end(_ id: DownloadTaskID) -> Bool {
        guard let continuation = ends.withLock({ $0[id] }) else { return false }
        continuation.yield()
        return true
    }

    /// The tasks recording now.
    var recording: [DownloadTaskID] { ends.withLock { Array($0.keys) } }
}

extension DownloadTaskManager {
    /// Ends the recording of a live task now: what was recorded becomes its outputs (moved into
    /// place, playable) and the task completes, as when the stream ends by itself. Returns
    /// whether the task was recording. (``stop(_:)`` pauses a live task instead: it keeps its
    /// files, and ``resume(_:)`` continues the recording at the first segment the stream still
    /// offers after the last one recorded, recording the gap in between.)
    @discardableResult
    public nonisolated func endRecording(_ id: DownloadTaskID) -> Bool {
        liveRecordings.end(id)
    }

    /// Ends every recording running now (see ``endRecording(_:)``); returns their tasks.
    @discardableResult
    public nonisolated func endAllRecordings() -> [DownloadTaskID] {
        liveRecordings.recording.filter { liveRecordings.end($0) }
    }
}
