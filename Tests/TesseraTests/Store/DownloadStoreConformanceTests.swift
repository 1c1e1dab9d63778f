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
        sequence: Int = 1, manifest: DownloadManifest? = nil, manifestRevision: Int = 0
    ) -> TaskRecord {
        TaskRecord(
            id: id, state: state, mode: mode, weight: weight, sequence: sequence, manifest: manifest,
            manifestRevision: manifestRevision, addedAt: Date(timeIntervalSinceReferenceDate: 700_000_000.125))
    }

    static func task(_ id: DownloadTaskID, sequence: Int = 1, segments: [SegmentProgress] = []) -> StoredTask {
        StoredTask(entity: entity(id), task: record(id, sequence: sequence), segments: segments)
    }

    static func progress(
        _ id: DownloadTaskID, _ output: Int, _ segment: Int, bytes: Int64 = 100, done: Bool = false,
        validator: ResourceValidator? = nil, cacheKey: String? = nil
    ) -> SegmentProgress {
        SegmentProgress(
            taskID: id, outputIndex: output, segmentIndex: segment, isDone: done, bytesWritten: bytes,
            validator: validator, cacheKey: cacheKey)
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
            addedAt: Date(timeIntervalSinceReferenceDate: 765_432_109.987654))
        let segments = [
            progress(id, 0, 0, bytes: 1000, done: true, validator: ResourceValidator(etag: "\"abc#1\"", lastModified: "Tue, 15 Nov 1994 12:45:26 GMT", lastModifiedIsStrong: false), cacheKey: "sha256:ab#0/ü"),
            progress(id, 0, 1, bytes: 512, validator: ResourceValidator(etag: "W/\"weak\"")),
            progress(id, 1, 2, bytes: Int64.max, done: true, cacheKey: "キャッシュ#2"),
            progress(id, 2, 0, bytes: 0, validator: ResourceValidator()),
        ]
        return StoredTask(entity: entity, task: record, segments: segments)
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
            try await subject.store.insert(task)
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
            try await subject.store.insert(StoredTask(entity: entity, task: record, segments: [S.progress(id, 0, 0, bytes: 0)]))
            var other = S.task(S.id("nothing"))
            other.task.lastError = nil
            other.task.manifest = nil
            try await subject.store.insert(other)
            let loaded = try await subject.loadAll()
            #expect(loaded == [StoredTask(entity: entity, task: record, segments: [S.progress(id, 0, 0, bytes: 0)]), other])
            #expect(loaded.first?.task.lastError?.url == nil)
            #expect(loaded.first?.task.lastError?.httpStatus == nil)
            #expect(loaded.first?.segments.first?.validator == nil)
            #expect(loaded.last?.task.manifest == nil)
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
                    try await subject.store.insert(task)
                    expected.append(task)
                }
            }
            #expect(try await subject.loadAll() == expected)
            // And through update as well.
            for (index, task) in expected.enumerated() {
                var record = task.task
                record.state = S.allStates[(index + 5) % S.allStates.count]
                record.mode = record.mode == .download ? .cacheOnly : .download
                try await subject.store.update(record)
                expected[index].task = record
            }
            #expect(try await subject.loadAll() == expected)
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
                try await subject.store.insert(S.task(id, sequence: index, segments: [S.progress(id, 0, index, cacheKey: "key#\(index)/ü")]))
            }
            let loaded = try await subject.loadAll()
            #expect(loaded.map(\.task.id) == ids)
            #expect(loaded.map(\.entity.taskID) == ids)
            #expect(loaded.map { $0.segments.map(\.segmentIndex) } == ids.indices.map { [$0] })
            try await subject.store.remove(ids[0])
            #expect(try await subject.loadAll().map(\.task.id) == Array(ids.dropFirst()))
        }
    }

    // MARK: Order

    @Test(arguments: StoreKind.allCases)
    func tasksLoadInInsertionOrderNotBySequenceOrIdentity(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let keys = (0..<40).map { "k\(($0 * 17) % 40)" }
            for (index, key) in keys.enumerated() {
                try await subject.store.insert(S.task(S.id(key), sequence: 1000 - index))
            }
            #expect(try await subject.loadAll().map(\.task.id.entityKey) == keys)
            // Removing one and adding a new one puts the new one last; replacing a known one keeps its place.
            try await subject.store.remove(S.id(keys[3]))
            try await subject.store.insert(S.task(S.id("new")))
            try await subject.store.insert(S.task(S.id(keys[0]), sequence: 5))
            let expected = Array(keys[0..<3]) + Array(keys[4...]) + ["new"]
            #expect(try await subject.loadAll().map(\.task.id.entityKey) == expected)
            // A removed task added again is new: it goes last.
            try await subject.store.insert(S.task(S.id(keys[3])))
            #expect(try await subject.loadAll().map(\.task.id.entityKey) == expected + [keys[3]])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func segmentsLoadSortedByOutputThenSegment(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let id = S.id("sorted")
            try await subject.store.insert(S.task(id))
            var keys: [(Int, Int)] = []
            for output in 0..<4 { for segment in 0..<12 { keys.append((output, segment)) } }
            var generator = SeededGenerator(seed: 42)
            keys.shuffle(using: &generator)
            for chunk in stride(from: 0, to: keys.count, by: 7) {
                try await subject.store.saveSegments(keys[chunk..<min(chunk + 7, keys.count)].map { S.progress(id, $0.0, $0.1) })
            }
            let loaded = try await subject.loadAll()
            let order = loaded.first?.segments.map { [$0.outputIndex, $0.segmentIndex] } ?? []
            #expect(order == keys.sorted { $0 < $1 }.map { [$0.0, $0.1] })
        }
    }

    // MARK: insert

    @Test(arguments: StoreKind.allCases)
    func insertOfAKnownTaskReplacesEntityAndRecordButKeepsSegmentProgress(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let id = S.id("replace")
            let segments = [S.progress(id, 0, 0, bytes: 10, done: true), S.progress(id, 0, 1, bytes: 5)]
            try await subject.store.insert(try S.richTask(id))
            try await subject.store.saveSegments(segments)
            var replacement = StoredTask(
                entity: S.entity(id, title: "new title", aggregationKey: "group"),
                task: S.record(id, state: .paused, mode: .cacheOnly, weight: 9, sequence: 99, manifest: try S.richManifest(title: "v2"), manifestRevision: 1))
            replacement.task.lastError = nil
            try await subject.store.insert(replacement)
            let loaded = try await subject.loadAll()
            #expect(loaded.count == 1)
            #expect(loaded.first?.entity == replacement.entity)
            #expect(loaded.first?.task == replacement.task)
            // The rich task's own segments and the saved ones, merged and sorted.
            let rich = try S.richTask(id).segments
            var merged: [String: SegmentProgress] = [:]
            for item in rich + segments { merged["\(item.outputIndex)/\(item.segmentIndex)"] = item }
            let expected = merged.values.sorted { ($0.outputIndex, $0.segmentIndex) < ($1.outputIndex, $1.segmentIndex) }
            #expect(loaded.first?.segments == expected)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func insertRecordsTheTasksOwnSegmentsOverStoredOnes(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let id = S.id("with-segments")
            try await subject.store.insert(S.task(id, segments: [S.progress(id, 0, 0, bytes: 1), S.progress(id, 0, 1, bytes: 2)]))
            try await subject.store.insert(S.task(id, segments: [S.progress(id, 0, 1, bytes: 20, done: true), S.progress(id, 1, 0, bytes: 30)]))
            let loaded = try await subject.loadAll()
            #expect(loaded.first?.segments == [S.progress(id, 0, 0, bytes: 1), S.progress(id, 0, 1, bytes: 20, done: true), S.progress(id, 1, 0, bytes: 30)])
        }
    }

    // MARK: update

    @Test(arguments: StoreKind.allCases)
    func updateReplacesTheRecordAndKeepsEntityAndSegments(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let id = S.id("update")
            let original = try S.richTask(id)
            try await subject.store.insert(original)
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
            try await subject.store.update(record)
            #expect(try await subject.loadAll() == [StoredTask(entity: original.entity, task: record, segments: original.segments)])
            // Clearing the error and the manifest (a new revision) is recorded too.
            record.lastError = nil
            record.manifest = nil
            record.manifestRevision += 1
            try await subject.store.update(record)
            #expect(try await subject.loadAll() == [StoredTask(entity: original.entity, task: record, segments: original.segments)])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func updateOfAnUnknownTaskThrowsStoreFailureAndChangesNothing(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let known = S.task(S.id("known"))
            try await subject.store.insert(known)
            let error = await #expect(throws: DownloadError.self) {
                try await subject.store.update(S.record(S.id("unknown"), state: .waiting))
            }
            #expect(error?.code == .storeFailure)
            #expect(error?.message.contains("fixture:unknown") == true)
            // A removed task is unknown too.
            try await subject.store.remove(known.task.id)
            let again = await #expect(throws: DownloadError.self) {
                try await subject.store.update(known.task)
            }
            #expect(again?.code == .storeFailure)
            #expect(try await subject.loadAll().isEmpty)
        }
    }

    // MARK: saveSegments

    @Test(arguments: StoreKind.allCases)
    func saveSegmentsReplacesOnlyTheGivenSegments(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let a = S.id("a"), b = S.id("b")
            try await subject.store.insert(S.task(a))
            try await subject.store.insert(S.task(b))
            try await subject.store.saveSegments([
                S.progress(a, 0, 0, bytes: 1), S.progress(a, 0, 1, bytes: 2), S.progress(b, 0, 0, bytes: 3),
            ])
            let validator = ResourceValidator(etag: "\"v2\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT")
            try await subject.store.saveSegments([S.progress(a, 0, 1, bytes: 200, done: true, validator: validator, cacheKey: "c#1")])
            // A validator and a cache key can be taken away again.
            try await subject.store.saveSegments([S.progress(b, 0, 0, bytes: 4)])
            let loaded = try await subject.loadAll()
            #expect(loaded.map(\.segments) == [
                [S.progress(a, 0, 0, bytes: 1), S.progress(a, 0, 1, bytes: 200, done: true, validator: validator, cacheKey: "c#1")],
                [S.progress(b, 0, 0, bytes: 4)],
            ])
            try await subject.store.saveSegments([S.progress(a, 0, 1, bytes: 0)])
            #expect(try await subject.loadAll().first?.segments == [S.progress(a, 0, 0, bytes: 1), S.progress(a, 0, 1, bytes: 0)])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func segmentsOfUnknownTasksAreIgnored(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let known = S.id("known"), unknown = S.id("unknown")
            try await subject.store.insert(S.task(known))
            try await subject.store.saveSegments([S.progress(unknown, 0, 0), S.progress(known, 0, 0, bytes: 7), S.progress(unknown, 0, 1)])
            try await subject.store.saveSegments([])
            let loaded = try await subject.loadAll()
            #expect(loaded.map(\.task.id) == [known])
            #expect(loaded.first?.segments == [S.progress(known, 0, 0, bytes: 7)])
            // Adding the unknown task later does not bring the ignored progress back.
            try await subject.store.insert(S.task(unknown))
            #expect(try await subject.loadAll().last?.segments == [])
        }
    }

    // MARK: resetSegments and remove

    @Test(arguments: StoreKind.allCases)
    func resetSegmentsForgetsEveryProgressOfThatTaskOnly(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let a = try S.richTask(S.id("a")), b = try S.richTask(S.id("b"))
            try await subject.store.insert(a)
            try await subject.store.insert(b)
            try await subject.store.resetSegments(of: a.task.id)
            try await subject.store.resetSegments(of: S.id("unknown"))
            var expectedA = a
            expectedA.segments = []
            #expect(try await subject.loadAll() == [expectedA, b])
            // Progress recorded after a reset is kept.
            try await subject.store.saveSegments([S.progress(a.task.id, 3, 3)])
            #expect(try await subject.loadAll().first?.segments == [S.progress(a.task.id, 3, 3)])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func removeForgetsTheTaskAndItsProgress(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let a = try S.richTask(S.id("a")), b = try S.richTask(S.id("b"))
            try await subject.store.insert(a)
            try await subject.store.insert(b)
            try await subject.store.remove(a.task.id)
            try await subject.store.remove(S.id("unknown"))
            #expect(try await subject.loadAll() == [b])
            // Added again, it starts without the old progress.
            try await subject.store.insert(S.task(a.task.id))
            #expect(try await subject.loadAll() == [b, S.task(a.task.id)])
            try await subject.store.remove(a.task.id)
            try await subject.store.remove(b.task.id)
            #expect(try await subject.loadAll().isEmpty)
        }
    }

    // MARK: Ordering of writes and concurrency

    @Test(arguments: StoreKind.allCases)
    func everyReadSeesEveryEarlierWrite(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let id = S.id("sequence")
            var record = S.record(id)
            try await subject.store.insert(StoredTask(entity: S.entity(id), task: record))
            for step in 1...30 {
                record.weight = step
                record.state = step.isMultiple(of: 2) ? .downloading : .waiting
                try await subject.store.update(record)
                try await subject.store.saveSegments([S.progress(id, 0, 0, bytes: Int64(step))])
                let loaded = try await subject.store.loadAll()
                #expect(loaded.first?.task == record)
                #expect(loaded.first?.segments.first?.bytesWritten == Int64(step))
            }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func concurrentWritesAreAllApplied(_ kind: StoreKind) async throws {
        try await withStore(kind) { subject in
            let ids = (0..<100).map { S.id("c\($0)") }
            for (index, id) in ids.enumerated() { try await subject.store.insert(S.task(id, sequence: index)) }
            let store = subject.store
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, id) in ids.enumerated() {
                    group.addTask {
                        try await store.saveSegments((0..<5).map { S.progress(id, 0, $0, bytes: Int64(index * 10 + $0)) })
                    }
                    group.addTask {
                        var record = S.record(id, state: .downloading, weight: 1000 + index, sequence: index)
                        record.resolveCount = index
                        try await store.update(record)
                    }
                }
                try await group.waitForAll()
            }
            let loaded = try await subject.loadAll()
            #expect(loaded.map(\.task.id) == ids)
            for (index, task) in loaded.enumerated() {
                #expect(task.task.weight == 1000 + index)
                #expect(task.task.resolveCount == index)
                #expect(task.task.state == .downloading)
                #expect(task.segments.map(\.bytesWritten) == (0..<5).map { Int64(index * 10 + $0) })
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
                try await subject.store.insert(task)
                expected.append(task)
            }
            try await subject.store.saveSegments([S.progress(expected[1].task.id, 9, 9, bytes: 99, done: true)])
            expected[1].segments.append(S.progress(expected[1].task.id, 9, 9, bytes: 99, done: true))
            try await subject.store.resetSegments(of: expected[2].task.id)
            expected[2].segments = []
            try await subject.store.remove(expected[3].task.id)
            expected.remove(at: 3)
            var record = expected[0].task
            record.state = .interrupted(.meteredNetwork)
            record.manifestRevision += 1
            record.manifest = try S.richManifest(title: "revised")
            try await subject.store.update(record)
            expected[0].task = record

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
