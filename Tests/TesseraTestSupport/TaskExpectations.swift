import Tessera
import Testing

/// Records an issue, unless every task of `ids` has a final snapshot in `snapshots` (what a wait
/// for them to end returned: `PluginHarness.finalSnapshots(of:timeout:)` of `TesseraTesting`).
/// Returns whether they all do.
@discardableResult
public func expectFinal(
    _ snapshots: [DownloadTaskID: DownloadTaskInfo], of ids: [DownloadTaskID], sourceLocation: SourceLocation = #_sourceLocation
) -> Bool {
    let unfinished = ids.filter { snapshots[$0]?.state.isFinal != true }
    guard !unfinished.isEmpty else { return true }
    let states = unfinished.map { id in
        snapshots[id].map { "\($0.title)=\($0.state) (error \(String(describing: $0.error)))" } ?? "\(id)=unknown"
    }
    Issue.record("timed out waiting for the tasks to end; last states: \(states.joined(separator: ", "))", sourceLocation: sourceLocation)
    return false
}
