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
    @discardableResult
    func expectRefused(_ path: String, mentioning phrases: [String], sourceLocation: SourceLocation = #_sourceLocation) -> DownloadError? {
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
        return error
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
            try await store.apply([.insert(S.task(S.id("x")))])
        }
        #expect(FileManager.default.fileExists(atPath: path))
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        try await queue.read { db in
            #expect(try String.fetchOne(db, sql: "PRAGMA journal_mode") == "wal")
            #expect(try Int32.fetchOne(db, sql: "PRAGMA application_id") == SQLiteDownloadStore.applicationID)
            #expect(try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier") == ["v1", "v2", "v3"])
            let tables = try String.fetchSet(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            #expect(tables == ["tasks", "grdb_migrations"])
            let taskColumns = try db.columns(in: "tasks").map(\.name)
            #expect(taskColumns == [
                "id", "entityType", "entityKey", "variantKey", "sequence", "title", "aggregationKey", "groupType",
                "destinationDirectory", "entityPayload", "state", "interruptionReason", "mode", "weight", "resolveCount",
                "lastError", "manifest", "manifestRevision", "addedAt", "bytesDone", "segmentsDone", "bytesTotal",
            ])
            for name in ["bytesDone", "segmentsDone"] {
                let column = try db.columns(in: "tasks").first { $0.name == name }
                #expect(column?.type == "INTEGER", "\(name)")
                #expect(column?.isNotNull == true, "\(name)")
                #expect(column?.defaultValueSQL == "0", "\(name)")
            }
            let total = try db.columns(in: "tasks").first { $0.name == "bytesTotal" }
            #expect(total?.type == "INTEGER" && total?.isNotNull == false && total?.defaultValueSQL == nil)
            let unique = try db.indexes(on: "tasks").filter(\.isUnique).map(\.columns)
            #expect(unique == [["entityType", "entityKey", "variantKey"]])
        }
    }

    @Test func anEmptyFileBecomesAStateFile() async throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        _ = FileManager.default.createFile(atPath: path, contents: Data())
        try await makeStateFile(path) { store in
            try await store.apply([.insert(S.task(S.id("x")))])
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

    @Test func garbageBehindTheSQLiteMagicIsCalledDamagedNotAnotherApplications() throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        var bytes = Array("SQLite format 3\0".utf8)
        var generator = SeededGenerator(seed: 11)
        for _ in 0..<4080 { bytes.append(UInt8.random(in: 0...255, using: &generator)) }
        bytes[21] = 1  // whatever the rest says, not a real header
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
        let error = expectRefused(path, mentioning: ["damaged", "untouched"])
        #expect(error?.message.contains("another application") == false, "\(String(describing: error))")
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
        try await makeStateFile(path) { store in try await store.apply([.insert(try S.richTask(S.id("old")))]) }
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

    // MARK: Migrating a v1 file

    /// The schema of migration "v1" and GRDB's log, written by hand (not through the store's
    /// migrator), as a Tessera of that version left its state files.
    static let v1Schema = """
        PRAGMA application_id = 1414746962;
        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
        INSERT INTO grdb_migrations (identifier) VALUES ('v1');
        CREATE TABLE tasks (
            id INTEGER PRIMARY KEY,
            entityType TEXT NOT NULL,
            entityKey TEXT NOT NULL,
            variantKey TEXT NOT NULL,
            sequence INTEGER NOT NULL,
            title TEXT NOT NULL,
            aggregationKey TEXT,
            groupType TEXT NOT NULL,
            destinationDirectory TEXT NOT NULL,
            entityPayload BLOB NOT NULL,
            state TEXT NOT NULL,
            interruptionReason TEXT,
            mode TEXT NOT NULL,
            weight INTEGER NOT NULL,
            resolveCount INTEGER NOT NULL,
            lastError TEXT,
            manifest TEXT,
            manifestRevision INTEGER NOT NULL,
            addedAt REAL NOT NULL,
            UNIQUE (entityType, entityKey, variantKey)
        );
        CREATE TABLE segments (
            taskId INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
            outputIndex INTEGER NOT NULL,
            segmentIndex INTEGER NOT NULL,
            isDone INTEGER NOT NULL,
            bytesWritten INTEGER NOT NULL,
            etag TEXT,
            lastModified TEXT,
            lastModifiedIsStrong INTEGER,
            cacheKey TEXT,
            PRIMARY KEY (taskId, outputIndex, segmentIndex)
        ) WITHOUT ROWID;
        """

    /// Writes a v1 state file at `path` (in WAL mode, as v1 wrote it) holding `tasks`, each
    /// with two rows of segment progress, and returns what a v2 store must load from it.
    static func makeV1File(_ path: String, tasks: [StoredTask]) throws -> [StoredTask] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        func json<Value: Encodable>(_ value: Value?) throws -> String? {
            try value.map { String(decoding: try encoder.encode($0), as: UTF8.self) }
        }
        let pool = try DatabasePool(path: path)
        try pool.write { db in
            try db.execute(sql: Self.v1Schema)
            // Rows out of order of their ids, so the file's order (not the insertion of this fixture) counts.
            for (index, task) in tasks.enumerated().reversed() {
                let record = task.task
                var reason: String?
                if case .interrupted(let why) = record.state { reason = why.rawValue }
                let rowID = Int64(index + 1) * 10
                try db.execute(
                    sql: """
                        INSERT INTO tasks (
                            id, entityType, entityKey, variantKey, sequence, title, aggregationKey, groupType,
                            destinationDirectory, entityPayload, state, interruptionReason, mode, weight, resolveCount,
                            lastError, manifest, manifestRevision, addedAt)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        rowID, record.id.entityType, record.id.entityKey, record.id.variantKey, record.sequence,
                        task.entity.title, task.entity.aggregationKey, task.entity.groupType,
                        task.entity.destinationDirectory, task.entity.payload, record.state.kind.rawValue, reason,
                        record.mode.rawValue, record.weight, record.resolveCount, try json(record.lastError),
                        try json(record.manifest), record.manifestRevision, record.addedAt.timeIntervalSinceReferenceDate,
                    ])
                try db.execute(
                    sql: """
                        INSERT INTO segments (taskId, outputIndex, segmentIndex, isDone, bytesWritten, etag, lastModified, lastModifiedIsStrong, cacheKey)
                        VALUES (?, 0, 0, 1, 1000, '"abc#1"', 'Tue, 15 Nov 1994 12:45:26 GMT', 0, 'sha256:ab#0/ü'),
                               (?, 0, 1, 0, 512, NULL, NULL, NULL, NULL)
                        """,
                    arguments: [rowID, rowID])
            }
        }
        try pool.close()
        return migrated(tasks)
    }

    /// What a store loads of `tasks` written to a v1 file: no progress summary, no total.
    static func migrated(_ tasks: [StoredTask]) -> [StoredTask] {
        tasks.map { task in
            var loaded = task
            loaded.task.bytesDone = 0
            loaded.task.segmentsDone = 0
            loaded.task.bytesTotal = nil
            return loaded
        }
    }

    @Test func theHandWrittenV1SchemaIsTheOneMigrationV1Creates() throws {
        // Guards the fixture above (and that the shipped migration "v1" was not changed).
        func schema(_ db: Database) throws -> [[String?]] {
            try Row.fetchAll(db, sql: "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").map { row -> [String?] in
                let type: String? = row["type"], name: String? = row["name"], table: String? = row["tbl_name"], sql: String? = row["sql"]
                let normalized = sql.map {
                    $0.split(whereSeparator: \.isWhitespace).joined(separator: " ").replacingOccurrences(of: "IF NOT EXISTS ", with: "")
                }
                return [type, name, table, normalized]
            }
        }
        let byHand = try DatabaseQueue()
        try byHand.write { db in try db.execute(sql: Self.v1Schema) }
        let migrated = try DatabaseQueue()
        try SQLiteDownloadStore.migrator.migrate(migrated, upTo: "v1")
        let expected = try migrated.read { db in try schema(db) }
        #expect(try byHand.read { db in try schema(db) } == expected)
        #expect(expected.contains { $0[1] == "segments" })
        #expect(try byHand.read { db in try Int32.fetchOne(db, sql: "PRAGMA application_id") } == SQLiteDownloadStore.applicationID)
        #expect(try byHand.read { db in try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations") } == ["v1"])
    }

    /// Three tasks of a v1 file: a plain one, an interrupted one with every field, a failed one.
    static func v1Tasks() throws -> [StoredTask] {
        var interrupted = try S.richTask(S.id("cid:7", variant: "720p"), sequence: 3)
        interrupted.task.bytesDone = 0
        interrupted.task.segmentsDone = 0
        interrupted.task.bytesTotal = nil
        var failed = S.task(S.id("failed"), sequence: 2)
        failed.task.state = .failed
        failed.task.lastError = StoredError(DownloadError(.httpStatus, "gone", url: "https://example.com/x", httpStatus: 410))
        return [S.task(S.id("plain"), sequence: 1), interrupted, failed]
    }

    @Test func aV1FileWithSegmentProgressIsMigratedAndItsTasksLoad() async throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        let expected = try Self.makeV1File(path, tasks: try Self.v1Tasks())
        let neighbour = fileBytes(directory.file("movie.mp4"))

        // The store that opens the file migrates it. (It is not asked to load here: see
        // `theStoreThatMigratesAV1FileLoadsItsTasksRightAway`, which runs that in a child process.)
        do { _ = try SQLiteDownloadStore(path: path) }
        do {
            let queue = try DatabaseQueue(path: path)
            defer { try? queue.close() }
            try await queue.read { db in
                let migrations = try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
                #expect(migrations == ["v1", "v2", "v3"])
                let hasSegments = try db.tableExists("segments")
                #expect(!hasSegments)
                let columns = try db.columns(in: "tasks").map(\.name)
                #expect(columns.suffix(3) == ["bytesDone", "segmentsDone", "bytesTotal"])
                #expect(columns.count == 22)
                let rowIDs = try Int64.fetchAll(db, sql: "SELECT id FROM tasks ORDER BY id")
                #expect(rowIDs == [10, 20, 30])
            }
        }
        #expect(fileBytes(directory.file("movie.mp4")) == neighbour)

        let store = try SQLiteDownloadStore(path: path)
        let result = try await store.load()
        #expect(result.tasks == expected)
        #expect(result.unreadable.isEmpty)
        #expect(result.tasks.allSatisfy { $0.task.bytesDone == 0 && $0.task.segmentsDone == 0 })
        #expect(result.tasks.map(\.task.state) == [.idle, .interrupted(.diskSpace), .failed])

        // The migrated tasks take the new fields and keep their place.
        var record = expected[1].task
        record.bytesDone = 123_456
        record.segmentsDone = 3
        let added = S.task(S.id("added"), bytesDone: 1)
        try await store.apply([.update(record), .insert(added)])
        var now = expected
        now[1].task = record
        now.append(added)
        #expect(try await store.loadAll() == now)
        // And a later opening has nothing left to migrate.
        #expect(try await SQLiteDownloadStore(path: path).loadAll() == now)
    }

    @Test func theStoreThatMigratesAV1FileLoadsItsTasksRightAway() async throws {
        // In a child process, because a failure here has been a crash: a reader connection that
        // saw the v1 schema before the migration gets `SELECT *` rows whose columns GRDB does not
        // know, and reading `bytesDone` traps.
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("tessera.sqlite")
        _ = try Self.makeV1File(path, tasks: try Self.v1Tasks())
        // (Only the path is captured: what the child decodes of its captures it keeps to its
        // exit, where LeakSanitizer would count it.)
        await #expect(processExitsWith: .success) { [path = path as String] in
            let expected = SQLiteDownloadStoreTests.migrated(try SQLiteDownloadStoreTests.v1Tasks())
            let store = try SQLiteDownloadStore(path: path)
            let loaded = try await store.loadAll()
            guard loaded == expected else { exit(3) }
            // A second load and a write on the same store work too.
            try await store.apply([.remove(expected[0].task.id)])
            guard try await store.loadAll() == Array(expected.dropFirst()) else { exit(4) }
        }
    }

    /// A file of migration "v2" (before tasks kept their total): it opens, gains the column, its
    /// tasks load with no total, and a total written from then on reads back.
    @Test func aV2FileGainsTheTotalAndItsTasksLoad() async throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        let task = S.task(S.id("kept"), sequence: 4, bytesDone: 1234, segmentsDone: 1)
        do {
            let pool = try DatabasePool(path: path)
            try SQLiteDownloadStore.migrator.migrate(pool, upTo: "v2")
            try await pool.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO tasks (
                            entityType, entityKey, variantKey, sequence, title, aggregationKey, groupType,
                            destinationDirectory, entityPayload, state, interruptionReason, mode, weight, resolveCount,
                            lastError, manifest, manifestRevision, addedAt, bytesDone, segmentsDone)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, NULL, NULL, ?, ?, ?, ?)
                        """,
                    arguments: [
                        task.task.id.entityType, task.task.id.entityKey, task.task.id.variantKey, task.task.sequence,
                        task.entity.title, task.entity.aggregationKey, task.entity.groupType, task.entity.destinationDirectory,
                        task.entity.payload, task.task.state.kind.rawValue, task.task.mode.rawValue, task.task.weight,
                        task.task.resolveCount, task.task.manifestRevision, task.task.addedAt.timeIntervalSinceReferenceDate,
                        task.task.bytesDone, task.task.segmentsDone,
                    ])
            }
            try pool.close()
        }
        let store = try SQLiteDownloadStore(path: path)
        #expect(try await store.loadAll() == [task])
        var record = task.task
        record.bytesTotal = 5678
        try await store.apply([.update(record)])
        #expect(try await SQLiteDownloadStore(path: path).loadAll().map(\.task.bytesTotal) == [5678])
        #expect(fileBytes(directory.file("movie.mp4")).count == 4096)
    }

    @Test func anEmptyV1FileIsMigratedToo() async throws {
        let (directory, path) = directoryWithNeighbour()
        defer { directory.cleanUp() }
        #expect(try Self.makeV1File(path, tasks: []).isEmpty)
        let store = try SQLiteDownloadStore(path: path)
        #expect(try await store.loadAll().isEmpty)
        try await store.apply([.insert(S.task(S.id("first"), bytesDone: 7, segmentsDone: 1))])
        #expect(try await store.loadAll() == [S.task(S.id("first"), bytesDone: 7, segmentsDone: 1)])
    }

    // MARK: Damaged rows

    @Test func damagedRowsAreSkippedReportedAndLeftInPlace() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("tessera.sqlite")
        let store = try SQLiteDownloadStore(path: path)
        let ids = (0..<7).map { S.id("t\($0)", variant: "v#\($0)") }
        var tasks: [StoredTask] = []
        for (index, id) in ids.enumerated() {
            var task = try S.richTask(id, sequence: index)
            task.task.manifestRevision = 1
            tasks.append(task)
        }
        try await store.apply(tasks.map { .insert($0) })
        let damage = [
            "UPDATE tasks SET manifest = '{\"outputs\": [' WHERE entityKey = 't1'",
            "UPDATE tasks SET state = 'exploded' WHERE entityKey = 't2'",
            "UPDATE tasks SET bytesDone = 'many' WHERE entityKey = 't3'",
            "UPDATE tasks SET title = x'00ff', lastError = 'null' WHERE entityKey = 't4'",
            "UPDATE tasks SET segmentsDone = 2.5 WHERE entityKey = 't5'",
        ]
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        for sql in damage { try await queue.write { db in try db.execute(sql: sql) } }
        let rawBefore = try queue.read { db in try Row.fetchAll(db, sql: "SELECT * FROM tasks ORDER BY id") }

        let result = try await store.load()
        #expect(result.tasks == [tasks[0], tasks[6]])
        #expect(result.unreadable.map(\.id) == [ids[1], ids[2], ids[3], ids[4], ids[5]])
        #expect(store.unreadableTasks == result.unreadable)
        for (item, hint) in zip(result.unreadable, ["manifest", "exploded", "bytesDone", "title", "segmentsDone"]) {
            #expect(item.error.code == .storeFailure)
            #expect(item.error.message.contains(item.id!.description), "names the task: \(item.error.message)")
            #expect(item.error.message.contains(path), "names the file: \(item.error.message)")
            #expect(item.error.message.contains(hint), "says what is wrong: \(item.error.message)")
            #expect(item.error.message.contains("Add the task again"), "says what to do: \(item.error.message)")
        }
        #expect(try await store.loadAll() == [tasks[0], tasks[6]])
        // Reading changed nothing.
        #expect(try queue.read { db in try Row.fetchAll(db, sql: "SELECT * FROM tasks ORDER BY id") } == rawBefore)

        // Adding a damaged task again repairs it, in its place; removing one deletes it; updating
        // one repairs what the update writes (the state and, with a new revision, the manifest;
        // the progress summary always).
        var record = tasks[2].task
        record.manifestRevision = 2
        tasks[2].task = record
        try await store.apply([.insert(tasks[1]), .remove(ids[3]), .update(record), .update(tasks[5].task)])
        let again = try await store.load()
        #expect(again.tasks == [tasks[0], tasks[1], tasks[2], tasks[5], tasks[6]])
        #expect(again.unreadable.map(\.id) == [ids[4]])
        #expect(store.unreadableTasks == again.unreadable)
    }

    // MARK: Writing

    @Test func updateRewritesTheManifestOnlyWhenItsRevisionChanges() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("tessera.sqlite")
        let store = try SQLiteDownloadStore(path: path)
        let id = S.id("revision")
        var record = S.record(id, manifest: try S.richManifest(title: "first"), manifestRevision: 1)
        try await store.apply([.insert(StoredTask(entity: S.entity(id), task: record))])

        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        func rawManifest() async throws -> String? {
            try await queue.read { db in try String.fetchOne(db, sql: "SELECT manifest FROM tasks") }
        }
        let sentinel = "sentinel: written by the test, not by the store"
        try await queue.write { db in try db.execute(sql: "UPDATE tasks SET manifest = ?", arguments: [sentinel]) }

        // Same revision (even with another manifest in the record): the stored manifest is not
        // touched, but everything else is written.
        record.state = .downloading
        record.weight = 8
        record.bytesDone = 4096
        record.segmentsDone = 2
        record.manifest = try S.richManifest(title: "ignored")
        try await store.apply([.update(record)])
        #expect(try await rawManifest() == sentinel)
        let scalars = try queue.read { db in try Row.fetchOne(db, sql: "SELECT state, weight, bytesDone, segmentsDone FROM tasks") }
        #expect(scalars?["state"] == "downloading")
        #expect(scalars?["weight"] == 8)
        #expect(scalars?["bytesDone"] == 4096)
        #expect(scalars?["segmentsDone"] == 2)

        // A new revision replaces it.
        record.manifest = try S.richManifest(title: "second")
        record.manifestRevision = 2
        try await store.apply([.update(record)])
        let written = try await rawManifest()
        #expect(written != sentinel)
        #expect(written?.contains("second") == true)
        #expect(try await store.loadAll().first?.task == record)

        // A lower revision is a change too (the manager only counts up, but the store does not guess).
        record.manifest = nil
        record.manifestRevision = 0
        try await store.apply([.update(record)])
        #expect(try await rawManifest() == nil)
    }

    /// The store remembers the manifest revision it wrote for each task, to write a changed
    /// manifest in one statement; the file, not that memory, decides: a revision written by
    /// another store on the same file is found and replaced.
    @Test func aStoresMemoryOfWrittenRevisionsNeverOverridesTheFile() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("tessera.sqlite")
        let first = try SQLiteDownloadStore(path: path)
        let second = try SQLiteDownloadStore(path: path)
        let id = S.id("shared")
        var record = S.record(id, manifest: try S.richManifest(title: "first"), manifestRevision: 1)
        try await first.apply([.insert(StoredTask(entity: S.entity(id), task: record))])

        // The second store writes revision 2 behind the first one's back.
        var other = record
        other.manifest = try S.richManifest(title: "second")
        other.manifestRevision = 2
        try await second.apply([.update(other)])
        #expect(try await first.loadAll().first?.task == other)

        // The first store still remembers revision 1 as written: its update of revision 1 finds
        // revision 2 in the file and writes its own manifest with the fields.
        record.state = .downloading
        record.bytesDone = 10
        try await first.apply([.update(record)])
        #expect(try await second.loadAll().first?.task == record)

        // And a revision it never wrote (1 -> 3) goes with its manifest at once.
        record.manifest = try S.richManifest(title: "third")
        record.manifestRevision = 3
        try await first.apply([.update(record)])
        #expect(try await second.loadAll().first?.task == record)
    }

    @Test func aBatchThatFailsInsideTheTransactionIsRolledBack() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("tessera.sqlite")
        let store = try SQLiteDownloadStore(path: path)
        let a = try S.richTask(S.id("a")), b = S.task(S.id("b"), bytesDone: 3)
        try await store.apply([.insert(a), .insert(b)])
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        func rawTasks() throws -> [Row] { try queue.read { db in try Row.fetchAll(db, sql: "SELECT * FROM tasks ORDER BY id") } }
        let rawBefore = try rawTasks()

        // The database itself refuses the fourth change, after three were executed.
        try await queue.write { db in
            try db.execute(sql: """
                CREATE TRIGGER poison BEFORE INSERT ON tasks WHEN NEW.entityKey = 'poison'
                BEGIN SELECT RAISE(ABORT, 'poisoned by the test'); END
                """)
        }
        var aRecord = a.task
        aRecord.state = .completed
        aRecord.bytesDone = 42
        let batch: [StoreChange] = [
            .update(aRecord), .remove(b.task.id), .insert(S.task(S.id("c"))), .insert(S.task(S.id("poison"))),
            .insert(S.task(S.id("d"))),
        ]
        let error = await #expect(throws: DownloadError.self) { try await store.apply(batch) }
        #expect(error?.code == .storeFailure)
        #expect(error?.message.contains(path) == true, "names the file: \(error?.message ?? "")")
        #expect(error?.message.contains("poisoned by the test") == true, "gives SQLite's reason: \(error?.message ?? "")")
        #expect(try rawTasks() == rawBefore)
        #expect(try await store.loadAll() == [a, b])

        // A manifest that cannot be encoded (found only inside the transaction, as an update with
        // a new revision encodes its manifest there) rolls back the changes before it too.
        var unencodable = aRecord
        unencodable.manifest = DownloadManifest(outputs: [], expiresAt: Date(timeIntervalSinceReferenceDate: .nan))
        unencodable.manifestRevision += 1
        let encodingError = await #expect(throws: DownloadError.self) {
            try await store.apply([.insert(S.task(S.id("c"))), .remove(b.task.id), .update(unencodable)])
        }
        #expect(encodingError?.code == .storeFailure)
        #expect(encodingError?.message.contains("manifest of task fixture:a") == true, "\(encodingError?.message ?? "")")
        #expect(try rawTasks() == rawBefore)
        #expect(try await store.loadAll() == [a, b])

        // Without the trigger the same batch is written in full.
        try await queue.write { db in try db.execute(sql: "DROP TRIGGER poison") }
        try await store.apply(batch)
        #expect(try await store.loadAll() == [StoredTask(entity: a.entity, task: aRecord), S.task(S.id("c")), S.task(S.id("poison")), S.task(S.id("d"))])
    }

    @Test func removeAndIgnoredUpdatesLeaveNoRowsBehind() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let path = directory.file("tessera.sqlite")
        let store = try SQLiteDownloadStore(path: path)
        try await store.apply([.insert(try S.richTask(S.id("a"))), .insert(try S.richTask(S.id("b")))])
        try await store.apply([.remove(S.id("a")), .update(S.record(S.id("a"), state: .failed)), .update(S.record(S.id("ghost")))])
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        let keys = try await queue.read { db in try String.fetchAll(db, sql: "SELECT entityKey FROM tasks ORDER BY id") }
        #expect(keys == ["b"])
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
            try await store.apply([.insert(task)])
            expected.append(task)
        }
        expected[0].task.bytesDone = 77
        expected[0].task.segmentsDone = 7
        try await store.apply([.update(expected[0].task), .remove(expected[19].task.id)])
        expected.removeLast()
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
        try await first.apply([.insert(S.task(S.id("one")))])
        try await second.apply([.update(S.record(S.id("one"), state: .downloading, bytesDone: 5, segmentsDone: 1)), .insert(S.task(S.id("two")))])
        let loaded = try await first.loadAll()
        #expect(loaded.map(\.task.id) == [S.id("one"), S.id("two")])
        #expect(loaded.first?.task == S.record(S.id("one"), state: .downloading, bytesDone: 5, segmentsDone: 1))
        try await first.apply([.remove(S.id("two"))])
        #expect(try await second.loadAll().map(\.task.id) == [S.id("one")])
    }
}

/// The store's speed with many tasks: wall clocks, so measured in the timing phase of `make test`
/// (one suite at a time), not beside the rest of the suite.
@Suite struct SQLiteDownloadStoreTimingTests {
    typealias S = StoreSamples

    @Test func tenThousandChangesInOneBatchAreOneQuickTransaction() async throws {
        let directory = TemporaryDirectory("tessera-sqlite")
        defer { directory.cleanUp() }
        let store = try SQLiteDownloadStore(path: directory.file("tessera.sqlite"))
        let ids = (0..<1000).map { S.id("bulk\($0)") }
        let clock = ContinuousClock()
        let insertTime = try await clock.measure {
            try await store.apply(ids.enumerated().map { .insert(S.task($1, sequence: $0)) })
        }
        // Ten ticks' worth of progress for every task, the last one of each winning.
        let updates: [StoreChange] = (0..<10_000).map { index in
            .update(S.record(ids[index % 1000], state: .downloading, sequence: index % 1000, bytesDone: Int64(index), segmentsDone: index / 1000))
        }
        let updateTime = try await clock.measure { try await store.apply(updates) }
        let loadTime = try await clock.measure {
            let loaded = try await store.loadAll()
            #expect(loaded.map(\.task.id) == ids)
            #expect(loaded.map(\.task.bytesDone) == (0..<1000).map { Int64(9000 + $0) })
            #expect(loaded.allSatisfy { $0.task.segmentsDone == 9 && $0.task.state == .downloading })
        }
        print("SQLiteDownloadStore: 1,000 inserts in \(insertTime), 10,000 updates in \(updateTime), loaded in \(loadTime)")
        // Generous bounds for a debug build on a busy machine (about 0.4 s and 0.9 s when measured).
        #expect(insertTime < .seconds(5))
        #expect(updateTime < .seconds(5))
    }
}
