import Foundation

/// Where a manager keeps what must survive a restart: entities, tasks and their states,
/// manifests, and a summary of each task's progress. What is on disk byte by byte is not here:
/// each task's `TaskJournal` beside its files keeps that, written as the bytes are (aria2's
/// control file), so the store is written once per tick, not once per segment.
///
/// Every implementation must satisfy these rules, which the shared conformance tests check
/// (`Tests/TesseraTests/Store/DownloadStoreConformanceTests.swift`):
/// - ``apply(_:)`` applies its changes in order, all or none; a read sees every earlier write.
/// - ``StoreChange/insert(_:)`` of a known task ID replaces the entity and task records, keeping
///   the task's place in the insertion order; ``StoreChange/remove(_:)`` forgets the task. The
///   entity's ``EntityRecord/taskID`` must be the task's ID.
/// - ``StoreChange/update(_:)`` of an unknown task is ignored.
/// - A caller that changes a task's manifest increases ``TaskRecord/manifestRevision``; a store
///   may skip writing an unchanged manifest.
/// - Failures throw ``DownloadError`` with ``DownloadError/Code/storeFailure`` and a message
///   a person can act on; a store never deletes downloaded files.
public protocol DownloadStore: Sendable {
    /// Every stored task, with its entity, in insertion order.
    func loadAll() async throws -> [StoredTask]
    /// Applies `changes` in order, as one transaction.
    func apply(_ changes: [StoreChange]) async throws
}

/// One change to a ``DownloadStore``.
///
/// Its cases are kept in a box (`indirect`): a change waits in a batch, is merged and handed to
/// the store's thread as one reference, not a task's whole record (417 bytes inline).
public indirect enum StoreChange: Sendable, Equatable {
    /// Records a new task or replaces a known one (entity and task records).
    case insert(StoredTask)
    /// Replaces a known task's record (state, weight, attempts, error, progress summary, and
    /// the manifest when its revision changed); ignored for an unknown task.
    case update(TaskRecord)
    /// Forgets a task.
    case remove(DownloadTaskID)

    /// The task the change is about.
    public var taskID: DownloadTaskID {
        switch self {
        case .insert(let task): task.task.id
        case .update(let record): record.id
        case .remove(let id): id
        }
    }

    /// One change with the effect of `self` then `next` (both about the same task), when one
    /// change can have it: an update after an insert or an update. `nil` otherwise (a remove
    /// then an insert puts the task last, which no single change says).
    public func merged(with next: StoreChange) -> StoreChange? {
        guard taskID == next.taskID else { return nil }
        switch (self, next) {
        case (.insert(var task), .update(let record)):
            task.task = record
            return .insert(task)
        case (.update, .update):
            return next
        default:
            return nil
        }
    }
}

/// A task as stored: its entity and its record.
public struct StoredTask: Sendable, Codable, Equatable {
    /// The entity.
    public var entity: EntityRecord
    /// The task.
    public var task: TaskRecord

    /// Creates a stored task.
    public init(entity: EntityRecord, task: TaskRecord) {
        self.entity = entity
        self.task = task
    }
}

/// The task part of a stored task.
public struct TaskRecord: Sendable, Codable, Equatable {
    /// The task's identity.
    public var id: DownloadTaskID
    /// The state when written.
    public var state: DownloadTaskState
    /// Download or cache only.
    public var mode: DownloadTaskMode
    /// Scheduling weight.
    public var weight: Int
    /// Insertion order, for ties in weight.
    public var sequence: Int
    /// How often the entity was resolved.
    public var resolveCount: Int
    /// The last error, if any.
    public var lastError: StoredError?
    /// The last manifest, so a restart does not need to resolve again (unless it expired).
    public var manifest: DownloadManifest?
    /// Increases whenever ``manifest`` changes; a store may skip writing an unchanged manifest
    /// (it can be large) when the revision is the one it has.
    public var manifestRevision: Int
    /// When the task was added.
    public var addedAt: Date
    /// Bytes done when written (for showing a task that is not running).
    public var bytesDone: Int64
    /// Segments done when written.
    public var segmentsDone: Int
    /// The task's size in bytes once it is known exactly (from the manifest or from a response:
    /// a plain file's size is only known once its server answered), so that a task that is not
    /// running reports it; `nil` while unknown or only estimated.
    public var bytesTotal: Int64?

    /// Creates a record.
    public init(
        id: DownloadTaskID, state: DownloadTaskState, mode: DownloadTaskMode, weight: Int, sequence: Int,
        resolveCount: Int = 0, lastError: StoredError? = nil, manifest: DownloadManifest? = nil, manifestRevision: Int = 0,
        addedAt: Date = Date(), bytesDone: Int64 = 0, segmentsDone: Int = 0, bytesTotal: Int64? = nil
    ) {
        self.bytesDone = bytesDone
        self.segmentsDone = segmentsDone
        self.bytesTotal = bytesTotal
        self.id = id
        self.state = state
        self.mode = mode
        self.weight = weight
        self.sequence = sequence
        self.resolveCount = resolveCount
        self.lastError = lastError
        self.manifest = manifest
        self.manifestRevision = manifestRevision
        self.addedAt = addedAt
    }
}

/// A ``DownloadError`` as stored: its code's name, message, URL and status.
public struct StoredError: Sendable, Codable, Equatable {
    /// ``DownloadError/Code``'s description.
    public var code: String
    /// The message.
    public var message: String
    /// The URL, if any.
    public var url: String?
    /// The HTTP status, if any.
    public var httpStatus: Int?

    /// Stores an error.
    public init(_ error: DownloadError) {
        code = error.code.description
        message = error.message
        url = error.url
        httpStatus = error.httpStatus
    }
}

extension DownloadError {
    /// The error a stored error stands for (its code by name; an unknown name becomes `transport`).
    public init(stored: StoredError) {
        let code = DownloadError.Code.named(stored.code) ?? .transport
        self.init(code, stored.message, url: stored.url, httpStatus: stored.httpStatus)
    }
}
