import Foundation

/// A task as the manager holds it; touched only on the manager's actor. Its state is the
/// scheduler's; its bytes are its run's ``TaskProgress``.
final class ManagedTask {
    let entity: DownloadBaseEntity
    let id: DownloadTaskID
    /// What the scheduler and the runs name the task by.
    let handle: TaskHandle
    let sequence: Int
    let addedAt: Date
    var mode: DownloadTaskMode
    var resolveCount = 0
    /// Why the task last failed; boxed, as most tasks never fail (a list of 100,000 tasks
    /// keeps 100,000 of these objects).
    var lastError: DownloadError? {
        get { lastErrorBox?.error }
        set { lastErrorBox = newValue.map(ErrorBox.init) }
    }
    private var lastErrorBox: ErrorBox?

    private final class ErrorBox {
        let error: DownloadError
        init(_ error: DownloadError) { self.error = error }
    }
    /// The task's manifest: as resolved, or (a completed task's, see ``compactManifest(interning:)``)
    /// built again from its compact form on each use.
    var manifest: DownloadManifest? {
        switch kept {
        case .none: nil
        case .full(let box): box.manifest
        case .compact(let compact): compact.manifest
        }
    }
    /// One reference, whichever form: a list of 100,000 tasks keeps 100,000 of these.
    private var kept = KeptManifest.none

    private enum KeptManifest {
        case none
        case full(ManifestBox)
        case compact(CompactManifest)
    }

    private final class ManifestBox {
        let manifest: DownloadManifest
        init(_ manifest: DownloadManifest) { self.manifest = manifest }
    }

    /// Whether the task has a manifest (without building a compact one again).
    var hasManifest: Bool {
        if case .none = kept { return false }
        return true
    }

    /// Whether the manifest is a live stream's (a compact one never is).
    var isLive: Bool {
        if case .full(let box) = kept { return box.manifest.isLive }
        return false
    }

    /// The manifest's metadata, without building a compact manifest again.
    private var metadata: [String: String]? {
        switch kept {
        case .none: nil
        case .full(let box): box.manifest.metadata
        case .compact(let compact): compact.metadata
        }
    }

    /// Keeps a completed task's manifest in its compact form (``CompactManifest``), its
    /// metadata shared with equal ones through `interning`, when its shape has one: a
    /// finished file needs its manifest only when it is started again, merged or removed, and
    /// a list of 100,000 completed files then keeps no URL objects, segments or outputs for
    /// them. A manifest of another shape is kept as it is.
    func compactManifest(interning: inout MetadataInterning) {
        guard case .full(let box) = kept, let compact = CompactManifest(box.manifest) else { return }
        compact.metadata = interning.intern(compact.metadata)
        kept = .compact(compact)
    }

    /// Increases with every manifest; restored from the store so revisions never repeat.
    var manifestRevision = 0
    /// The progress of the current (or last) run.
    var progress: TaskProgress?
    /// What the store had, before any run.
    var summary = TaskProgress.Snapshot(bytes: 0, doneSegments: 0, segmentCount: 0, knownBytes: 0, unknownSizes: 0)
    var completed = false
    /// The last exact total seen for this manifest (see `amounts(_:state:)`).
    var knownTotal: Int64?
    var speed = SpeedMeter()
    var lastReportedBytes: Int64 = -1
    var lastSampledBytes: Int64 = 0
    var run: RunHandle?
    var isRemoved = false
    private var outputs: [(name: String, path: String, expectedSize: Int64?, media: MediaBox?)] = []

    /// An output's media, boxed: most outputs have none (a Metalink's files, plain URLs), and
    /// ``MediaInfo`` inline would be most of each entry.
    private final class MediaBox {
        let media: MediaInfo
        init(_ media: MediaInfo) { self.media = media }
    }

    /// `id` is the entity's ``DownloadBaseEntity/taskID``, which the caller has made already (it
    /// is made, and its key hashed, at each use).
    init(
        entity: DownloadBaseEntity, id: DownloadTaskID, mode: DownloadTaskMode, sequence: Int, handle: TaskHandle,
        addedAt: Date = Date()
    ) {
        self.entity = entity
        self.id = id
        self.handle = handle
        self.mode = mode
        self.sequence = sequence
        self.addedAt = addedAt
    }

    /// The task `record` describes (a restore), its entity rebuilt: its manifest, counts, error
    /// and revision as the store has them.
    convenience init(restoring record: TaskRecord, entity: DownloadBaseEntity, handle: TaskHandle, layout: FileLayout) {
        self.init(entity: entity, id: entity.taskID, mode: record.mode, sequence: record.sequence, handle: handle, addedAt: record.addedAt)
        resolveCount = record.resolveCount
        lastError = record.lastError.map(DownloadError.init(stored:))
        manifestRevision = record.manifestRevision
        if let manifest = record.manifest { setManifest(manifest, layout: layout) }
        summary.bytes = record.bytesDone
        summary.doneSegments = record.segmentsDone
        knownTotal = record.bytesTotal
        completed = record.state == .completed
    }

    var groupKey: String? { entity.aggregationKey }

    /// The one file the outputs were merged into (``DownloadTaskManager/recordReplacement(of:by:size:)``).
    var replacement: (path: String, size: Int64)? {
        guard let metadata, let path = metadata[DownloadManifest.replacedByKey],
            let size = metadata[DownloadManifest.replacedBySizeKey].flatMap(Int64.init)
        else { return nil }
        return (path, size)
    }

    /// The journal of the current run, once its outputs are prepared.
    var journal: TaskJournal? { run?.shared.journal }

    /// Keeps a manifest and what snapshots need of it.
    func setManifest(_ manifest: DownloadManifest, layout: FileLayout) {
        let previous = self.manifest
        if previous != manifest { manifestRevision += 1 }
        if let previous, !previous.hasSameSegments(as: manifest) { knownTotal = nil }
        kept = .full(ManifestBox(manifest))
        outputs = manifest.outputs.filter { mode == .cacheOnly || $0.isSelected }.map { output in
            (output.name, layout.outputPath(entity: entity, output: output), output.knownSize, output.media.map(MediaBox.init))
        }
        if let replacement {
            outputs = [((replacement.path as NSString).lastPathComponent, replacement.path, replacement.size, nil)]
        }
        var segments = 0, unknown = 0
        var known: Int64 = 0
        for output in manifest.outputs where mode == .cacheOnly || output.isSelected {
            segments += output.segments.count
            let sizes = output.segments.sizeSummary
            known = known.saturatingAdding(sizes.knownBytes)
            unknown += sizes.unknownCount
        }
        summary.segmentCount = segments
        summary.knownBytes = known
        summary.unknownSizes = unknown
    }

    /// The task's snapshot in `state`, with the scheduler's `weight`.
    func snapshot(state: DownloadTaskState, weight: Int) -> DownloadTaskInfo {
        let snapshot = progress?.snapshot ?? summary
        let (done, total, isEstimate) = amounts(snapshot, state: state)
        let remaining = total.map { max(0, $0 - done) }
        let (title, alternatives): (String?, Bool) =
            switch kept {
            case .none: (nil, false)
            case .full(let box): (box.manifest.title, box.manifest.selectsAlternatives)
            case .compact(let compact): (compact.title, compact.selectsAlternatives)
            }
        return DownloadTaskInfo(
            id: id, title: title ?? entity.title, groupKey: groupKey, state: state,
            mode: mode, bytesDone: done, bytesTotal: total,
            bytesTotalIsEstimate: isEstimate, segmentsDone: snapshot.doneSegments,
            segmentsTotal: snapshot.segmentCount, bytesPerSecond: state.isRunning ? speed.bytesPerSecond : 0,
            eta: state.isRunning ? speed.eta(remaining: remaining) : nil,
            outputs: outputInfos(complete: state == .completed), error: lastError,
            resolveCount: resolveCount, weight: weight,
            outputsAreAlternatives: alternatives,
            live: isLive ? snapshot.live ?? LiveRecordingInfo() : nil)
    }

    /// The task as the store keeps it, in `state`, with the scheduler's `weight`.
    func record(state: DownloadTaskState, weight: Int) -> TaskRecord {
        let snapshot = progress?.snapshot ?? summary
        return TaskRecord(
            id: id, state: state, mode: mode, weight: weight,
            sequence: sequence, resolveCount: resolveCount, lastError: lastError.map(StoredError.init),
            manifest: manifest, manifestRevision: manifestRevision, addedAt: addedAt,
            bytesDone: snapshot.bytes, segmentsDone: snapshot.doneSegments, bytesTotal: exactTotal(snapshot))
    }

    func outputInfos(complete: Bool) -> [DownloadTaskInfo.OutputInfo] {
        outputs.map { DownloadTaskInfo.OutputInfo(name: $0.name, path: $0.path, expectedSize: $0.expectedSize, isComplete: complete, media: $0.media?.media) }
    }
}

/// A running task's run, as the manager reaches it.
struct RunHandle {
    let ticket: RunTicket
    let mailbox: RunMailbox
    let shared: RunShared
    let events: EventQueue<RunEvent>
    let execution: RunExecution
    /// A run that starts without a task, until its first grant (``TaskRun/startDirectly(host:)``).
    var direct: TaskRun?

    /// Stops the run (a run without a task that never started winds down in its task).
    mutating func stop() {
        execution.cancel()
        events.finish()
        if let run = direct {
            direct = nil
            run.execution.continueInTask { await run.run() }
        }
    }
}

/// Where a run starts.
struct RunStart: Sendable {
    var manifest: DownloadManifest?
    var resolveCount: Int
    /// Whether the task never had a manifest (so no journal and no partial files to look for).
    var isFresh: Bool
    /// Whether files of a removed task with the same identity are still being deleted.
    var waitsForDeletion: Bool
    /// Whether a fresh task's partial file may be a second name of an output a killed process
    /// finished (`TaskRun.finishedBefore` looks then); `false` when the start's look at the work
    /// directory found none of the task's.
    var mayHaveFinishedBefore = true
    /// The manifest the manager resolved and named at launch (an entity that
    /// ``ResolvesImmediately``), its first slots asked for: the run starts from it without
    /// resolving or reporting it. `nil`: the run resolves (or takes ``manifest``) itself.
    var announced: DownloadManifest? = nil
    /// The store write the run waits for before its first byte when ``announced`` names outputs
    /// not named by a response (a kill must find those names again).
    var namesStored: Task<Void, Never>? = nil
}
