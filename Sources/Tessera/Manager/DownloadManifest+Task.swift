extension DownloadManifest {
    /// Whether progress recorded against `self` still describes `other`: the same outputs with
    /// the same segments (sizes, ranges, checksums); URLs may differ (fresh signatures).
    func hasSameSegments(as other: DownloadManifest) -> Bool {
        guard outputs.count == other.outputs.count else { return false }
        for (mine, theirs) in zip(outputs, other.outputs) {
            // Header fields count: an If-Match names the version the pieces belong to.
            guard mine.name == theirs.name, mine.assembly == theirs.assembly, mine.segments.hasSameLayout(as: theirs.segments)
            else { return false }
        }
        return true
    }
}

extension DownloadManifest {
    /// Metadata keys of a completed task whose outputs were merged into one file.
    static let replacedByKey = "tessera.replacedBy"
    static let replacedBySizeKey = "tessera.replacedBySize"

    /// The manifest without a record of its outputs' replacement.
    var withoutReplacement: DownloadManifest {
        var manifest = self
        manifest.metadata[Self.replacedByKey] = nil
        manifest.metadata[Self.replacedBySizeKey] = nil
        return manifest
    }
}
