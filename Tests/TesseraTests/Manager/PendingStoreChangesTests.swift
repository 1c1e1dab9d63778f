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
        pending.add(.update(record(id, bytes: 1)), handle: TaskHandle(1))
        pending.add(.update(record(other, bytes: 1)), handle: TaskHandle(2))
        pending.add(.update(record(id, bytes: 2)), handle: TaskHandle(1))
        #expect(pending.take() == [.update(record(id, bytes: 2)), .update(record(other, bytes: 1))])
        #expect(pending.isEmpty)
    }

    @Test func aRemoveThenAnUpdateStayTwoChangesInOrder() {
        var pending = PendingStoreChanges()
        pending.add(.update(record(id, bytes: 1)), handle: TaskHandle(1))
        pending.add(.remove(id), handle: TaskHandle(1))
        pending.add(.update(record(id, bytes: 3)), handle: TaskHandle(1))
        #expect(pending.take() == [.update(record(id, bytes: 1)), .remove(id), .update(record(id, bytes: 3))])
    }

    @Test func aTaskAddedAgainAfterARemoveKeepsItsChangesApartFromTheOldOnes() {
        // The same identity, a new handle: its insert follows the remove and takes its updates.
        var pending = PendingStoreChanges()
        let entity = EntityRecord(
            entityType: "fixture", entityKey: "1", variantKey: "", title: "1", aggregationKey: nil, groupType: "DownloadTaskGroup",
            destinationDirectory: "", payload: Data())
        pending.add(.update(record(id, bytes: 1)), handle: TaskHandle(1))
        pending.add(.remove(id), handle: TaskHandle(1))
        pending.add(.insert(StoredTask(entity: entity, task: record(id, bytes: 0))), handle: TaskHandle(2))
        pending.add(.update(record(id, bytes: 5)), handle: TaskHandle(2))
        #expect(pending.take() == [
            .update(record(id, bytes: 1)), .remove(id), .insert(StoredTask(entity: entity, task: record(id, bytes: 5))),
        ])
        // The next batch starts empty, whatever room it was given.
        pending.add(.update(record(other, bytes: 1)), handle: TaskHandle(3))
        #expect(pending.take() == [.update(record(other, bytes: 1))])
    }
}

/// Tasks whose record changed are read once, when the batch is taken.
@Suite struct PendingStoreChangesTouchTests {
    let first = DownloadTaskID(entityType: "fixture", entityKey: "1")
    let second = DownloadTaskID(entityType: "fixture", entityKey: "2")

    func record(_ id: DownloadTaskID, state: DownloadTaskState) -> TaskRecord {
        TaskRecord(
            id: id, state: state, mode: .download, weight: 0, sequence: 1, resolveCount: 0, lastError: nil, manifest: nil,
            manifestRevision: 0, addedAt: Date(timeIntervalSince1970: 0), bytesDone: 0, segmentsDone: 0, bytesTotal: nil)
    }

    @Test func aTaskTouchedManyTimesIsReadOnceInTheOrderItWasFirstTouched() {
        var pending = PendingStoreChanges()
        let a = TaskHandle(1), b = TaskHandle(2)
        pending.touch(a)
        pending.touch(b)
        pending.touch(a)
        pending.touch(a)
        #expect(!pending.isEmpty)
        var reads: [TaskHandle] = []
        let batch = pending.take { handle in
            reads.append(handle)
            return record(handle == a ? first : second, state: .completed)
        }
        #expect(reads == [a, b])
        #expect(batch == [.update(record(first, state: .completed)), .update(record(second, state: .completed))])
        #expect(pending.isEmpty)
        #expect(pending.take { _ in Issue.record("nothing is touched any more"); return nil } == [])
    }

    @Test func aTouchedTaskJoinsItsPendingInsertAndOneWithoutARecordIsLeftOut() {
        var pending = PendingStoreChanges()
        let entity = EntityRecord(
            entityType: "fixture", entityKey: "1", variantKey: "", title: "1", aggregationKey: nil, groupType: "DownloadTaskGroup",
            destinationDirectory: "", payload: Data())
        pending.add(.insert(StoredTask(entity: entity, task: record(first, state: .idle))), handle: TaskHandle(1))
        pending.touch(TaskHandle(1))
        pending.touch(TaskHandle(2))
        let batch = pending.take { handle in handle == TaskHandle(1) ? record(first, state: .downloading) : nil }
        #expect(batch == [.insert(StoredTask(entity: entity, task: record(first, state: .downloading)))])
    }
}
