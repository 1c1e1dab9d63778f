import Foundation

/// A manifest of one file fetched whole (one output made of one segment: a plain download, a
/// Metalink file without pieces) in the few fields that shape has, its URLs as text: what a
/// completed task keeps of its manifest (``ManagedTask/compactManifest(interning:)``). Resolved,
/// such a manifest holds an output, a segment list, a segment, URL objects and their parse;
/// kept compact, a list of 100,000 finished files spares most of that.
///
/// As with the store's plain form (``StoredManifest``), a manifest is made compact only when
/// building it again from the fields gives an equal one: every field the compact form leaves
/// out is checked for its default, one by one, and its URLs must stand alone (no base URL), so
/// their text parses back to equal URLs (`CompactManifestTests`; an `assert` checks the round
/// trip in debug builds). Rebuilding the manifest to compare cost more than the rest of a
/// finished file's bookkeeping on the manager's actor.
final class CompactManifest {
    let title: String?
    let name: String
    /// The segment's URLs, as text (parsed again when the manifest is built).
    let urls: [String]
    let isNamedByResponse: Bool
    let outputSize: Int64?
    let outputChecksum: Checksum?
    let segmentSize: Int64?
    let segmentChecksum: Checksum?
    let sourceURL: URL?
    var metadata: [String: String]

    /// The compact form of `manifest`, or `nil` when it has another shape (or would not be
    /// built again equal).
    init?(_ manifest: DownloadManifest) {
        guard manifest.outputs.count == 1, manifest.expiresAt == nil, manifest.live == nil else { return nil }
        let output = manifest.outputs[0]
        guard output.assembly == .concatenated, output.isSelected, output.media == nil, output.segments.count == 1,
            case let segment = output.segments[0], segment.range == nil, segment.headers.isEmpty, segment.offset == nil,
            segment.name == nil, segment.encryption == nil, segment.urls.allSatisfy({ $0.baseURL == nil })
        else { return nil }
        title = manifest.title
        name = output.name
        urls = segment.urls.map(\.absoluteString)
        isNamedByResponse = output.isNamedByResponse
        outputSize = output.expectedSize
        outputChecksum = output.checksum
        segmentSize = segment.expectedSize
        segmentChecksum = segment.checksum
        sourceURL = manifest.sourceURL
        metadata = manifest.metadata
        assert(self.manifest == manifest, "a field of DownloadManifest the compact form does not know")
    }

    /// The manifest these fields stand for.
    var manifest: DownloadManifest {
        let segment = DownloadSegment(
            urls: urls.compactMap { URL(string: $0) }, expectedSize: segmentSize, checksum: segmentChecksum)
        return DownloadManifest(
            title: title,
            outputs: [DownloadOutput(
                name: name, segments: [segment], expectedSize: outputSize, checksum: outputChecksum,
                isNamedByResponse: isNamedByResponse)],
            sourceURL: sourceURL, metadata: metadata)
    }

    /// ``DownloadManifest/selectsAlternatives`` of the manifest.
    var selectsAlternatives: Bool { metadata[DownloadManifest.alternativesKey] == "true" }
}

/// Equal metadata dictionaries shared: the files of one Metalink have the same few facts
/// (`metalink`, `mirrors`), and each completed task's copy would be a dictionary of its own.
/// Keeps at most ``limit`` distinct dictionaries; others are returned as they are.
struct MetadataInterning {
    private var seen = Set<[String: String]>()
    /// The most distinct dictionaries kept.
    static let limit = 256

    /// The dictionary equal to `metadata` seen first (sharing its storage), or `metadata`.
    mutating func intern(_ metadata: [String: String]) -> [String: String] {
        if metadata.isEmpty { return [:] }
        if let index = seen.firstIndex(of: metadata) { return seen[index] }
        if seen.count < Self.limit { seen.insert(metadata) }
        return metadata
    }
}
