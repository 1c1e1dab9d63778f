import Foundation

/// Where a manager puts things under its download root.
///
/// ```
/// <root>/<entity directory>/<output>          a finished output
/// <root>/<entity directory>/<output>.part     an output being written
/// <root>/.tessera/work/<task>.a|.b|.sizes     the task's journal (what is on disk)
/// <root>/.tessera/work/<task>-<o>.part        an output named by the server's answer, until named
/// <root>/.tessera/work/<task>-<o>-<s>.seg     a segment that arrived before its place was known
/// ```
struct FileLayout: Sendable {
    let root: String
    /// Who may write under the root (a fleet's leases); `nil`: this process alone.
    var fence: (any TaskWriteFence)?
    /// Where journals, partial files of unknown names and stashed segments are.
    let workDirectory: String

    init(root: String, fence: (any TaskWriteFence)? = nil) {
        self.root = root
        self.fence = fence
        workDirectory = SafePath.join(root, ".tessera/work")
    }

    /// Whether task `id`'s journal and files may be written now (always, without a fence).
    func permitsWrite(to id: DownloadTaskID) -> Bool {
        fence?.permitsWrite(to: id) ?? true
    }

    func outputPath(entity: DownloadBaseEntity, output: DownloadOutput) -> String {
        outputPath(directory: entity.destinationDirectory, name: output.name)
    }

    func outputPath(directory: String, name: String) -> String {
        // (Most tasks download into the root itself: no directory to check and join, about
        // eight times a file.)
        let base = directory.isEmpty ? root : SafePath.join(root, (try? SafePath.relative(directory)) ?? "")
        return SafePath.join(base, (try? SafePath.relative(name)) ?? "invalid-name")
    }

    /// `path.part`; for a name too long to take the suffix, the name shortened (see
    /// ``SafePath/fitted(_:reserving:)``) with a hash of the whole name, then `.part`.
    static func partPath(_ path: String) -> String {
        let slash = path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex
        let name = path[slash...]
        guard name.utf8.count + 5 > SafePath.maxNameBytes else { return path + ".part" }
        let hex = String(FNV.hash(name.utf8) & 0xFFFF_FFFF, radix: 16)
        let tag = "-" + String(repeating: "0", count: 8 - hex.count) + hex
        return String(path[..<slash]) + SafePath.fitted(String(name), reserving: tag.utf8.count + 5) + tag + ".part"
    }

    /// The journal's files, without their suffixes (named by the fence's epoch, if any).
    func journalBase(of id: DownloadTaskID) -> String {
        journalBase(of: id, epoch: fence?.journalEpoch(of: id))
    }

    /// The journal's files of one epoch (`<name>.e<epoch>`), or the unnamed ones.
    func journalBase(of id: DownloadTaskID, epoch: UInt64?) -> String {
        journalBase(named: Self.fileName(for: id), epoch: epoch)
    }

    /// ``journalBase(of:epoch:)`` of the task whose ``fileName(for:)`` is `name`.
    func journalBase(named name: String, epoch: UInt64?) -> String {
        SafePath.join(workDirectory, name + (epoch.map { ".e\($0)" } ?? ""))
    }

    /// The partial file of an output whose name the server's answer gives.
    func responseNamedPart(of id: DownloadTaskID, output: Int) -> String {
        responseNamedPart(named: Self.fileName(for: id), output: output)
    }

    /// ``responseNamedPart(of:output:)`` of the task whose ``fileName(for:)`` is `name`.
    func responseNamedPart(named name: String, output: Int) -> String {
        SafePath.join(workDirectory, Self.responseNamedPartName(named: name, output: output))
    }

    /// The file name (in ``workDirectory``) of ``responseNamedPart(named:output:)``.
    static func responseNamedPartName(named name: String, output: Int) -> String {
        "\(name)-\(output).part"
    }

    /// The task's ``fileName(for:)`` in a ``responseNamedPartName(named:output:)``, or `nil` for
    /// another file of the work directory.
    static func taskName(ofResponseNamedPart fileName: String) -> Substring? {
        guard fileName.hasSuffix(".part"), let dash = fileName.lastIndex(of: "-") else { return nil }
        return fileName[..<dash]
    }

    /// Where a segment goes while its place in the output is not known.
    func stashPath(of id: DownloadTaskID, output: Int, segment: Int) -> String {
        stashPath(named: Self.fileName(for: id), output: output, segment: segment)
    }

    /// ``stashPath(of:output:segment:)`` of the task whose ``fileName(for:)`` is `name`.
    func stashPath(named name: String, output: Int, segment: Int) -> String {
        SafePath.join(workDirectory, "\(name)-\(output)-\(segment).seg")
    }

    /// Removes the work directory and `<root>/.tessera` when nothing is left in them (a run
    /// that ended with every task finished leaves no trace beside the downloads); a directory
    /// that still holds something (a paused task's journal, another process's files) stays.
    /// Whatever writes there later makes the directory again. Blocking.
    func removeWorkDirectoryIfEmpty() {
        guard rmdir(workDirectory) == 0 else { return }
        _ = rmdir((workDirectory as NSString).deletingLastPathComponent)
    }

    /// Every file of the task in the work directory (journal, parts, stashes). Blocking.
    func removeWork(of id: DownloadTaskID) {
        let prefix = Self.fileName(for: id)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: workDirectory) else { return }
        for name in names where name.hasPrefix(prefix) {
            let rest = name.dropFirst(prefix.count)
            if rest.first == "." || rest.first == "-" { FileOperations.remove(SafePath.join(workDirectory, name)) }
        }
    }

    /// A readable, collision-resistant name: the entity type, then a 64-bit FNV-1a hash of the
    /// whole ID.
    static func fileName(for id: DownloadTaskID) -> String {
        // The hash of the ID's text (`type:key`, `type:key#variant`), taken part by part.
        var hash = FNV.hash(id.entityType.utf8)
        hash = FNV.hash(CollectionOfOne(UInt8(ascii: ":")), continuing: hash)
        hash = FNV.hash(id.entityKey.utf8, continuing: hash)
        if !id.variantKey.isEmpty {
            hash = FNV.hash(CollectionOfOne(UInt8(ascii: "#")), continuing: hash)
            hash = FNV.hash(id.variantKey.utf8, continuing: hash)
        }
        // `type-` and the hash as 16 hex digits (made in place: this runs for every task started).
        let hex = String(unsafeUninitializedCapacity: 16) { buffer in
            let digits: StaticString = "0123456789abcdef"
            for index in 0..<16 {
                buffer[index] = digits.utf8Start[Int(truncatingIfNeeded: (hash >> UInt64(60 - 4 * index)) & 0xF)]
            }
            return 16
        }
        return SafePath.sanitizedFileName(id.entityType, fallback: "task") + "-" + hex
    }
}
