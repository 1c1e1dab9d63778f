import Foundation
import Testing
import TesseraTesting
@testable import Tessera

/// The stores every conformance test runs against.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case inMemory
    case sqlite

    var testDescription: String { rawValue }
}

/// A store under test, and a way to open it again (a new ``SQLiteDownloadStore`` on the same
/// file; the same instance for the in-memory store, which has nothing to reopen).
final class StoreUnderTest {
    let kind: StoreKind
    private(set) var store: any DownloadStore
    let directory: TemporaryDirectory?

    init(_ kind: StoreKind) throws {
        self.kind = kind
        switch kind {
        case .inMemory:
            directory = nil
            store = InMemoryDownloadStore()
        case .sqlite:
            let directory = TemporaryDirectory("tessera-store")
            self.directory = directory
            store = try SQLiteDownloadStore(path: directory.file("state/tessera.sqlite"))
        }
    }

    /// A second store over the same state, while the first stays open.
    func reopened() throws -> any DownloadStore {
        switch kind {
        case .inMemory: return store
        case .sqlite: return try SQLiteDownloadStore(path: directory!.file("state/tessera.sqlite"))
        }
    }

    /// Lets go of the store and opens the state again (a restart). Returns whether the old
    /// store object was really released.
    func dropAndReopen() throws -> Bool {
        guard kind == .sqlite else { return true }
        weak let old = store as? SQLiteDownloadStore
        store = InMemoryDownloadStore()
        let released = old == nil
        store = try SQLiteDownloadStore(path: directory!.file("state/tessera.sqlite"))
        return released
    }

    /// Loads everything, and checks that a reopened store loads the same.
    func loadAll(sourceLocation: SourceLocation = #_sourceLocation) async throws -> [StoredTask] {
        let loaded = try await store.loadAll()
        let again = try await reopened().loadAll()
        #expect(again == loaded, "a reopened store loads something else", sourceLocation: sourceLocation)
        return loaded
    }

    func cleanUp() { directory?.cleanUp() }
}

func withStore(_ kind: StoreKind, _ body: (StoreUnderTest) async throws -> Void) async throws {
    let subject = try StoreUnderTest(kind)
    defer { subject.cleanUp() }
    try await body(subject)
}

/// Builders for stored values.
enum StoreSamples {
    static func id(_ key: String, variant: String = "") -> DownloadTaskID {
        DownloadTaskID(entityType: "fixture", entityKey: key, variantKey: variant)
    }

    static func entity(_ id: DownloadTaskID, title: String? = nil, aggregationKey: String? = nil) -> EntityRecord {
        EntityRecord(
            entityType: id.entityType, entityKey: id.entityKey, variantKey: id.variantKey, title: title ?? "Title of \(id)",
            aggregationKey: aggregationKey, groupType: "plain", destinationDirectory: "/downloads/\(id.entityKey)",
            payload: Data(#"{"key":"\#(id.entityKey)"}"#.utf8))
    }

    static func record(
        _ id: DownloadTaskID, state: DownloadTaskState = .idle, mode: DownloadTaskMode = .download, weight: Int = 0,
        sequence: Int = 1, manifest: DownloadManifest? = nil, manifestRevision: Int = 0, bytesDone: Int64 = 0,
        segmentsDone: Int = 0
    ) -> TaskRecord {
        TaskRecord(
            id: id, state: state, mode: mode, weight: weight, sequence: sequence, manifest: manifest,
            manifestRevision: manifestRevision, addedAt: Date(timeIntervalSinceReferenceDate: 700_000_000.125),
            bytesDone: bytesDone, segmentsDone: segmentsDone)
    }

    static func task(_ id: DownloadTaskID, sequence: Int = 1, bytesDone: Int64 = 0, segmentsDone: Int = 0) -> StoredTask {
        StoredTask(entity: entity(id), task: record(id, sequence: sequence, bytesDone: bytesDone, segmentsDone: segmentsDone))
    }

    /// A task whose entity is another task's: every store must refuse to insert it.
    static func mismatched(_ key: String = "task") -> StoredTask {
        StoredTask(entity: entity(id("entity-of-\(key)")), task: record(id(key)))
    }

    /// A manifest that uses every field: several outputs of each assembly, ranges, checksums,
    /// headers, encryption, media, metadata, an expiry and a source URL.
    static func richManifest(title: String = "Große Reise — 旅行 #1") throws -> DownloadManifest {
        let sha256 = try Checksum(.sha256, hex: String(repeating: "ab", count: 32))
        let md5 = try Checksum(.md5, hex: String(repeating: "0f", count: 16))
        let video = DownloadOutput(
            name: "video/track.mp4",
            assembly: .concatenated,
            segments: [
                DownloadSegment(
                    urls: [URL(string: "https://cdn.example.com/v/1.m4s?sig=a%20b&x=1")!, URL(string: "https://mirror.example.org/v/1.m4s")!],
                    range: ByteRange(offset: 0, length: 1000), expectedSize: 1000, checksum: md5,
                    headers: ["Referer": "https://example.com/watch?v=1", "X-Token": "t#ü"]),
                DownloadSegment(
                    urls: [URL(string: "https://cdn.example.com/v/2.m4s")!], range: ByteRange(offset: 1000),
                    encryption: SegmentEncryption(method: .aes128, keyURL: URL(string: "https://keys.example.com/k1")!, iv: Array(0..<16))),
            ],
            expectedSize: 5000, checksum: sha256, isSelected: true,
            media: MediaInfo(kind: .video, identifier: "v1080", bandwidth: 4_000_000, width: 1920, height: 1080, codecs: "avc1.640028", language: nil, quality: "1080p"))
        let pieces = DownloadOutput(
            name: "data/file.iso",
            assembly: .pieces,
            segments: (0..<3).map { index in
                DownloadSegment(
                    urls: [URL(string: "https://example.com/file.iso")!], range: ByteRange(offset: Int64(index) * 4096, length: 4096),
                    expectedSize: 4096, checksum: sha256, offset: Int64(index) * 4096)
            },
            expectedSize: 12288, checksum: nil, isSelected: false, media: MediaInfo(kind: .other))
        let subtitles = DownloadOutput(
            name: "subs",
            assembly: .separateFiles,
            segments: [DownloadSegment(url: URL(string: "https://example.com/s/1.vtt")!)].map { segment in
                var named = segment
                named.name = "字幕 1.vtt"
                return named
            },
            media: MediaInfo(kind: .subtitles, language: "zh-Hans"))
        return DownloadManifest(
            title: title, outputs: [video, pieces, subtitles],
            expiresAt: Date(timeIntervalSinceReferenceDate: 800_000_000.5), sourceURL: URL(string: "https://example.com/manifest.mpd"),
            metadata: ["duration": "PT1H2M", "emoji": "🎬", "hash#key": "value"])
    }

    /// A task that uses every field.
    static func richTask(_ id: DownloadTaskID, sequence: Int = 7) throws -> StoredTask {
        let entity = EntityRecord(
            entityType: id.entityType, entityKey: id.entityKey, variantKey: id.variantKey, title: "Ünïcødé title 🎞️ #tag",
            aggregationKey: "season-1#group", groupType: "series", destinationDirectory: "/downloads/ünï côdé/#dir",
            payload: Data(#"{"cid":1001,"name":"名前","bytes":[0,255]}"#.utf8))
        let error = StoredError(DownloadError(.httpStatus, "the server answered 503 “Service Unavailable”", url: "https://cdn.example.com/v/1.m4s", httpStatus: 503))
        let record = TaskRecord(
            id: id, state: .interrupted(.diskSpace), mode: .cacheOnly, weight: -42, sequence: sequence, resolveCount: 3,
            lastError: error, manifest: try richManifest(), manifestRevision: 5,
            addedAt: Date(timeIntervalSinceReferenceDate: 765_432_109.987654), bytesDone: 5_000_000_123, segmentsDone: 17,
            bytesTotal: 9_000_000_777)
        return StoredTask(entity: entity, task: record)
    }

    static let allStates: [DownloadTaskState] = [
        .idle, .waiting, .resolving, .downloading, .paused, .interrupted(.network), .interrupted(.diskSpace),
        .interrupted(.meteredNetwork), .completed, .failed, .invalid, .removed,
    ]
}

/// The rules of ``DownloadStore``, checked against every store.
@Suite struct DownloadStoreConformanceTests {
    typealias S = StoreSamples

    // MARK: Round trips

    @Test(arguments: StoreKind.allCases)
    func anEmptyStoreLoadsNothing(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let loaded = try await subject.loadAll()
            #expect(loaded.isEmpty)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aTaskRoundTripsEveryField(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let task = try S.richTask(S.id("cid:1001", variant: "1080p"))
            try await subject.store.apply([.insert(task)])
            #expect(try await subject.loadAll() == [task])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func optionalFieldsRoundTripAsAbsent(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let id = DownloadTaskID(entityType: "t", entityKey: "k")
            let entity = EntityRecord(
                entityType: "t", entityKey: "k", variantKey: "", title: "", aggregationKey: nil, groupType: "",
                destinationDirectory: "", payload: Data())
            let bare = StoredError(DownloadError(.timeout, ""))
            let record = TaskRecord(
                id: id, state: .idle, mode: .download, weight: 0, sequence: 0, resolveCount: 0, lastError: bare,
                manifest: DownloadManifest(outputs: []), manifestRevision: 0, addedAt: Date(timeIntervalSinceReferenceDate: 0))
            var other = S.task(S.id("nothing"))
            other.task.lastError = nil
            other.task.manifest = nil
            try await subject.store.apply([.insert(StoredTask(entity: entity, task: record)), .insert(other)])
            let loaded = try await subject.loadAll()
            #expect(loaded == [StoredTask(entity: entity, task: record), other])
            #expect(loaded.first?.task.lastError?.url == nil)
            #expect(loaded.first?.task.lastError?.httpStatus == nil)
            #expect(loaded.first?.task.manifest?.outputs.isEmpty == true)
            #expect(loaded.last?.task.manifest == nil)
            #expect(loaded.last?.task.lastError == nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func everyStateAndModeRoundTrips(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            var expected: [StoredTask] = []
            for (index, state) in S.allStates.enumerated() {
                for mode in [DownloadTaskMode.download, .cacheOnly] {
                    let id = S.id("state-\(index)-\(mode.rawValue)")
                    let task = StoredTask(entity: S.entity(id), task: S.record(id, state: state, mode: mode, sequence: expected.count))
                    try await subject.store.apply([.insert(task)])
                    expected.append(task)
                }
            }
            #expect(try await subject.loadAll() == expected)
            // And through update as well (all of them in one batch).
            var changes: [StoreChange] = []
            for (index, task) in expected.enumerated() {
                var record = task.task
                record.state = S.allStates[(index + 5) % S.allStates.count]
                record.mode = record.mode == .download ? .cacheOnly : .download
                changes.append(.update(record))
                expected[index].task = record
            }
            try await subject.store.apply(changes)
            #expect(try await subject.loadAll() == expected)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func progressSummariesRoundTripThroughInsertAndUpdate(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let values: [(Int64, Int)] = [(0, 0), (1, 1), (4096, 3), (5_000_000_123, 17), (Int64.max, Int(Int32.max)), (Int64.max - 1, 1_000_000)]
            var expected: [StoredTask] = []
            for (index, (bytes, segments)) in values.enumerated() {
                let task = S.task(S.id("progress-\(index)"), sequence: index, bytesDone: bytes, segmentsDone: segments)
                expected.append(task)
            }
            try await subject.store.apply(expected.map { .insert($0) })
            let loaded = try await subject.loadAll()
            #expect(loaded == expected)
            #expect(loaded.map(\.task.bytesDone) == values.map(\.0))
            #expect(loaded.map(\.task.segmentsDone) == values.map(\.1))

            // Updates change the summary, up and down, and leave the other tasks' summaries alone.
            var record = expected[2].task
            record.bytesDone = 8192
            record.segmentsDone = 4
            try await subject.store.apply([.update(record)])
            expected[2].task = record
            #expect(try await subject.loadAll() == expected)
            record.bytesDone = 0
            record.segmentsDone = 0
            try await subject.store.apply([.update(record)])
            expected[2].task = record
            let reset = try await subject.loadAll()
            #expect(reset == expected)
            #expect(reset[2].task.bytesDone == 0)
            #expect(reset[3].task.bytesDone == 5_000_000_123)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func identitiesWithUnicodeHashesAndColonsStayDistinct(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            // `a:b#c` is the text form of both of the first two; the store must keep them apart.
            let ids = [
                DownloadTaskID(entityType: "a", entityKey: "b#c"),
                DownloadTaskID(entityType: "a", entityKey: "b", variantKey: "c"),
                DownloadTaskID(entityType: "a:x", entityKey: "y"),
                DownloadTaskID(entityType: "a", entityKey: "x:y"),
                DownloadTaskID(entityType: "ビデオ", entityKey: "鍵 #1 🎬", variantKey: "高画質#2"),
                DownloadTaskID(entityType: "url", entityKey: "https://example.com/a?b=c&d=%20#frag", variantKey: "'; DROP TABLE tasks; --"),
            ]
            for (index, id) in ids.enumerated() {
                try await subject.store.apply([.insert(S.task(id, sequence: index, bytesDone: Int64(index) * 100, segmentsDone: index))])
            }
            let loaded = try await subject.loadAll()
            #expect(loaded.map(\.task.id) == ids)
            #expect(loaded.map(\.entity.taskID) == ids)
            #expect(loaded.map(\.task.segmentsDone) == Array(ids.indices))
            // Updating one touches only that one.
            var record = loaded[1].task
            record.state = .paused
            record.bytesDone = 4242
            try await subject.store.apply([.update(record)])
            let updated = try await subject.loadAll()
            #expect(updated.map(\.task.state) == ids.indices.map { $0 == 1 ? .paused : .idle })
            #expect(updated.map(\.task.bytesDone) == ids.indices.map { $0 == 1 ? 4242 : Int64($0) * 100 })
            try await subject.store.apply([.remove(ids[0])])
            #expect(try await subject.loadAll().map(\.task.id) == Array(ids.dropFirst()))
        }
    }

    // MARK: Order

    @Test(arguments: StoreKind.allCases)
    func tasksLoadInInsertionOrderNotBySequenceOrIdentity(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let keys = (0..<40).map { "k\(($0 * 17) % 40)" }
            for (index, key) in keys.enumerated() {
                try await subject.store.apply([.insert(S.task(S.id(key), sequence: 1000 - index))])
            }
            #expect(try await subject.loadAll().map(\.task.id.entityKey) == keys)
            // Removing one and adding a new one puts the new one last; replacing a known one keeps its place.
            try await subject.store.apply([.remove(S.id(keys[3]))])
            try await subject.store.apply([.insert(S.task(S.id("new")))])
            try await subject.store.apply([.insert(S.task(S.id(keys[0]), sequence: 5))])
            let expected = Array(keys[0..<3]) + Array(keys[4...]) + ["new"]
            #expect(try await subject.loadAll().map(\.task.id.entityKey) == expected)
            // A removed task added again is new: it goes last.
            try await subject.store.apply([.insert(S.task(S.id(keys[3])))])
            #expect(try await subject.loadAll().map(\.task.id.entityKey) == expected + [keys[3]])
            // Tasks inserted by one batch load in the batch's order.
            try await subject.store.apply(["z", "b2", "m"].map { .insert(S.task(S.id($0))) })
            #expect(try await subject.loadAll().map(\.task.id.entityKey) == expected + [keys[3], "z", "b2", "m"])
        }
    }

    // MARK: insert

    @Test(arguments: StoreKind.allCases)
    func insertOfAKnownTaskReplacesEntityAndRecordInItsPlace(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let before = S.task(S.id("before")), after = S.task(S.id("after"))
            let id = S.id("replace")
            try await subject.store.apply([.insert(before), .insert(try S.richTask(id)), .insert(after)])
            var replacement = StoredTask(
                entity: S.entity(id, title: "new title", aggregationKey: "group"),
                task: S.record(
                    id, state: .paused, mode: .download, weight: 9, sequence: 99, manifest: try S.richManifest(title: "v2"),
                    manifestRevision: 1, bytesDone: 12, segmentsDone: 1))
            replacement.task.lastError = nil
            try await subject.store.apply([.insert(replacement)])
            let loaded = try await subject.loadAll()
            #expect(loaded == [before, replacement, after])
            // Nothing of the replaced task is kept: not its error, nor its progress summary.
            #expect(loaded[1].task.lastError == nil)
            #expect(loaded[1].task.bytesDone == 12)
            #expect(loaded[1].entity.title == "new title")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func anEntityWhoseIdentityIsNotTheTasksIsRefused(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let error = await #expect(throws: DownloadError.self) { try await subject.store.apply([.insert(S.mismatched())]) }
            #expect(error?.code == .storeFailure)
            #expect(error?.message.contains("fixture:task") == true, "names the task: \(error?.message ?? "")")
            #expect(error?.message.contains("fixture:entity-of-task") == true, "names the entity: \(error?.message ?? "")")
            let loaded = try await subject.loadAll()
            #expect(loaded.isEmpty)
        }
    }

    // MARK: update

    @Test(arguments: StoreKind.allCases)
    func updateReplacesTheRecordAndKeepsTheEntity(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let id = S.id("update")
            let original = try S.richTask(id)
            try await subject.store.apply([.insert(original)])
            var record = original.task
            record.state = .completed
            record.mode = .download
            record.weight = 1_000_000
            record.sequence = 3
            record.resolveCount = 4
            record.lastError = StoredError(DownloadError(.checksumMismatch, "bad bytes", url: "https://x.example/ü"))
            record.manifest = try S.richManifest(title: "second")
            record.manifestRevision = original.task.manifestRevision + 1
            record.addedAt = Date(timeIntervalSinceReferenceDate: 1.5)
            record.bytesDone = 77
            record.segmentsDone = 2
            try await subject.store.apply([.update(record)])
            #expect(try await subject.loadAll() == [StoredTask(entity: original.entity, task: record)])
            // Clearing the error and the manifest (a new revision) is recorded too.
            record.lastError = nil
            record.manifest = nil
            record.manifestRevision += 1
            try await subject.store.apply([.update(record)])
            #expect(try await subject.loadAll() == [StoredTask(entity: original.entity, task: record)])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func updateOfAnUnknownTaskIsIgnored(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let known = S.task(S.id("known"))
            try await subject.store.apply([.insert(known)])
            // Alone, and among other changes, which still apply.
            try await subject.store.apply([.update(S.record(S.id("unknown"), state: .waiting, bytesDone: 9))])
            let other = S.task(S.id("other"))
            var knownRecord = known.task
            knownRecord.state = .downloading
            try await subject.store.apply([
                .update(S.record(S.id("unknown"), state: .failed)), .insert(other), .update(knownRecord),
                .update(S.record(S.id("another unknown"))),
            ])
            #expect(try await subject.loadAll() == [StoredTask(entity: known.entity, task: knownRecord), other])
            // A removed task is unknown too: updating it does not bring it back.
            try await subject.store.apply([.remove(known.task.id)])
            try await subject.store.apply([.update(knownRecord)])
            #expect(try await subject.loadAll() == [other])
            // An update ignored before the task existed leaves no trace once it is inserted.
            let unknown = S.task(S.id("unknown"))
            try await subject.store.apply([.insert(unknown)])
            #expect(try await subject.loadAll() == [other, unknown])
        }
    }

    // MARK: remove

    @Test(arguments: StoreKind.allCases)
    func removeForgetsTheTask(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let a = try S.richTask(S.id("a")), b = try S.richTask(S.id("b"))
            try await subject.store.apply([.insert(a), .insert(b)])
            try await subject.store.apply([.remove(a.task.id)])
            try await subject.store.apply([.remove(S.id("unknown"))])
            #expect(try await subject.loadAll() == [b])
            // Added again, it starts from what the new insert says (no old progress summary).
            try await subject.store.apply([.insert(S.task(a.task.id))])
            let again = try await subject.loadAll()
            #expect(again == [b, S.task(a.task.id)])
            #expect(again.last?.task.bytesDone == 0)
            try await subject.store.apply([.remove(a.task.id), .remove(b.task.id), .remove(b.task.id)])
            #expect(try await subject.loadAll().isEmpty)
        }
    }

    // MARK: Batches

    @Test(arguments: StoreKind.allCases)
    func aBatchIsAppliedInOrder(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let a = S.task(S.id("a")), b = S.task(S.id("b")), c = S.task(S.id("c")), d = S.task(S.id("d"))
            try await subject.store.apply([.insert(a), .insert(b)])

            // Insert, update, remove of one task: nothing of it is left.
            var cRecord = c.task
            cRecord.state = .downloading
            cRecord.bytesDone = 10
            try await subject.store.apply([.insert(c), .update(cRecord), .remove(c.task.id)])
            #expect(try await subject.loadAll() == [a, b])

            // Insert then two updates: the last update wins.
            var cFinal = cRecord
            cFinal.state = .paused
            cFinal.bytesDone = 20
            cFinal.segmentsDone = 2
            try await subject.store.apply([.insert(c), .update(cRecord), .update(cFinal)])
            #expect(try await subject.loadAll() == [a, b, StoredTask(entity: c.entity, task: cFinal)])

            // Remove then insert: the task is new again, so it goes last.
            var a2 = a
            a2.entity.title = "a, second time"
            try await subject.store.apply([.remove(a.task.id), .insert(a2)])
            #expect(try await subject.loadAll() == [b, StoredTask(entity: c.entity, task: cFinal), a2])

            // Update then insert of a known task: the insert wins, in the task's place.
            var bRecord = b.task
            bRecord.state = .failed
            var b2 = S.task(b.task.id, sequence: 8, bytesDone: 3)
            b2.entity.title = "b, replaced"
            try await subject.store.apply([.update(bRecord), .insert(b2)])
            #expect(try await subject.loadAll() == [b2, StoredTask(entity: c.entity, task: cFinal), a2])

            // Update before the insert of a new task: the update is of an unknown task, so ignored.
            var dRecord = d.task
            dRecord.state = .completed
            try await subject.store.apply([.update(dRecord), .insert(d)])
            #expect(try await subject.loadAll() == [b2, StoredTask(entity: c.entity, task: cFinal), a2, d])

            // An empty batch changes nothing.
            try await subject.store.apply([])
            #expect(try await subject.loadAll() == [b2, StoredTask(entity: c.entity, task: cFinal), a2, d])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aBatchWithAnInvalidChangeWritesNothing(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let a = try S.richTask(S.id("a"))
            let b = S.task(S.id("b"), bytesDone: 5)
            try await subject.store.apply([.insert(a), .insert(b)])
            let before = try await subject.loadAll()
            #expect(before == [a, b])

            var aRecord = a.task
            aRecord.state = .completed
            aRecord.bytesDone = 1
            let valid: [StoreChange] = [
                .insert(S.task(S.id("new"))), .update(aRecord), .remove(b.task.id), .insert(S.task(S.id("newer"))),
            ]
            // The invalid change second (as in "insert, then the bad one"), first, in the middle and last.
            for position in [1, 0, 2, valid.count] {
                var batch = valid
                batch.insert(.insert(S.mismatched()), at: position)
                let error = await #expect(throws: DownloadError.self, "bad change at \(position)") {
                    try await subject.store.apply(batch)
                }
                #expect(error?.code == .storeFailure)
                #expect(error?.message.contains("fixture:task") == true, "names the task: \(error?.message ?? "")")
                #expect(try await subject.loadAll() == before, "nothing of the batch with the bad change at \(position) was written")
            }

            // Without the invalid change the same batch applies in full.
            try await subject.store.apply(valid)
            #expect(try await subject.loadAll() == [StoredTask(entity: a.entity, task: aRecord), S.task(S.id("new")), S.task(S.id("newer"))])
        }
    }

    // MARK: Ordering of writes and concurrency

    @Test(arguments: StoreKind.allCases)
    func everyReadSeesEveryEarlierWrite(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let id = S.id("sequence")
            var record = S.record(id)
            try await subject.store.apply([.insert(StoredTask(entity: S.entity(id), task: record))])
            for step in 1...30 {
                record.weight = step
                record.state = step.isMultiple(of: 2) ? .downloading : .waiting
                record.bytesDone = Int64(step) * 1000
                record.segmentsDone = step
                let companion = S.id("companion-\(step)")
                try await subject.store.apply([.update(record), .remove(S.id("companion-\(step - 1)")), .insert(S.task(companion))])
                let loaded = try await subject.store.loadAll()
                #expect(loaded.first?.task == record)
                #expect(loaded.map(\.task.id) == [id, companion])
            }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func concurrentBatchesAreAllAppliedEachAsAWhole(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let ids = (0..<100).map { S.id("c\($0)") }
            try await subject.store.apply(ids.enumerated().map { .insert(S.task($1, sequence: $0)) })
            let store = subject.store
            let groups = (0..<20).map { group in (0..<4).map { S.id("g\(group)-\($0)") } }
            try await withThrowingTaskGroup(of: Void.self) { taskGroup in
                for (index, id) in ids.enumerated() {
                    taskGroup.addTask {
                        var record = S.record(id, state: .downloading, weight: 1000 + index, sequence: index, bytesDone: Int64(index) << 32)
                        record.resolveCount = index
                        record.segmentsDone = index * 2
                        try await store.apply([.update(record)])
                    }
                }
                for group in groups {
                    taskGroup.addTask {
                        try await store.apply(group.map { .insert(S.task($0)) })
                    }
                }
                try await taskGroup.waitForAll()
            }
            let loaded = try await subject.loadAll()
            #expect(loaded.count == ids.count + groups.count * 4)
            #expect(Array(loaded.prefix(ids.count)).map(\.task.id) == ids)
            for (index, task) in loaded.prefix(ids.count).enumerated() {
                #expect(task.task.weight == 1000 + index)
                #expect(task.task.resolveCount == index)
                #expect(task.task.state == .downloading)
                #expect(task.task.bytesDone == Int64(index) << 32)
                #expect(task.task.segmentsDone == index * 2)
            }
            // Each batch's inserts are together and in the batch's order (no other batch in between).
            let inserted = loaded.dropFirst(ids.count).map(\.task.id)
            for group in groups {
                guard let start = inserted.firstIndex(of: group[0]) else {
                    Issue.record("the batch of \(group[0]) is missing")
                    continue
                }
                #expect(Array(inserted[start..<min(start + 4, inserted.endIndex)]) == group)
            }
        }
    }

    // MARK: Persistence

    @Test(arguments: StoreKind.allCases)
    func everythingSurvivesReopening(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            var expected: [StoredTask] = []
            for index in 0..<5 {
                let task = try S.richTask(S.id("persist-\(index)", variant: index.isMultiple(of: 2) ? "" : "v\(index)"), sequence: index)
                try await subject.store.apply([.insert(task)])
                expected.append(task)
            }
            var progress = expected[1].task
            progress.bytesDone = 99
            progress.segmentsDone = 9
            var revised = expected[0].task
            revised.state = .interrupted(.meteredNetwork)
            revised.manifestRevision += 1
            revised.manifest = try S.richManifest(title: "revised")
            try await subject.store.apply([.update(progress), .remove(expected[3].task.id), .update(revised)])
            expected[1].task = progress
            expected[0].task = revised
            expected.remove(at: 3)

            // A new store object over the same state; for SQLite the first one is gone.
            #expect(try subject.dropAndReopen())
            #expect(try await subject.store.loadAll() == expected)
        }
    }
}

/// A small deterministic random number generator (SplitMix64).
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
