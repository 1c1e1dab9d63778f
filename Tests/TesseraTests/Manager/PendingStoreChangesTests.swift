import Foundation
import Testing
@testable import Tessera

/// What the manager has not written yet, batched without a store.
@Suite struct PendingStoreChangesTests {
    let id = DownloadTaskID(entityType: "fixture", entityKey: "1")
    let other = DownloadTaskID(entityType: "fixture", entityKey: "2")

    func record(_ id: DownloadTaskID, bytes: Int64) -> TaskRecord {
        TaskRecord(
            id: id, state: .downloading, mode: .download, weight: 0, sequence: 1, resolveCount: 0, lastError: nil, manifest: nil,
            manifestRevision: 0, addedAt: Date(timeIntervalSince1970: 0), bytesDone: bytes, segmentsDone: 0, bytesTotal: nil)
    }

    @Test func updatesOfATaskMergeIntoItsLastChange() {
        var pending = PendingStoreChanges()
        pending.add(.update(record(id, bytes: 1)))
        pending.add(.update(record(other, bytes: 1)))
        pending.add(.update(record(id, bytes: 2)))
        #expect(pending.take() == [.update(record(id, bytes: 2)), .update(record(other, bytes: 1))])
        #expect(pending.isEmpty)
    }

    @Test func aRemoveThenAnUpdateStayTwoChangesInOrder() {
        var pending = PendingStoreChanges()
        pending.add(.update(record(id, bytes: 1)))
        pending.add(.remove(id))
        pending.add(.update(record(id, bytes: 3)))
        #expect(pending.take() == [.update(record(id, bytes: 1)), .remove(id), .update(record(id, bytes: 3))])
    }
}
