import Foundation
import GRDB

// The database layout of ``SQLiteDownloadStore``, its migrations, and the checks that keep it
// away from files that are not its own.
//
// Layout (migration "v1"):
//
//     tasks     one row per task: its identity (UNIQUE), insertion order (the INTEGER PRIMARY KEY,
//               so `ORDER BY id` is insertion order and an upsert keeps a task's place), the
//               entity record as columns (payload as a BLOB), the task record as columns,
//               `lastError` and `manifest` as JSON text, and `manifestRevision`.
//     segments  one row per segment with progress, keyed (taskId, outputIndex, segmentIndex),
//               WITHOUT ROWID; `taskId` references tasks(id) ON DELETE CASCADE. The primary key
//               is also the index the cascade and per-task deletes use; no other index is kept,
//               so progress writes (the hot path) stay cheap.
//
// Migration "v2" drops `segments` (what is on disk is each task's journal now, beside its
// files) and adds `bytesDone` and `segmentsDone` to `tasks`, a summary for showing tasks that
// are not running.
//
// Migration "v3" adds `bytesTotal` (NULL until a task's size is known exactly): a plain file's
// size is only known from its server's answer, and a task that is not running reports it from
// here. Additive: a file of "v2" opens and its tasks load with no total, as before.
//
// The header's `application_id` marks the file as Tessera's, so a database of another
// application is recognised even when its tables happen to have the same names.

extension SQLiteDownloadStore {
    /// `PRAGMA application_id` of a Tessera state file: "TSSR" in ASCII.
    static let applicationID: Int32 = 0x5453_5352

    /// The tables a Tessera state file may hold (GRDB keeps its migration log in `grdb_migrations`).
    static let ownTables: Set<String> = ["tasks", "segments", "grdb_migrations"]

    /// The migrations, oldest first. A shipped migration is never changed; later versions add
    /// new ones ("v2", …). A file that lists a migration this version does not know was written
    /// by a newer Tessera and is refused.
    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: "PRAGMA application_id = \(applicationID)")
            try db.execute(
                sql: """
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
                    """)
        }
        migrator.registerMigration("v2") { db in
            try db.execute(
                sql: """
                    DROP TABLE segments;
                    ALTER TABLE tasks ADD COLUMN bytesDone INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE tasks ADD COLUMN segmentsDone INTEGER NOT NULL DEFAULT 0;
                    """)
        }
        migrator.registerMigration("v3") { db in
            try db.execute(sql: "ALTER TABLE tasks ADD COLUMN bytesTotal INTEGER")
        }
        return migrator
    }()

    /// What an existing file turned out to be.
    enum FileKind: Equatable {
        /// No tables yet (a new or empty database): it becomes a Tessera state file.
        case empty
        /// A Tessera state file this version can use (possibly needing migrations).
        case compatible
    }

    /// Decides from the file's header and schema whether it may be used; throws an actionable
    /// ``DownloadError/Code/storeFailure`` for a file that is not an SQLite database, belongs to
    /// another application, was written by a newer Tessera, or is damaged. Never writes to the
    /// file or creates files next to it.
    static func inspectExistingFile(at path: String) throws(DownloadError) -> FileKind {
        // Only a regular file is read (a FIFO would block, a device is never ours).
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw DownloadError(
                .storeFailure,
                "The download state file \(path) is not a regular file; point Tessera at another state file.")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw DownloadError(
                .storeFailure,
                "The download state file \(path) cannot be read (permission denied or not a regular file); "
                    + "check its permissions, or point Tessera at another state file.")
        }
        let header: Data
        do {
            header = try handle.read(upToCount: 100) ?? Data()
            try handle.close()
        } catch {
            throw DownloadError(
                .storeFailure,
                "The download state file \(path) cannot be read (\(error)); check the disk and the file's permissions.")
        }
        // SQLite treats an empty file as an empty database.
        if header.isEmpty { return .empty }
        guard header.count == 100, header.starts(with: Array("SQLite format 3\0".utf8)) else {
            throw DownloadError(
                .storeFailure,
                "The download state file \(path) is not an SQLite database (it does not start with the SQLite header); "
                    + "Tessera left it untouched. Move it away if it is not needed, or point Tessera at another state file.")
        }
        // A real database's header has fixed fields (page size a power of two from 512 to
        // 65536, stored as 1 for 65536; payload fractions 64, 32, 32): without them the file is
        // damaged or only looks like SQLite, whatever its application ID says.
        let pageSize = Int(header[16]) << 8 | Int(header[17])
        let validPageSize = pageSize == 1 || (pageSize >= 512 && pageSize <= 32768 && pageSize & (pageSize - 1) == 0)
        guard validPageSize, header[21] == 64, header[22] == 32, header[23] == 32 else {
            throw DownloadError(
                .storeFailure,
                "The download state file \(path) starts like an SQLite database but its header is damaged; "
                    + "Tessera left it untouched. Move it away (its tasks are lost) or restore a backup, or point Tessera at another state file.")
        }
        // Bytes 68-71: the application ID, big-endian.
        let applicationID = header[68..<72].reduce(Int32(0)) { $0 << 8 | Int32($1) }
        if applicationID != 0 && applicationID != Self.applicationID {
            throw foreignFile(path, reason: "its application ID is \(String(format: "0x%08x", UInt32(bitPattern: applicationID))), not Tessera's")
        }
        // A file marked as Tessera's may be in use by another process, whose checkpoints can
        // race with this lock-free read: try again before calling it damaged.
        let attempts = applicationID == Self.applicationID ? 3 : 1
        var failure: any Error = DownloadError(.storeFailure, "")
        for attempt in 1...attempts {
            do {
                let queue = try DatabaseQueue(path: inspectionPath(path), configuration: inspectionConfiguration())
                defer { try? queue.close() }
                return try queue.read { db throws in try classify(db, path: path) }
            } catch let error as DownloadError {
                throw error
            } catch {
                failure = error
                if attempt < attempts { usleep(50_000) }
            }
        }
        throw DownloadError(
            .storeFailure,
            "The download state file \(path) could not be read as an SQLite database (\(describe(failure))); "
                + "Tessera left it untouched. If it is damaged, move it away (its tasks are lost) or restore a backup.")
    }

    /// Checks an open database; see ``inspectExistingFile(at:)``.
    static func classify(_ db: Database, path: String) throws -> FileKind {
        let applicationID = try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0
        let tables = try String.fetchSet(
            db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
        if applicationID == 0 {
            if tables.isEmpty { return .empty }
            throw foreignFile(path, reason: "its tables \(tables.sorted().joined(separator: ", ")) are not Tessera's")
        }
        guard applicationID == Self.applicationID else {
            throw foreignFile(path, reason: "its application ID is \(String(format: "0x%08x", UInt32(bitPattern: applicationID))), not Tessera's")
        }
        let unknownTables = tables.subtracting(ownTables)
        let applied = try migrator.appliedIdentifiers(db)
        let unknownMigrations = applied.subtracting(migrator.migrations)
        if !unknownMigrations.isEmpty || !unknownTables.isEmpty {
            let what = unknownMigrations.isEmpty
                ? "tables this version does not know: \(unknownTables.sorted().joined(separator: ", "))"
                : "schema versions this version does not know: \(unknownMigrations.sorted().joined(separator: ", "))"
            throw DownloadError(
                .storeFailure,
                "The download state file \(path) was written by a newer version of Tessera (it has \(what)); "
                    + "Tessera left it untouched. Upgrade Tessera, or point this version at another state file.")
        }
        return .compatible
    }

    private static func foreignFile(_ path: String, reason: String) -> DownloadError {
        DownloadError(
            .storeFailure,
            "The file \(path) is an SQLite database of another application, not a Tessera state file (\(reason)); "
                + "Tessera left it untouched. Point Tessera at another state file, or move this one away.")
    }

    /// Read-only, and `immutable` where the SQLite library takes URI file names: no lock, no
    /// journal, no `-wal` or `-shm` file is created next to a file that may not be ours.
    private static func inspectionConfiguration() -> Configuration {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "Tessera.SQLiteDownloadStore.inspection"
        return configuration
    }

    private static func inspectionPath(_ path: String) -> String {
        guard sqliteAcceptsURIs else { return path }
        var escaped = ""
        for character in path.unicodeScalars {
            switch character {
            case "%": escaped += "%25"
            case "?": escaped += "%3f"
            case "#": escaped += "%23"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return "file:\(escaped)?immutable=1"
    }

    /// Whether the linked SQLite library was built to accept URI file names (`SQLITE_USE_URI`).
    private static let sqliteAcceptsURIs: Bool = {
        guard let queue = try? DatabaseQueue() else { return false }
        return (try? queue.read { db in try Bool.fetchOne(db, sql: "SELECT sqlite_compileoption_used('USE_URI')") }) == true
    }()

    /// A short description of an SQLite (or other) error, with what to do about it.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DatabaseError else { return "\(error)" }
        var text = "SQLite error \(error.resultCode.rawValue)"
        if let message = error.message { text += ": \(message)" }
        switch error.resultCode {
        case .SQLITE_FULL:
            text += "; the disk is full: free some space"
        case .SQLITE_READONLY:
            text += "; the file or its directory is read-only: check the permissions"
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            text += "; another process keeps the file locked: stop other Tessera processes that use it"
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            text += "; the file is damaged: move it away (its tasks are lost) or restore a backup"
        case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_AUTH:
            text += "; the file cannot be opened: check that it and its directory exist and are accessible"
        case .SQLITE_IOERR:
            text += "; the disk reported an I/O error: check the disk"
        default:
            break
        }
        return text
    }
}

// MARK: - Strict row reading

/// Reads a row's columns with their exact storage class: a damaged value becomes an error
/// (never a crash, never a silent conversion of text into 0).
struct StrictRow {
    let row: Row

    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    private func value(_ column: String) -> DatabaseValue {
        // A column the row does not have reads as NULL, which every reader then refuses.
        guard row.hasColumn(column) else { return .null }
        return row[column] as DatabaseValue
    }

    private func problem(_ column: String, expected: String) -> Problem {
        let found: String
        switch value(column).storage {
        case .null: found = "NULL"
        case .int64: found = "an integer"
        case .double: found = "a real number"
        case .string: found = "text"
        case .blob: found = "a blob"
        }
        return Problem(description: "column \(column) holds \(found) where \(expected) was expected")
    }

    func int64(_ column: String) throws(Problem) -> Int64 {
        guard case .int64(let number) = value(column).storage else { throw problem(column, expected: "an integer") }
        return number
    }

    func int(_ column: String) throws(Problem) -> Int {
        let number = try int64(column)
        guard let small = Int(exactly: number) else { throw problem(column, expected: "an integer of this platform's size") }
        return small
    }

    func optionalInt64(_ column: String) throws(Problem) -> Int64? {
        if value(column).isNull { return nil }
        return try int64(column)
    }

    func optionalInt(_ column: String) throws(Problem) -> Int? {
        if value(column).isNull { return nil }
        return try int(column)
    }

    func bool(_ column: String) throws(Problem) -> Bool {
        switch try int64(column) {
        case 0: return false
        case 1: return true
        default: throw problem(column, expected: "0 or 1")
        }
    }

    func optionalBool(_ column: String) throws(Problem) -> Bool? {
        if value(column).isNull { return nil }
        return try bool(column)
    }

    func double(_ column: String) throws(Problem) -> Double {
        switch value(column).storage {
        case .double(let number): return number
        case .int64(let number): return Double(number)
        default: throw problem(column, expected: "a number")
        }
    }

    func string(_ column: String) throws(Problem) -> String {
        guard case .string(let text) = value(column).storage else { throw problem(column, expected: "text") }
        return text
    }

    func optionalString(_ column: String) throws(Problem) -> String? {
        if value(column).isNull { return nil }
        return try string(column)
    }

    /// A blob, or text as UTF-8.
    func data(_ column: String) throws(Problem) -> Data {
        switch value(column).storage {
        case .blob(let data): return data
        case .string(let text): return Data(text.utf8)
        default: throw problem(column, expected: "a blob")
        }
    }

    func optionalData(_ column: String) throws(Problem) -> Data? {
        if value(column).isNull { return nil }
        return try data(column)
    }
}
