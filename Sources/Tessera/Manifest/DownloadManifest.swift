import Foundation

/// What an entity resolves to: the files to produce, each made of ordered segments with their
/// URLs, ranges, sizes and checksums.
///
/// A parser builds one from a JSON or XML document; the task manager downloads every segment
/// of the selected outputs (cache first), assembles each output and verifies it.
public struct DownloadManifest: Sendable, Codable, Hashable {
    /// A human-readable title (a video's name, a Metalink's description), if the document has one.
    public var title: String?
    /// The files this manifest describes. Only the ``DownloadOutput/isSelected`` ones are
    /// downloaded; the others are listed by `tessera resolve` as alternatives.
    public var outputs: [DownloadOutput]
    /// When the URLs stop working (signed URLs); the manager resolves the entity again after it.
    public var expiresAt: Date?
    /// The URL the manifest was read from, after redirects; relative URLs were resolved against it.
    public var sourceURL: URL?
    /// Free-form facts for display (duration, format, server's quality code …).
    public var metadata: [String: String]
    /// Set when the manifest is a live stream that is still being published: the manager then
    /// records it (see ``LiveStreamParser``) instead of downloading its segments once.
    public var live: LiveManifestInfo?

    /// Creates a manifest.
    public init(
        title: String? = nil, outputs: [DownloadOutput], expiresAt: Date? = nil, sourceURL: URL? = nil,
        metadata: [String: String] = [:], live: LiveManifestInfo? = nil
    ) {
        self.title = title
        self.outputs = outputs
        self.expiresAt = expiresAt
        self.sourceURL = sourceURL
        self.metadata = metadata
        self.live = live
    }

    /// The outputs that will be downloaded.
    public var selectedOutputs: [DownloadOutput] { outputs.filter(\.isSelected) }

    /// Whether the URLs have expired at `date`.
    public func isExpired(at date: Date = Date()) -> Bool {
        expiresAt.map { $0 <= date } ?? false
    }

    /// Checks what the network handed over before anything is downloaded: at least one
    /// selected output, safe relative names (unique), `http`/`https` URLs without control
    /// characters, ranges and sizes that make sense, pieces that fit their output, and no more
    /// segments than `maxSegments`. With `includingUnselected`, every output is checked (a
    /// cache-only task fetches them all).
    public func validate(maxSegments: Int = 1_000_000, includingUnselected: Bool = false) throws(DownloadError) {
        guard outputs.contains(where: \.isSelected) else {
            throw DownloadError(.manifestInvalid, "the manifest selects no output to download")
        }
        let total = outputs.reduce(0) { $0 + $1.segments.count }
        guard total <= maxSegments else {
            throw DownloadError(.manifestTooLarge, "the manifest has \(total) segments, more than the limit of \(maxSegments)")
        }
        let checked = includingUnselected ? outputs : selectedOutputs
        var names = Set<String>()
        for output in checked {
            let name = try SafePath.relative(output.name)
            // (One output cannot share its name: no set is made for it.)
            guard checked.count == 1 || names.insert(name).inserted else {
                throw DownloadError(.manifestInvalid, "two outputs are named \"\(name)\"")
            }
            try output.validate(live: live != nil)
        }
        // Every size is at most maxTotalBytes (checked above), so these sums cannot overflow.
        var known: Int64 = 0
        for output in checked {
            known += output.knownSize ?? 0
            guard known <= Self.maxTotalBytes else {
                throw DownloadError(.manifestInvalid, "the manifest's sizes add up to more than \(Self.maxTotalBytes) bytes (1 EiB)")
            }
        }
    }

    /// The largest size, offset or total of sizes a manifest may give (1 EiB): anything larger
    /// is refused by ``validate(maxSegments:includingUnselected:)``, so that no sum or end of a
    /// range built from a manifest overflows.
    public static let maxTotalBytes: Int64 = 1 << 60
}

/// One file a manifest produces.
public struct DownloadOutput: Sendable, Codable, Hashable {
    /// How the segments become the file.
    public enum Assembly: String, Sendable, Codable, Hashable {
        /// One after the other, in order (DASH and HLS tracks, a plain download).
        case concatenated
        /// Each segment is a file of its own, named by ``DownloadSegment/name`` inside a
        /// directory named after the output.
        case separateFiles
        /// Each segment is written at its ``DownloadSegment/offset`` in the output (Metalink
        /// pieces, a large file split over several connections).
        case pieces
    }

    /// The file's path relative to the entity's destination directory; sub-directories are
    /// allowed, anything that would leave the directory is refused.
    public var name: String
    /// How segments become the file.
    public var assembly: Assembly
    /// The segments, in order: explicit, or in the compact form a large manifest needs (see
    /// ``SegmentList``).
    public var segments: SegmentList
    /// The size of the finished file, when known.
    public var expectedSize: Int64?
    /// A checksum of the finished file, verified after assembly.
    public var checksum: Checksum?
    /// Whether the default (or requested) selection takes this output.
    public var isSelected: Bool
    /// What the output is, for display and selection.
    public var media: MediaInfo?
    /// Whether ``name`` is only a first guess that the first response may replace: its
    /// `Content-Disposition` file name, or the last component of the URL it was redirected to,
    /// as wget and aria2c name plain downloads. Until then the bytes go to a partial file in the
    /// manager's work directory.
    public var isNamedByResponse: Bool

    /// Creates an output from explicit segments.
    public init(
        name: String, assembly: Assembly = .concatenated, segments: [DownloadSegment], expectedSize: Int64? = nil,
        checksum: Checksum? = nil, isSelected: Bool = true, media: MediaInfo? = nil, isNamedByResponse: Bool = false
    ) {
        self.init(
            name: name, assembly: assembly, segments: SegmentList(segments), expectedSize: expectedSize, checksum: checksum,
            isSelected: isSelected, media: media, isNamedByResponse: isNamedByResponse)
    }

    /// Creates an output from a segment list (compact or explicit).
    public init(
        name: String, assembly: Assembly = .concatenated, segments: SegmentList, expectedSize: Int64? = nil,
        checksum: Checksum? = nil, isSelected: Bool = true, media: MediaInfo? = nil, isNamedByResponse: Bool = false
    ) {
        self.isNamedByResponse = isNamedByResponse
        self.name = name
        self.assembly = assembly
        self.segments = segments
        self.expectedSize = expectedSize
        self.checksum = checksum
        self.isSelected = isSelected
        self.media = media
    }

    /// The known size of the finished file: ``expectedSize``, or the sum of the segments' when
    /// every one is known.
    public var knownSize: Int64? {
        if let expectedSize { return expectedSize }
        var total: Int64 = 0
        for index in segments.indices {
            guard let size = segments.knownSize(at: index) else { return nil }
            total = total.saturatingAdding(size)
        }
        return total
    }

    private enum CodingKeys: String, CodingKey {
        case name, assembly, segments, expectedSize, checksum, isSelected, media, isNamedByResponse
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        assembly = try container.decode(Assembly.self, forKey: .assembly)
        segments = try container.decode(SegmentList.self, forKey: .segments)
        expectedSize = try container.decodeIfPresent(Int64.self, forKey: .expectedSize)
        checksum = try container.decodeIfPresent(Checksum.self, forKey: .checksum)
        isSelected = try container.decode(Bool.self, forKey: .isSelected)
        media = try container.decodeIfPresent(MediaInfo.self, forKey: .media)
        isNamedByResponse = try container.decodeIfPresent(Bool.self, forKey: .isNamedByResponse) ?? false
    }

    /// Checks the output; a live output may have no segment yet (its stream has not published one).
    func validate(live: Bool = false) throws(DownloadError) {
        guard live || !segments.isEmpty else {
            throw DownloadError(.manifestInvalid, "the output \"\(name)\" has no segments")
        }
        if let expectedSize, expectedSize < 0 {
            throw DownloadError(.manifestInvalid, "the output \"\(name)\" has a negative size")
        }
        if let expectedSize, expectedSize > DownloadManifest.maxTotalBytes {
            throw DownloadError(.manifestInvalid, "\"\(name)\" has a size of \(expectedSize) bytes, more than 1 EiB")
        }
        try segments.validate(in: self)
        var names = Set<String>()
        var sum: Int64 = 0
        for index in segments.indices {
            // (Each size is at most maxTotalBytes: the sum of two cannot overflow.)
            sum += segments.knownSize(at: index) ?? 0
            guard sum <= DownloadManifest.maxTotalBytes else {
                throw DownloadError(.manifestInvalid, "the segments of \"\(name)\" add up to more than 1 EiB")
            }
            if assembly == .separateFiles {
                let name = try SafePath.relative(segments.name(at: index) ?? "")
                guard names.insert(name).inserted else {
                    throw DownloadError(.manifestInvalid, "two segments of \"\(self.name)\" are named \"\(name)\"")
                }
            }
        }
        if assembly == .pieces {
            // Pieces must not overlap and must fit the declared size.
            let spans = segments.indices.compactMap { index -> (Int64, Int64)? in
                guard let offset = segments.pieceOffset(at: index), let size = segments.knownSize(at: index) else { return nil }
                return (offset, offset + size)
            }.sorted { $0.0 < $1.0 }
            for (previous, next) in zip(spans, spans.dropFirst()) where previous.1 > next.0 {
                throw DownloadError(.manifestInvalid, "pieces of \"\(name)\" overlap at byte \(next.0)")
            }
            if let expectedSize, let last = spans.last, last.1 > expectedSize {
                throw DownloadError(.manifestInvalid, "a piece of \"\(name)\" ends after the file's size \(expectedSize)")
            }
        }
    }
}

/// One transfer's worth of an output.
public struct DownloadSegment: Sendable, Codable, Hashable {
    /// Where the bytes are: the primary URL first, then mirrors and backups in the order to try them.
    public var urls: [URL]
    /// The bytes of the resource that make this segment, or `nil` for the whole resource.
    public var range: ByteRange?
    /// The segment's size, when known (a range's length, a `size` in the manifest).
    public var expectedSize: Int64?
    /// A checksum of the segment's bytes.
    public var checksum: Checksum?
    /// Extra header fields for this segment's requests.
    public var headers: HTTPHeaders
    /// For ``DownloadOutput/Assembly/pieces``: where the segment goes in the output
    /// (defaults to the range's offset).
    public var offset: Int64?
    /// For ``DownloadOutput/Assembly/separateFiles``: the segment's file name.
    public var name: String?
    /// How the bytes are encrypted, if they are (HLS AES-128).
    public var encryption: SegmentEncryption?

    /// Creates a segment.
    public init(
        urls: [URL], range: ByteRange? = nil, expectedSize: Int64? = nil, checksum: Checksum? = nil,
        headers: HTTPHeaders = HTTPHeaders(), offset: Int64? = nil, name: String? = nil,
        encryption: SegmentEncryption? = nil
    ) {
        self.urls = urls
        self.range = range
        self.expectedSize = expectedSize
        self.checksum = checksum
        self.headers = headers
        self.offset = offset
        self.name = name
        self.encryption = encryption
    }

    /// A segment with one URL.
    public init(url: URL, range: ByteRange? = nil, expectedSize: Int64? = nil, checksum: Checksum? = nil) {
        self.init(urls: [url], range: range, expectedSize: expectedSize, checksum: checksum)
    }

    /// The segment's size when known: ``expectedSize`` or the range's length.
    public var knownSize: Int64? { expectedSize ?? range?.length }

    /// Where a piece goes in its output.
    public var pieceOffset: Int64? { offset ?? range?.offset }

    func validate(in output: DownloadOutput, index: Int) throws(DownloadError) {
        // (Made only for an error: most segments pass.)
        func label() -> String { "segment \(index + 1) of \"\(output.name)\"" }
        guard !urls.isEmpty else { throw DownloadError(.manifestInvalid, "\(label()) has no URL") }
        for url in urls { try URLSafety.check(url, naming: label()) }
        try Self.validate(range: range, expectedSize: expectedSize, encrypted: encryption != nil, label: label())
        if let offset, offset < 0 || offset > DownloadManifest.maxTotalBytes - (knownSize ?? 0) {
            throw DownloadError(.manifestInvalid, "\(label()) is placed at \(offset), outside 0 … 1 EiB")
        }
        if headers.firstInvalidField != nil {
            throw DownloadError(.unsafeInput, "\(label()) has a header field that cannot be sent")
        }
        if output.assembly == .pieces, pieceOffset == nil {
            throw DownloadError(.manifestInvalid, "\(label()) is a piece without an offset")
        }
        if output.assembly == .pieces, knownSize == nil {
            throw DownloadError(.manifestInvalid, "\(label()) is a piece without a size")
        }
    }

    /// The checks of a segment's size and range: not negative, within 1 EiB, and the same
    /// length when both are given (unless encrypted: padding).
    static func validate(range: ByteRange?, expectedSize: Int64?, encrypted: Bool, label: @autoclosure () -> String) throws(DownloadError) {
        if let expectedSize, expectedSize < 0 {
            throw DownloadError(.manifestInvalid, "\(label()) has a negative size")
        }
        if let expectedSize, expectedSize > DownloadManifest.maxTotalBytes {
            throw DownloadError(.manifestInvalid, "\(label()) has a size of \(expectedSize) bytes, more than 1 EiB")
        }
        if let range, range.offset > DownloadManifest.maxTotalBytes || (range.length ?? 0) > DownloadManifest.maxTotalBytes - range.offset {
            throw DownloadError(.manifestInvalid, "\(label()) has a range that ends past 1 EiB")
        }
        if let length = range?.length, let expectedSize, length != expectedSize, !encrypted {
            throw DownloadError(.manifestInvalid, "\(label()) has a range of \(length) bytes but a size of \(expectedSize)")
        }
    }
}

/// How a segment is encrypted.
public struct SegmentEncryption: Sendable, Codable, Hashable {
    /// The cipher.
    public enum Method: String, Sendable, Codable, Hashable {
        /// AES-128 in CBC mode with PKCS#7 padding (HLS `METHOD=AES-128`).
        case aes128
    }

    /// The cipher.
    public var method: Method
    /// Where the 16-byte key is.
    public var keyURL: URL
    /// The initialisation vector (16 bytes).
    public var iv: [UInt8]

    /// Creates an encryption description.
    public init(method: Method, keyURL: URL, iv: [UInt8]) {
        self.method = method
        self.keyURL = keyURL
        self.iv = iv
    }
}

/// What an output holds, for display and for choosing between variants.
public struct MediaInfo: Sendable, Codable, Hashable {
    /// The kind of track.
    public enum Kind: String, Sendable, Codable, Hashable {
        case video, audio, subtitles, muxed, other
    }

    /// The kind of track.
    public var kind: Kind
    /// The manifest's own name for it (a representation id, a rendition name).
    public var identifier: String?
    /// Bits per second.
    public var bandwidth: Int?
    /// Pixels, for video.
    public var width: Int?
    /// Pixels, for video.
    public var height: Int?
    /// RFC 6381 codecs string.
    public var codecs: String?
    /// A language tag.
    public var language: String?
    /// A quality code or label from the source.
    public var quality: String?

    /// Creates a description.
    public init(
        kind: Kind, identifier: String? = nil, bandwidth: Int? = nil, width: Int? = nil, height: Int? = nil,
        codecs: String? = nil, language: String? = nil, quality: String? = nil
    ) {
        self.kind = kind
        self.identifier = identifier
        self.bandwidth = bandwidth
        self.width = width
        self.height = height
        self.codecs = codecs
        self.language = language
        self.quality = quality
    }
}

extension MediaInfo {
    /// The name a track's file is saved under (without its extension): its `name` (an HLS
    /// rendition's `NAME`, a DASH representation's id), or its `language` when the name says
    /// no more than the track's kind and a number (`audio_3`, `audio-4`, `stream_2`, `7`, as
    /// ffmpeg's muxers name them): `en.m4a` and `de.m4a` tell two files apart, `audio_3.m4a` and
    /// `audio_4.m4a` do not. The caller makes the result a safe, unique file name.
    /// A language that is not a plain tag (letters, digits and `-`, as BCP 47 writes them) is
    /// not used.
    public static func trackFileName(name: String, language: String?) -> String {
        guard let language, (1...35).contains(language.utf8.count), isGenericTrackName(name),
            language.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
        else { return name }
        return language
    }

    /// Whether `name` is only a kind of track and a number (see ``trackFileName(name:language:)``).
    static func isGenericTrackName(_ name: String) -> Bool {
        let lowered = name.lowercased()
        let word = lowered.prefix { $0.isLetter }
        var rest = lowered.dropFirst(word.count)
        if let first = rest.first, first == "_" || first == "-" || first == " " { rest = rest.dropFirst() }
        let kinds: Set<Substring> = ["", "audio", "aud", "sound", "track", "stream", "video", "subtitles", "subtitle", "subs", "text"]
        guard kinds.contains(word), rest.allSatisfy(\.isNumber) else { return false }
        return !(word.isEmpty && rest.isEmpty)
    }
}
