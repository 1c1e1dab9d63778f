import Foundation
import GRDB
import Logging

/// The default persistent ``DownloadStore``: one SQLite file (through GRDB), in WAL mode, that
/// survives restarts and crashes.
///
/// Every batch (``apply(_:)``) is one transaction, so a crash leaves either all of it or none;
/// a manager writes one batch per tick, however many tasks changed. An update rewrites the
/// manifest (which can be large) only when ``TaskRecord/manifestRevision`` differs from the
/// stored one. Commits use `synchronous = NORMAL` in WAL mode: a killed process loses nothing
/// committed, a power loss at most the last commits.
///
/// Opening is careful with what it finds at the path: a file that is not an SQLite database,
/// an SQLite database of another application, or a state file written by a newer Tessera is
/// refused with a ``DownloadError/Code/storeFailure`` that names the file and says what to do;
/// such a file, and every other file in its directory, is left exactly as it was. The store
/// never deletes downloaded files, nor its own file.
///
/// A task whose row cannot be read back (a value of the wrong type, JSON that no longer
/// decodes) does not stop the others from loading: ``loadAll()`` skips it, leaves its row as it
/// is, logs a warning and lists it in ``unreadableTasks``. Adding the same task again replaces
/// the damaged row, and removing it deletes it.
public final class SQLiteDownloadStore: DownloadStore {
    /// A stored task that could not be read back.
    public struct UnreadableTask: Sendable, Equatable, CustomStringConvertible {
        /// The task's identity, when at least that could be read.
        public var id: DownloadTaskID?
        /// The row's number in the `tasks` table.
        public var row: Int64
        /// What is wrong with it, as a ``DownloadError/Code/storeFailure``.
        public var error: DownloadError

        /// Describes a task that could not be read.
        public init(id: DownloadTaskID?, row: Int64, error: DownloadError) {
            self.id = id
            self.row = row
            self.error = error
        }

        /// The error's message: which task, in which file, what is wrong and what to do.
        public var description: String { error.message }

        /// Equal when the task, the row and the error's code and message are.
        public static func == (lhs: UnreadableTask, rhs: UnreadableTask) -> Bool {
            lhs.id == rhs.id && lhs.row == rhs.row && lhs.error.code == rhs.error.code && lhs.error.message == rhs.error.message
        }
    }

    /// What ``load()`` found: the tasks that could be read, and those that could not.
    public struct LoadResult: Sendable {
        /// The readable tasks, in insertion order.
        public var tasks: [StoredTask]
        /// The tasks that were skipped because their rows are damaged.
        public var unreadable: [UnreadableTask]
    }

    /// The database file's path (absolute).
    public let path: String

    private let pool: DatabasePool
    private let logger: Logger
    private let lastUnreadable = Locked<[UnreadableTask]>([])
    /// The manifest revision this store last wrote for each task it wrote (a hint, never the
    /// truth: an update that finds another revision stored writes its manifest anyway). An update
    /// whose manifest changed since goes straight to the statement that writes it, instead of
    /// first trying the one that keeps it and finding no row (a third of the statements of a
    /// list of plain URLs: inserted without a manifest, then named).
    private let writtenRevisions = Locked<[DownloadTaskID: Int]>([:])

    /// Where the state lives by default: `$XDG_DATA_HOME/tessera/tessera.sqlite`, or
    /// `~/.local/share/tessera/tessera.sqlite` when `XDG_DATA_HOME` is unset, empty or not an
    /// absolute path (the XDG Base Directory specification says to ignore relative paths).
    public static var defaultPath: String {
        defaultPath(environment: ProcessInfo.processInfo.environment)
    }

    /// ``defaultPath`` for the given environment variables.
    static func defaultPath(environment: [String: String]) -> String {
        let base: String
        if let dataHome = environment["XDG_DATA_HOME"], dataHome.hasPrefix("/") {
            base = dataHome
        } else {
            let home = environment["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? NSHomeDirectory()
            base = ((home as NSString).appendingPathComponent(".local") as NSString).appendingPathComponent("share")
        }
        return ((base as NSString).appendingPathComponent("tessera") as NSString).appendingPathComponent("tessera.sqlite")
    }

    /// Opens the state file at `path`, or creates it (and its parent directories).
    ///
    /// - Parameters:
    ///   - path: The database file; a relative path is taken from the current directory.
    ///   - logger: Where warnings about unreadable tasks go.
    /// - Throws: ``DownloadError`` with ``DownloadError/Code/storeFailure`` when the directory
    ///   cannot be created, or the file cannot be opened, is not an SQLite database, belongs to
    ///   another application, was written by a newer Tessera, or is damaged. The file is then
    ///   left untouched.
    public init(path: String, logger: Logger = Logger(label: "tessera.store")) throws(DownloadError) {
        let path = URL(fileURLWithPath: path).standardizedFileURL.path
        self.path = path
        self.logger = logger

        let fileManager = FileManager.default
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try fileManager.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw DownloadError(
                .storeFailure,
                "The directory \(directory) for the download state file cannot be created (\(Self.systemReason(error))); "
                    + "check its permissions, or point Tessera at another state file.")
        }
        var isDirectory: ObjCBool = false
        if fileManager.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard !isDirectory.boolValue else {
                throw DownloadError(
                    .storeFailure,
                    "The download state file \(path) is a directory; point Tessera at a file path instead.")
            }
            _ = try Self.inspectExistingFile(at: path)
        }

        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.label = "Tessera.SQLiteDownloadStore"
        // Another process using the same file (a second `tessera`) waits instead of failing.
        configuration.busyMode = .timeout(10)
        configuration.maximumReaderCount = 4
        // In WAL mode, NORMAL survives a killed process (only a power loss may lose the last
        // commits) and spares an fsync per commit; the journals beside the files hold the bytes.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            // The same checks again, now under the pool (a write-ahead log may have held more),
            // on the writer's connection, in one read transaction: no reader is opened (and
            // closed again after the migration) for it at every start.
            _ = try pool.writeWithoutTransaction { db in try Self.inReadTransaction(db) { try Self.classify($0, path: path) } }
            try Self.migrator.migrate(pool)
            // Readers opened before the migration would still know the old schema: none is kept.
            pool.invalidateReadOnlyConnections()
        } catch let error as DownloadError {
            throw error
        } catch {
            throw DownloadError(
                .storeFailure,
                "The download state file \(path) cannot be opened (\(Self.describe(error))). "
                    + "Check the file and its directory, or point Tessera at another state file.")
        }
    }

    /// The operating system's reason behind a Foundation file error ("Not a directory"), not
    /// Foundation's generic "The operation could not be completed".
    private static func systemReason(_ error: any Error) -> String {
        guard let underlying = (error as? CocoaError)?.underlying.map({ $0 as NSError }) else {
            return error.localizedDescription
        }
        if underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        return underlying.localizedDescription
    }

    /// The tasks the last ``loadAll()`` or ``load()`` skipped because their rows are damaged.
    public var unreadableTasks: [UnreadableTask] {
        lastUnreadable.withLock { $0 }
    }

    // MARK: - DownloadStore

    /// Every readable task, with its entity, in insertion order.
    ///
    /// Tasks whose rows are damaged are skipped (see ``load()`` and ``unreadableTasks``);
    /// a failure to read the file at all throws.
    public func loadAll() async throws(DownloadError) -> [StoredTask] {
        try await load().tasks
    }

    /// Every task, in insertion order, and the damaged ones that had to be skipped. Each
    /// skipped task is also logged as a warning and kept in ``unreadableTasks``; its row stays
    /// in the file, untouched.
    public func load() async throws(DownloadError) -> LoadResult {
        let path = self.path
        // On the writer's connection, in one read transaction (a snapshot, as a reader's would
        // be; no write lock is taken, so another process writing the file is not waited for):
        // the tasks are read once, at a start, where a reader's connection would be opened for
        // them (about a millisecond before the first download).
        let result = try await access("read the tasks") { [pool] () async throws -> LoadResult in
            try await pool.writeWithoutTransaction { db in try Self.inReadTransaction(db) { try Self.readAll($0, path: path) } }
        }
        lastUnreadable.withLock { $0 = result.unreadable }
        for item in result.unreadable {
            logger.warning("\(item.error.message)")
        }
        return result
    }

    /// Applies `changes` in order, in one transaction: a batch of a hundred state changes costs
    /// one commit.
    ///
    /// - Throws: ``DownloadError/Code/storeFailure`` when a task's entity identity is not the
    ///   task's, or the write fails (then nothing of the batch is written).
    public func apply(_ changes: [StoreChange]) async throws(DownloadError) {
        guard !changes.isEmpty else { return }
        let path = self.path
        // What each change writes as JSON, encoded before the transaction, beside the changes
        // (which are read in place: copying a task's record is a retain for each of its fields).
        var encodedTexts: [(lastError: String?, manifest: String?)] = []
        encodedTexts.reserveCapacity(changes.count)
        for index in changes.indices {
            switch changes[index] {
            case .insert(let task):
                guard task.entity.taskID == task.task.id else {
                    throw DownloadError(
                        .storeFailure,
                        "The task \(task.task.id) cannot be stored in \(path): its entity is \(task.entity.taskID); "
                            + "a task's identity must be its entity's (this is a bug in the caller).")
                }
                encodedTexts.append((
                    try encodeJSON(task.task.lastError, what: "the last error of task \(task.task.id)"),
                    try Self.encodeManifest(task.task.manifest, of: task.task.id, path: path)))
            case .update(let record):
                encodedTexts.append((try encodeJSON(record.lastError, what: "the last error of task \(record.id)"), nil))
            case .remove:
                encodedTexts.append((nil, nil))
            }
        }
        let texts = encodedTexts
        try await access("record \(changes.count) change(s)") { [pool, writtenRevisions] in
            try await pool.write { db in
                try writtenRevisions.withLock { written in
                    var statements = BatchStatements(db)
                    for index in changes.indices {
                        switch changes[index] {
                        case .insert(let task):
                            try Self.insert(task, lastError: texts[index].lastError, manifest: texts[index].manifest, in: &statements)
                            written[task.task.id] = task.task.manifestRevision
                        case .update(let record):
                            // (A task this store has not written yet, one loaded from the file,
                            // most likely has its revision stored: its manifest is not encoded
                            // again unless it must be.)
                            let likelyStored = written[record.id].map { $0 == record.manifestRevision } ?? true
                            try Self.update(
                                record, lastError: texts[index].lastError, manifestLikelyStored: likelyStored, in: &statements, path: path)
                            written[record.id] = record.manifestRevision
                        case .remove(let id):
                            try db.cachedStatement(sql: "DELETE FROM tasks WHERE entityType = ? AND entityKey = ? AND variantKey = ?")
                                .execute(arguments: [id.entityType, id.entityKey, id.variantKey])
                            written[id] = nil
                        }
                    }
                }
                CrashPoint.storeWrite.reach()
            }
        }
    }

    private static func insert(_ task: StoredTask, lastError: String?, manifest: String?, in statements: inout BatchStatements) throws {
        var statement = BoundStatement(try statements.insert())
        bindKey(task.task.id, to: &statement)
        statement.bind(task.task.sequence)
        statement.bind(task.entity.title)
        statement.bind(task.entity.aggregationKey)
        statement.bind(task.entity.groupType)
        statement.bind(task.entity.destinationDirectory)
        statement.bind(task.entity.payload)
        bindFields(of: task.task, lastError: lastError, to: &statement)
        statement.bind(manifest)
        statement.bind(task.task.manifestRevision)
        try statement.execute()
    }

    /// Binds the fields every write of a task's record has, in the order its statements name
    /// them: state, interruption, mode, weight, resolve count, last error, added, bytes and
    /// segments done, total.
    private static func bindFields(of task: TaskRecord, lastError: String?, to statement: inout BoundStatement) {
        statement.bind(task.state.kind.rawValue)
        statement.bind(interruptionReason(task.state))
        statement.bind(task.mode.rawValue)
        statement.bind(task.weight)
        statement.bind(task.resolveCount)
        statement.bind(lastError)
        statement.bind(task.addedAt.timeIntervalSinceReferenceDate)
        statement.bind(task.bytesDone)
        statement.bind(task.segmentsDone)
        statement.bind(task.bytesTotal)
    }

    /// Replaces a known task's record; the manifest is written only when its revision differs
    /// from the stored one. An unknown task is ignored (it was removed in the meantime).
    ///
    /// `manifestLikelyStored` is this store's guess that the stored revision is the record's: the
    /// fields are then written alone, on the condition that it is (and with the manifest when it
    /// is not after all); otherwise fields and manifest go at once.
    private static func update(
        _ task: TaskRecord, lastError: String?, manifestLikelyStored: Bool, in statements: inout BatchStatements, path: String
    ) throws {
        if manifestLikelyStored {
            // Most updates keep the stored manifest (its revision is the record's): one
            // statement, nothing read first.
            var statement = BoundStatement(try statements.updateKeepingManifest())
            statement.bind(task.sequence)
            bindFields(of: task, lastError: lastError, to: &statement)
            bindKey(task.id, to: &statement)
            statement.bind(task.manifestRevision)
            try statement.execute()
            guard statements.db.changesCount == 0 else { return }
        }
        // Another revision: the manifest goes with the fields (an unknown task, removed in the
        // meantime, stays unknown).
        let manifest = try encodeManifest(task.manifest, of: task.id, path: path)
        var statement = BoundStatement(try statements.updateWithManifest())
        statement.bind(task.sequence)
        bindFields(of: task, lastError: lastError, to: &statement)
        statement.bind(manifest)
        statement.bind(task.manifestRevision)
        bindKey(task.id, to: &statement)
        try statement.execute()
    }

    private static func bindKey(_ id: DownloadTaskID, to statement: inout BoundStatement) {
        statement.bind(id.entityType)
        statement.bind(id.entityKey)
        statement.bind(id.variantKey)
    }

    /// The fields an update writes (the statements are made once: their text is the cache's key).
    private static let updatedFields = """
        sequence = ?, state = ?, interruptionReason = ?, mode = ?, weight = ?, resolveCount = ?, \
        lastError = ?, addedAt = ?, bytesDone = ?, segmentsDone = ?, bytesTotal = ?
        """
    private static let updateKeepingManifest =
        "UPDATE tasks SET \(updatedFields) WHERE entityType = ? AND entityKey = ? AND variantKey = ? AND manifestRevision IS ?"
    private static let updateWithManifest =
        "UPDATE tasks SET \(updatedFields), manifest = ?, manifestRevision = ? WHERE entityType = ? AND entityKey = ? AND variantKey = ?"
    private static let upsert = """
        INSERT INTO tasks (
            entityType, entityKey, variantKey, sequence, title, aggregationKey, groupType,
            destinationDirectory, entityPayload, state, interruptionReason, mode, weight, resolveCount,
            lastError, addedAt, bytesDone, segmentsDone, bytesTotal, manifest, manifestRevision)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (entityType, entityKey, variantKey) DO UPDATE SET
            sequence = excluded.sequence, title = excluded.title,
            aggregationKey = excluded.aggregationKey, groupType = excluded.groupType,
            destinationDirectory = excluded.destinationDirectory, entityPayload = excluded.entityPayload,
            state = excluded.state, interruptionReason = excluded.interruptionReason,
            mode = excluded.mode, weight = excluded.weight, resolveCount = excluded.resolveCount,
            lastError = excluded.lastError, manifest = excluded.manifest,
            manifestRevision = excluded.manifestRevision, addedAt = excluded.addedAt,
            bytesDone = excluded.bytesDone, segmentsDone = excluded.segmentsDone,
            bytesTotal = excluded.bytesTotal
        """

    /// The statements of one batch, each taken from GRDB's cache at its first use in the batch
    /// (the cache's key is the statement's text, hashed at every lookup).
    private struct BatchStatements {
        let db: Database
        private var statements: [Statement?] = [nil, nil, nil]

        init(_ db: Database) { self.db = db }

        mutating func insert() throws -> Statement { try statement(0, SQLiteDownloadStore.upsert) }
        mutating func updateKeepingManifest() throws -> Statement { try statement(1, SQLiteDownloadStore.updateKeepingManifest) }
        mutating func updateWithManifest() throws -> Statement { try statement(2, SQLiteDownloadStore.updateWithManifest) }

        private mutating func statement(_ index: Int, _ sql: String) throws -> Statement {
            if let statement = statements[index] { return statement }
            let statement = try db.cachedStatement(sql: sql)
            statements[index] = statement
            return statement
        }
    }

    // MARK: - Writing

    private static func interruptionReason(_ state: DownloadTaskState) -> String? {
        if case .interrupted(let reason) = state { return reason.rawValue }
        return nil
    }

    /// A manifest's stored text (``StoredManifest``).
    private static func encodeManifest(_ manifest: DownloadManifest?, of id: DownloadTaskID, path: String) throws(DownloadError) -> String? {
        guard let manifest else { return nil }
        do {
            return try StoredManifest.encode(manifest)
        } catch {
            throw DownloadError(
                .storeFailure, "the manifest of task \(id) cannot be stored in \(path): it cannot be encoded as JSON (\(error)).")
        }
    }

    /// `what` names the value in the error (made only then: a record without an error costs no
    /// text).
    private func encodeJSON<Value: Encodable>(_ value: Value?, what: @autoclosure () -> String) throws(DownloadError) -> String? {
        try Self.encodeJSON(value, what: what(), path: path)
    }

    private static func encodeJSON<Value: Encodable>(
        _ value: Value?, what: @autoclosure () -> String, path: String
    ) throws(DownloadError) -> String? {
        guard let value else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return String(decoding: try encoder.encode(value), as: UTF8.self)
        } catch {
            throw DownloadError(.storeFailure, "\(what()) cannot be stored in \(path): it cannot be encoded as JSON (\(error)).")
        }
    }

    /// `body`'s reads on `db` (the writer's connection) in one deferred transaction: they see one
    /// state of the file, and no write lock is taken unless `body` writes.
    private static func inReadTransaction<T>(_ db: Database, _ body: (Database) throws -> T) throws -> T {
        var result: T?
        try db.inTransaction(.deferred) {
            result = try body(db)
            return .commit
        }
        guard let result else { throw DownloadError(.storeFailure, "a read of the store ended without its result") }
        return result
    }

    /// Runs a database access, turning every failure into a ``DownloadError/Code/storeFailure``
    /// that names the file and the operation.
    private func access<T: Sendable>(_ operation: String, _ body: () async throws -> T) async throws(DownloadError) -> T {
        do {
            return try await body()
        } catch let error as DownloadError {
            throw error
        } catch let error where error is CancellationError || (error as? DatabaseError)?.isInterruptionError == true {
            throw DownloadError(
                .storeFailure,
                "Could not \(operation) in \(path): the calling task was cancelled before it finished; nothing was changed.")
        } catch {
            throw DownloadError(.storeFailure, "Could not \(operation) in \(path) (\(Self.describe(error))).")
        }
    }

    // MARK: - Reading

    private static func readAll(_ db: Database, path: String) throws -> LoadResult {
        var order: [Int64] = []
        var tasks: [Int64: StoredTask] = [:]
        var unreadable: [Int64: UnreadableTask] = [:]

        func skip(_ row: Int64, _ id: DownloadTaskID?, _ problem: String) {
            guard unreadable[row] == nil else { return }
            let name = id.map { "The task \($0)" } ?? "The task in row \(row)"
            unreadable[row] = UnreadableTask(
                id: id, row: row,
                error: DownloadError(
                    .storeFailure,
                    "\(name) in the download state file \(path) cannot be read (\(problem)); it was skipped and left in the file. "
                        + "Add the task again to replace it, or remove it."))
            tasks[row] = nil
        }

        let taskRows = try Row.fetchCursor(db, sql: "SELECT * FROM tasks ORDER BY id")
        while let row = try taskRows.next() {
            let strict = StrictRow(row: row)
            guard let rowID = try? strict.int64("id") else { continue }
            order.append(rowID)
            var id: DownloadTaskID?
            do {
                id = DownloadTaskID(
                    entityType: try strict.string("entityType"), entityKey: try strict.string("entityKey"),
                    variantKey: try strict.string("variantKey"))
                tasks[rowID] = try decodeTask(strict, id: id!)
            } catch {
                skip(rowID, id, "\(error)")
            }
        }

        return LoadResult(tasks: order.compactMap { tasks[$0] }, unreadable: order.compactMap { unreadable[$0] })
    }

    private struct DecodeProblem: Error, CustomStringConvertible {
        var description: String
    }

    private static func decodeTask(_ row: StrictRow, id: DownloadTaskID) throws -> StoredTask {
        let entity = EntityRecord(
            entityType: id.entityType, entityKey: id.entityKey, variantKey: id.variantKey, title: try row.string("title"),
            aggregationKey: try row.optionalString("aggregationKey"), groupType: try row.string("groupType"),
            destinationDirectory: try row.string("destinationDirectory"), payload: try row.data("entityPayload"))
        let stateName = try row.string("state")
        guard let kind = DownloadTaskState.Kind(rawValue: stateName) else {
            throw DecodeProblem(description: "unknown state \"\(stateName)\"")
        }
        let reasonName = try row.optionalString("interruptionReason")
        let state: DownloadTaskState
        switch kind {
        case .idle: state = .idle
        case .waiting: state = .waiting
        case .resolving: state = .resolving
        case .downloading: state = .downloading
        case .paused: state = .paused
        case .completed: state = .completed
        case .failed: state = .failed
        case .invalid: state = .invalid
        case .removed: state = .removed
        case .interrupted:
            guard let reasonName, let reason = DownloadTaskState.InterruptionReason(rawValue: reasonName) else {
                throw DecodeProblem(description: "unknown interruption reason \(reasonName.map { "\"\($0)\"" } ?? "NULL")")
            }
            state = .interrupted(reason)
        }
        let modeName = try row.string("mode")
        guard let mode = DownloadTaskMode(rawValue: modeName) else {
            throw DecodeProblem(description: "unknown mode \"\(modeName)\"")
        }
        let lastError = try decodeJSON(StoredError.self, row.optionalData("lastError"), what: "its last error")
        let manifest: DownloadManifest?
        do {
            manifest = try row.optionalData("manifest").map(StoredManifest.decode)
        } catch {
            throw DecodeProblem(description: "its manifest is not valid JSON for DownloadManifest: \(error)")
        }
        let record = TaskRecord(
            id: id, state: state, mode: mode, weight: try row.int("weight"), sequence: try row.int("sequence"),
            resolveCount: try row.int("resolveCount"), lastError: lastError, manifest: manifest,
            manifestRevision: try row.int("manifestRevision"),
            addedAt: Date(timeIntervalSinceReferenceDate: try row.double("addedAt")),
            bytesDone: try row.int64("bytesDone"), segmentsDone: try row.int("segmentsDone"),
            bytesTotal: try row.optionalInt64("bytesTotal").flatMap { $0 >= 0 ? $0 : nil })
        return StoredTask(entity: entity, task: record)
    }

    private static func decodeJSON<Value: Decodable>(_ type: Value.Type, _ data: Data?, what: String) throws -> Value? {
        guard let data else { return nil }
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            throw DecodeProblem(description: "\(what) is not valid JSON for \(type): \(error)")
        }
    }
}
