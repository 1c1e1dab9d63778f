import Foundation
import GRDB
import Testing
import TesseraTesting
@testable import Tessera

/// What only the SQLite store does: its file, its schema, refusing files that are not its own,
/// damaged rows, and speed.
@Suite struct SQLiteDownloadStoreTests {
    typealias S = StoreSamples

    /// Every file under `directory` (relative path → bytes; directories map to nil).
    func snapshot(_ directory: String) -> [String: [UInt8]?] {
        var result: [String: [UInt8]?] = [:]
        for relative in (try? FileManager.default.subpathsOfDirectory(atPath: directory)) ?? [] {
            let full = (directory as NSString).appendingPathComponent(relative)
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory)
            result[relative] = isDirectory.boolValue ? .some(nil) : .some(fileBytes(full))
        }
        return result
    }

    /// Opening `path` must fail with an actionable store failure and change nothing in its directory.
    func expectRefused(_ path: String, mentioning phrases: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        let directory = (path as NSString).deletingLastPathComponent
        let before = snapshot(directory)
        #expect(!before.isEmpty, sourceLocation: sourceLocation)
        let error = #expect(throws: DownloadError.self, sourceLocation: sourceLocation) {
            _ = try SQLiteDownloadStore(path: path)
        }
        #expect(error?.code == .storeFailure, sourceLocation: sourceLocation)
        let message = error?.message ?? ""
        #expect(message.contains(path), "the message names the file: \(message)", sourceLocation: sourceLocation)
        for phrase in phrases {
            #expect(message.contains(phrase), "the message says \"\(phrase)\": \(message)", sourceLocation: sourceLocation)
        }
        #expect(snapshot(directory) == before, "the directory is unchanged", sourceLocation: sourceLocation)
        // A second attempt fails the same way (nothing was half-done the first time).
        #expect(throws: DownloadError.self, sourceLocation: sourceLocation) { _ = try SQLiteDownloadStore(path: path) }
        #expect(snapshot(directory) == before, sourceLocation: sourceLocation)
    }

    /// A directory with a state file path and a "downloaded" file beside it.
    func directoryWithNeighbour() -> (TemporaryDirectory, String) {
        let directory = TemporaryDirectory("tessera-sqlite")
        _ = FileManager.default.createFile(atPath: directory.file("movie.mp4"), contents: Data((0..<4096).map { UInt8($0 % 251) }))
        return (directory, directory.file("tessera.sqlite"))
    }

    /// Creates a state file with `body` run on it, and closes everything.
    func makeStateFile(_ path: String, _ body: (SQLiteDownloadStore) async throws -> Void = { _ in }) async throws {
        let store = try SQLiteDownloadStore(path: path)
        try await body(store)
    }

    // MARK: Location and schema

    @Test func theDefaultPathFollowsTheXDGBaseDirectorySpecification() {
        #expect(SQLiteDownloadStore.defaultPath(environment: ["XDG_DATA_HOME": "/data", "HOME": "/home/u"]) == "/data/tessera/tessera.sqlite")
        #expect(SQLiteDownloadStore.defaultPath(environment: ["XDG_DATA_HOME": "/data/", "HOME": "/home/u"]) == "/data/tessera/tessera.sqlite")
        #expect(SQLiteDownloadStore.defaultPath(environment: ["HOME": "/home/u"]) == "/home/u/.local/share/tessera/tessera.sqlite")
        #expect(SQLiteDownloadStore.defaultPath(environment: ["XDG_DATA_HOME": "", "HOME": "/home/u"]) == "/home/u/.local/share/tessera/tessera.sqlite")
        #expect(SQLiteDownloadStore.defaultPath(environment: ["XDG_DATA_HOME": "relative/data", "HOME": "/home/u"]) == "/home/u/.local/share/tessera/tessera.sqlite")
        #expect(SQLiteDownloadStore.defaultPath.hasSuffix("/tessera/tessera.sqlite"))
        #expect(SQLiteDownloadStore.defaultPath.hasPrefix("/"))
    }

    @Test func openingCreatesTheParentDirectoriesAndTheSchema() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("a/b/c/tessera.sqlite")
        try await makeStateFile(path) { store in
            #expect(store.path == path)
            try await store.insert(S.task(S.id("x")))
        }
        #expect(FileManager.default.fileExists(atPath: path))
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        try await queue.read { db in
            #expect(try String.fetchOne(db, sql: "PRAGMA journal_mode") == "wal")
            #expect(try Int32.fetchOne(db, sql: "PRAGMA application_id") == SQLiteDownloadStore.applicationID)
            #expect(try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations") == ["v1"])
            let tables = try String.fetchSet(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            #expect(tables == ["tasks", "segments", "grdb_migrations"])
            let taskColumns = try db.columns(in: "tasks").map(\.name)
            #expect(taskColumns == [
                "id", "entityType", "entityKey", "variantKey", "sequence", "title", "aggregationKey", "groupType",
                "destinationDirectory", "entityPayload", "state", "interruptionReason", "mode", "weight", "resolveCount",
                "lastError", "manifest", "manifestRevision", "addedAt",
            ])
            let segmentColumns = try db.columns(in: "segments").map(\.name)
            #expect(segmentColumns == [
                "taskId", "outputIndex", "segmentIndex", "isDone", "bytesWritten", "etag", "lastModified",
                "lastModifiedIsStrong", "cacheKey",
            ])
            #expect(try db.primaryKey("segments").columns == ["taskId", "outputIndex", "segmentIndex"])
            let foreignKeys = try Row.fetchAll(db, sql: "PRAGMA foreign_key_list(segments)")
            #expect(foreignKeys.count == 1)
            #expect(foreignKeys.first?["table"] == "tasks")
            #expect(foreignKeys.first?["on_delete"] == "CASCADE")
            let unique = try db.indexes(on: "tasks").filter(\.isUnique).map(\.columns)
            #expect(unique == [["entityType", "entityKey", "variantKey"]])
        }
    }

    @Test func anEmptyFileBecomesAStateFile() async throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        _ = FileManager.default.createFile(atPath: path, contents: Data())
        try await makeStateFile(path) { store in
            try await store.insert(S.task(S.id("x")))
            #expect(try await store.loadAll().count == 1)
        }
        #expect(fileBytes(directory.file("movie.mp4")).count == 4096)
    }

    // MARK: Refusing files that are not ours

    @Test func aFileThatIsNotAnSQLiteDatabaseIsRefusedAndLeftUntouched() throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        _ = FileManager.default.createFile(atPath: path, contents: Data("this is not a database, just some text\n".utf8 + (0..<3000).map { UInt8($0 % 256) }))
        expectRefused(path, mentioning: ["not an SQLite database", "untouched"])
        // A short file, and a file that starts like SQLite but stops after the magic, too.
        _ = FileManager.default.createFile(atPath: path, contents: Data("x".utf8))
        expectRefused(path, mentioning: ["not an SQLite database"])
        _ = FileManager.default.createFile(atPath: path, contents: Data("SQLite format 3\0".utf8))
        expectRefused(path, mentioning: ["not an SQLite database"])
        // A damaged database: a real header, garbage where the schema should be.
        try FileManager.default.removeItem(atPath: path)
        do {
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in try db.execute(sql: "CREATE TABLE t (x); INSERT INTO t VALUES (1)") }
            try queue.close()
        }
        var damaged = fileBytes(path)
        var generator = SeededGenerator(seed: 7)
        for index in 100..<damaged.count { damaged[index] = UInt8.random(in: 0...255, using: &generator) }
        _ = FileManager.default.createFile(atPath: path, contents: Data(damaged))
        expectRefused(path, mentioning: ["untouched"])
    }

    @Test func anotherApplicationsDatabaseIsRefusedAndLeftUntouched() throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        do {
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('keep me')")
            }
            try queue.close()
        }
        expectRefused(path, mentioning: ["another application", "notes", "untouched"])
    }

    @Test func anotherApplicationsDatabaseWithTablesNamedLikeOursIsRefused() throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        do {
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE tasks (id INTEGER PRIMARY KEY, todo TEXT); INSERT INTO tasks (todo) VALUES ('buy milk')")
            }
            try queue.close()
        }
        expectRefused(path, mentioning: ["another application", "tasks"])
    }

    @Test func aDatabaseWithAnotherApplicationIDIsRefusedEvenWhenEmpty() throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        do {
            let queue = try DatabaseQueue(path: path)
            try queue.write { db in try db.execute(sql: "PRAGMA application_id = 1234") }
            try queue.close()
        }
        expectRefused(path, mentioning: ["another application", "0x000004d2"])
    }

    @Test func aWALModeDatabaseOfAnotherApplicationIsRefusedWithoutCreatingFiles() throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        do {
            let pool = try DatabasePool(path: path)
            try pool.write { db in try db.execute(sql: "CREATE TABLE photos (id INTEGER PRIMARY KEY)") }
            try pool.close()
        }
        expectRefused(path, mentioning: ["another application", "photos"])
    }

    @Test func aStateFileFromANewerTesseraIsRefusedAndLeftUntouched() async throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        try await makeStateFile(path) { store in try await store.insert(try S.richTask(S.id("old"))) }
        do {
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v999')")
            }
            try queue.close()
        }
        expectRefused(path, mentioning: ["newer version of Tessera", "v999", "Upgrade Tessera", "untouched"])
    }

    @Test func aStateFileWithTablesOfANewerTesseraIsRefused() async throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        try await makeStateFile(path)
        do {
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in try db.execute(sql: "CREATE TABLE groups (id INTEGER PRIMARY KEY)") }
            try queue.close()
        }
        expectRefused(path, mentioning: ["newer version of Tessera", "groups"])
    }

    @Test func aDirectoryAtThePathIsRefused() throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("tessera.sqlite")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let error = #expect(throws: DownloadError.self) { _ = try SQLiteDownloadStore(path: path) }
        #expect(error?.code == .storeFailure)
        #expect(error?.message.contains("\(path) is a directory") == true)
    }

    @Test func aFIFOAtThePathIsRefusedWithoutBlocking() throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        #expect(mkfifo(path, 0o600) == 0)
        let error = #expect(throws: DownloadError.self) { _ = try SQLiteDownloadStore(path: path) }
        #expect(error?.code == .storeFailure)
        #expect(error?.message.contains("not a regular file") == true)
    }

    @Test func aParentDirectoryThatCannotBeCreatedIsReported() throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        _ = FileManager.default.createFile(atPath: directory.file("file"), contents: Data("x".utf8))
        let error = #expect(throws: DownloadError.self) { _ = try SQLiteDownloadStore(path: directory.file("file/sub/tessera.sqlite")) }
        #expect(error?.code == .storeFailure)
        #expect(error?.message.contains(directory.file("file/sub")) == true)
        #expect(error?.message.contains("Not a directory") == true)
        #expect(fileBytes(directory.file("file")) == Array("x".utf8))
    }

    // MARK: Damaged rows

    @Test func damagedRowsAreSkippedReportedAndLeftInPlace() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("tessera.sqlite")
        let store = try SQLiteDownloadStore(path: path)
        let ids = (0..<6).map { S.id("t\($0)", variant: "v#\($0)") }
        var tasks: [StoredTask] = []
        for (index, id) in ids.enumerated() {
            var task = try S.richTask(id, sequence: index)
            task.task.manifestRevision = 1
            tasks.append(task)
            try await store.insert(task)
        }
        let damage = [
            "UPDATE tasks SET manifest = '{\"outputs\": [' WHERE entityKey = 't1'",
            "UPDATE tasks SET state = 'exploded' WHERE entityKey = 't2'",
            "UPDATE segments SET bytesWritten = 'many' WHERE taskId = (SELECT id FROM tasks WHERE entityKey = 't3') AND segmentIndex = 1",
            "UPDATE tasks SET title = x'00ff', lastError = 'null' WHERE entityKey = 't4'",
        ]
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        for sql in damage { try await queue.write { db in try db.execute(sql: sql) } }
        let rawBefore = try queue.read { db in try Row.fetchAll(db, sql: "SELECT * FROM tasks ORDER BY id") }
        let segmentsBefore = try queue.read { db in try Row.fetchAll(db, sql: "SELECT * FROM segments ORDER BY taskId, outputIndex, segmentIndex") }

        let result = try await store.load()
        #expect(result.tasks == [tasks[0], tasks[5]])
        #expect(result.unreadable.map(\.id) == [ids[1], ids[2], ids[3], ids[4]])
        #expect(store.unreadableTasks == result.unreadable)
        for (item, hint) in zip(result.unreadable, ["manifest", "exploded", "bytesWritten", "title"]) {
            #expect(item.error.code == .storeFailure)
            #expect(item.error.message.contains(item.id!.description), "names the task: \(item.error.message)")
            #expect(item.error.message.contains(path), "names the file: \(item.error.message)")
            #expect(item.error.message.contains(hint), "says what is wrong: \(item.error.message)")
            #expect(item.error.message.contains("Add the task again"), "says what to do: \(item.error.message)")
        }
        #expect(try await store.loadAll() == [tasks[0], tasks[5]])
        // Reading changed nothing.
        #expect(try queue.read { db in try Row.fetchAll(db, sql: "SELECT * FROM tasks ORDER BY id") } == rawBefore)
        #expect(try queue.read { db in try Row.fetchAll(db, sql: "SELECT * FROM segments ORDER BY taskId, outputIndex, segmentIndex") } == segmentsBefore)

        // Adding a damaged task again repairs it, in its place and with its (readable) progress.
        var repaired = tasks[1]
        repaired.segments = []
        try await store.insert(repaired)
        // Removing one deletes it; updating one with a new revision repairs what the update writes.
        try await store.remove(ids[3])
        var record = tasks[2].task
        record.manifestRevision = 2
        try await store.update(record)
        tasks[2].task = record
        let again = try await store.load()
        #expect(again.tasks == [tasks[0], tasks[1], tasks[2], tasks[5]])
        #expect(again.unreadable.map(\.id) == [ids[4]])
    }

    // MARK: Writing

    @Test func updateRewritesTheManifestOnlyWhenItsRevisionChanges() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("tessera.sqlite")
        let store = try SQLiteDownloadStore(path: path)
        let id = S.id("revision")
        var record = S.record(id, manifest: try S.richManifest(title: "first"), manifestRevision: 1)
        try await store.insert(StoredTask(entity: S.entity(id), task: record))

        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        func rawManifest() async throws -> String? {
            try await queue.read { db in try String.fetchOne(db, sql: "SELECT manifest FROM tasks") }
        }
        let sentinel = "sentinel: written by the test, not by the store"
        try await queue.write { db in try db.execute(sql: "UPDATE tasks SET manifest = ?", arguments: [sentinel]) }

        // Same revision (even with another manifest in the record): the stored manifest is not touched.
        record.state = .downloading
        record.weight = 8
        record.manifest = try S.richManifest(title: "ignored")
        try await store.update(record)
        #expect(try await rawManifest() == sentinel)
        let scalars = try queue.read { db in try Row.fetchOne(db, sql: "SELECT state, weight FROM tasks") }
        #expect(scalars?["state"] == "downloading")
        #expect(scalars?["weight"] == 8)

        // A new revision replaces it.
        record.manifest = try S.richManifest(title: "second")
        record.manifestRevision = 2
        try await store.update(record)
        let written = try await rawManifest()
        #expect(written != sentinel)
        #expect(written?.contains("second") == true)
        #expect(try await store.loadAll().first?.task == record)

        // A lower revision is a change too (the manager only counts up, but the store does not guess).
        record.manifest = nil
        record.manifestRevision = 0
        try await store.update(record)
        #expect(try await rawManifest() == nil)
    }

    @Test func tenThousandSegmentsInOneCallAreOneQuickTransaction() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let store = try SQLiteDownloadStore(path: directory.file("tessera.sqlite"))
        let ids = (0..<10).map { S.id("bulk\($0)") }
        for id in ids { try await store.insert(S.task(id)) }
        let validator = ResourceValidator(etag: "\"e\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT")
        let progress = (0..<10_000).map { index in
            S.progress(ids[index % 10], index / 1000, index, bytes: Int64(index), done: index.isMultiple(of: 2), validator: validator, cacheKey: "k\(index)")
        }
        let clock = ContinuousClock()
        let first = try await clock.measure { try await store.saveSegments(progress) }
        // Overwriting all of them is the common case (progress of running segments).
        let second = try await clock.measure { try await store.saveSegments(progress.map { var p = $0; p.bytesWritten += 1; return p }) }
        let loadTime = try await clock.measure {
            let loaded = try await store.loadAll()
            #expect(loaded.reduce(0) { $0 + $1.segments.count } == 10_000)
            #expect(loaded.first?.segments.first?.bytesWritten == 1)
        }
        print("SQLiteDownloadStore: 10,000 segments inserted in \(first), overwritten in \(second), loaded in \(loadTime)")
        #expect(first < .seconds(1))
        #expect(second < .seconds(1))
    }

    @Test func anEntityWhoseIdentityIsNotTheTasksIsRefused() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let store = try SQLiteDownloadStore(path: directory.file("tessera.sqlite"))
        let task = StoredTask(entity: S.entity(S.id("entity")), task: S.record(S.id("task")))
        let error = await #expect(throws: DownloadError.self) { try await store.insert(task) }
        #expect(error?.code == .storeFailure)
        #expect(error?.message.contains("fixture:task") == true)
        #expect(try await store.loadAll().isEmpty)
    }

    @Test func removingATaskLeavesNoProgressRowsBehind() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("tessera.sqlite")
        let store = try SQLiteDownloadStore(path: path)
        try await store.insert(try S.richTask(S.id("a")))
        try await store.insert(try S.richTask(S.id("b")))
        try await store.remove(S.id("a"))
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        let counts = try await queue.read { db in
            (try Int.fetchOne(db, sql: "SELECT count(*) FROM tasks"), try Int.fetchOne(db, sql: "SELECT count(*) FROM segments"))
        }
        #expect(counts.0 == 1)
        #expect(counts.1 == 4)
        try await store.resetSegments(of: S.id("b"))
        #expect(try await queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM segments") } == 0)
    }

    // MARK: Durability and sharing

    @Test func aCopyTakenWhileTheStoreIsOpenHoldsEveryCommittedWrite() async throws {
        // What a crash (kill -9) leaves: the database file and its write-ahead log, never checkpointed.
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("live/tessera.sqlite")
        let store = try SQLiteDownloadStore(path: path)
        var expected: [StoredTask] = []
        for index in 0..<20 {
            let task = try S.richTask(S.id("crash\(index)"), sequence: index)
            try await store.insert(task)
            expected.append(task)
        }
        try await store.saveSegments([S.progress(expected[0].task.id, 7, 7, bytes: 77)])
        expected[0].segments.append(S.progress(expected[0].task.id, 7, 7, bytes: 77))
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        try FileManager.default.createDirectory(atPath: directory.file("copy"), withIntermediateDirectories: true)
        for suffix in ["", "-wal"] {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: directory.file("copy/tessera.sqlite") + suffix)
        }
        let recovered = try SQLiteDownloadStore(path: directory.file("copy/tessera.sqlite"))
        #expect(try await recovered.loadAll() == expected)
    }

    @Test func twoStoresOnOneFileSeeEachOthersWrites() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("tessera.sqlite")
        let first = try SQLiteDownloadStore(path: path)
        let second = try SQLiteDownloadStore(path: path)
        try await first.insert(S.task(S.id("one")))
        try await second.saveSegments([S.progress(S.id("one"), 0, 0, bytes: 5)])
        try await second.insert(S.task(S.id("two")))
        let loaded = try await first.loadAll()
        #expect(loaded.map(\.task.id) == [S.id("one"), S.id("two")])
        #expect(loaded.first?.segments == [S.progress(S.id("one"), 0, 0, bytes: 5)])
    }
}
