import Foundation

/// Where a manager keeps what must survive a restart: entities, tasks, groups' membership and
/// per-segment progress (aria2's idea: a finished segment is never fetched again).
///
/// Every implementation must satisfy these rules, which the shared conformance tests check
/// (`Tests/TesseraTests/Store/DownloadStoreConformanceTests.swift`):
/// - Writes are applied in the order they are made, and a read sees every earlier write.
/// - ``insert(_:)`` of a known task ID replaces the entity and task records but keeps its
///   segment progress (the ``StoredTask/segments`` given are recorded over it);
///   ``remove(_:)`` forgets the task and its progress. The entity's ``EntityRecord/taskID``
///   must be the task's ID.
/// - A caller that changes a task's manifest increases ``TaskRecord/manifestRevision``.
/// - ``saveSegments(_:)`` replaces the progress of the given segments only.
/// - ``resetSegments(of:)`` forgets the progress of every segment of a task.
/// - Failures throw ``DownloadError`` with ``DownloadError/Code/storeFailure`` and a message
///   a person can act on; a store never deletes downloaded files.
public protocol DownloadStore: Sendable {
    /// Every stored task, with its entity and segment progress, in insertion order.
    func loadAll() async throws -> [StoredTask]
    /// Records a new task or replaces a known one (entity and task records).
    func insert(_ task: StoredTask) async throws
    /// Replaces a task's record (state, weight, attempts, error, and the manifest when its
    /// revision changed).
    func update(_ task: TaskRecord) async throws
    /// Records segment progress.
    func saveSegments(_ progress: [SegmentProgress]) async throws
    /// Forgets a task's segment progress (its content changed).
    func resetSegments(of id: DownloadTaskID) async throws
    /// Forgets a task.
    func remove(_ id: DownloadTaskID) async throws
}

/// A task as stored: its entity, its record and its segments' progress.
public struct StoredTask: Sendable, Codable, Equatable {
    /// The entity.
    public var entity: EntityRecord
    /// The task.
    public var task: TaskRecord
    /// Progress of the segments that have any.
    public var segments: [SegmentProgress]

    /// Creates a stored task.
    public init(entity: EntityRecord, task: TaskRecord, segments: [SegmentProgress] = []) {
        self.entity = entity
        self.task = task
        self.segments = segments
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

    /// Creates a record.
    public init(
        id: DownloadTaskID, state: DownloadTaskState, mode: DownloadTaskMode, weight: Int, sequence: Int,
        resolveCount: Int = 0, lastError: StoredError? = nil, manifest: DownloadManifest? = nil, manifestRevision: Int = 0,
        addedAt: Date = Date()
    ) {
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

/// How far one segment has come.
public struct SegmentProgress: Sendable, Codable, Hashable {
    /// The task.
    public var taskID: DownloadTaskID
    /// The output's index in the manifest.
    public var outputIndex: Int
    /// The segment's index in its output.
    public var segmentIndex: Int
    /// Whether the segment is complete and verified.
    public var isDone: Bool
    /// Bytes on disk (all of them when done).
    public var bytesWritten: Int64
    /// The validator those bytes belong to.
    public var validator: ResourceValidator?
    /// The cache key the segment is filed under.
    public var cacheKey: String?

    /// Creates a progress record.
    public init(
        taskID: DownloadTaskID, outputIndex: Int, segmentIndex: Int, isDone: Bool, bytesWritten: Int64,
        validator: ResourceValidator? = nil, cacheKey: String? = nil
    ) {
        self.taskID = taskID
        self.outputIndex = outputIndex
        self.segmentIndex = segmentIndex
        self.isDone = isDone
        self.bytesWritten = bytesWritten
        self.validator = validator
        self.cacheKey = cacheKey
    }

    /// The bytes on disk and their validator.
    public var checkpoint: TransferCheckpoint {
        TransferCheckpoint(bytesWritten: bytesWritten, validator: validator)
    }
}

extension DownloadError {
    /// The error a stored error stands for (its code by name; an unknown name becomes `transport`).
    public init(stored: StoredError) {
        let code = DownloadError.Code.named(stored.code) ?? .transport
        self.init(code, stored.message, url: stored.url, httpStatus: stored.httpStatus)
    }
}
