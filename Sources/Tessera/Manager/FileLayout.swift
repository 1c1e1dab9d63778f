import Foundation

/// Where a manager puts things under its download root.
///
/// ```
/// <root>/<entity directory>/<output>          a finished output
/// <root>/<entity directory>/<output>.part     an output being written (pieces, one segment)
/// <root>/.tessera/work/<task>/<o>-<s>.seg     segments of a multi-segment output, until assembled
/// ```
struct FileLayout: Sendable {
    let root: String

    func outputPath(entity: DownloadBaseEntity, output: DownloadOutput) -> String {
        let directory = SafePath.join(root, (try? SafePath.relative(entity.destinationDirectory)) ?? "")
        return SafePath.join(directory, (try? SafePath.relative(output.name)) ?? "invalid-name")
    }

    static func partPath(_ path: String) -> String { path + ".part" }

    func workDirectory(of id: DownloadTaskID) -> String {
        SafePath.join(root, ".tessera/work/\(Self.directoryName(for: id))")
    }

    func segmentPath(of id: DownloadTaskID, _ key: SegmentKey) -> String {
        SafePath.join(workDirectory(of: id), "\(key.output)-\(key.segment).seg")
    }

    func removeWork(of id: DownloadTaskID) {
        FileOperations.removeTree(workDirectory(of: id))
    }

    /// A readable, collision-resistant directory name: the entity type, then a 64-bit FNV-1a
    /// hash of the whole ID.
    static func directoryName(for id: DownloadTaskID) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in id.description.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return SafePath.sanitizedFileName(id.entityType, fallback: "task") + "-" + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Where a segment's bytes go while it is fetched.
    func destination(of planned: PlannedSegment, task id: DownloadTaskID, entity: DownloadBaseEntity, mode: DownloadTaskMode)
        -> SegmentDestination
    {
        let output = planned.output
        let outputPath = outputPath(entity: entity, output: output)
        if mode == .cacheOnly {
            return SegmentDestination(path: segmentPath(of: id, planned.key), offset: 0, ownsTail: true, isWholeFile: true)
        }
        switch output.assembly {
        case .pieces:
            return SegmentDestination(
                path: Self.partPath(outputPath), offset: planned.segment.pieceOffset ?? 0, ownsTail: false, isWholeFile: false)
        case .separateFiles:
            let name = (try? SafePath.relative(planned.segment.name ?? "")) ?? "segment-\(planned.key.segment)"
            return SegmentDestination(
                path: Self.partPath(SafePath.join(outputPath, name)), offset: 0, ownsTail: true, isWholeFile: true,
                finalPath: SafePath.join(outputPath, name))
        case .concatenated:
            if output.segments.count == 1 {
                return SegmentDestination(path: Self.partPath(outputPath), offset: 0, ownsTail: true, isWholeFile: true)
            }
            return SegmentDestination(path: segmentPath(of: id, planned.key), offset: 0, ownsTail: true, isWholeFile: true)
        }
    }
}

/// Where one segment is written.
struct SegmentDestination: Sendable {
    /// The file.
    var path: String
    /// Where the segment's first byte goes in it.
    var offset: Int64
    /// Whether the segment owns the file from `offset` on.
    var ownsTail: Bool
    /// Whether the file holds this segment only (so it can be shared, cached, decrypted).
    var isWholeFile: Bool
    /// For separate files: where the finished segment is moved.
    var finalPath: String?

    var transferDestination: TransferRequest.Destination {
        .file(path: path, offset: offset, ownsTail: ownsTail)
    }
}
