import Foundation

/// An output's segments, kept the way a manifest describes them: a URL pattern and a numbering,
/// a list of URL references against a base, or explicit ``DownloadSegment`` values. A segment
/// is built when it is read, so a manifest of hundreds of thousands of segments costs a few
/// bytes per segment instead of a `URL` and its arrays each.
///
/// It reads like an array of ``DownloadSegment`` (it is a `RandomAccessCollection`, and an
/// array literal makes one); plugins with few segments can keep building arrays. Large lists
/// come from ``numbered(_:against:numbering:headers:context:)`` and ``Builder``.
public struct SegmentList: RandomAccessCollection, Sendable, Hashable, Codable, ExpressibleByArrayLiteral {
    /// The runs, in order, and the index after each run's last segment.
    private var runs: [Run]
    private var ends: [Int]

    /// An empty list.
    public init() {
        runs = []
        ends = []
    }

    /// Explicit segments.
    public init(_ segments: [DownloadSegment]) {
        self.init()
        if !segments.isEmpty { appendRun(.explicit(segments)) }
    }

    public init(arrayLiteral elements: DownloadSegment...) { self.init(elements) }

    public var startIndex: Int { 0 }
    public var endIndex: Int { ends.last ?? 0 }

    /// The segment at `index`, built from the compact form; setting one turns the list into
    /// explicit segments (meant for small lists and tests).
    public subscript(index: Int) -> DownloadSegment {
        get {
            let (run, offset) = locate(index)
            return runs[run].segment(at: offset)
        }
        set {
            let (run, offset) = locate(index)
            if case .explicit(var segments) = runs[run] {
                runs[run] = .explicit([])
                segments[offset] = newValue
                runs[run] = .explicit(segments)
            } else {
                var segments = runs[run].all
                segments[offset] = newValue
                runs[run] = .explicit(segments)
            }
        }
    }

    /// Appends a segment.
    public mutating func append(_ segment: DownloadSegment) {
        if case .explicit(var segments) = runs.last {
            runs[runs.count - 1] = .explicit([])
            segments.append(segment)
            runs[runs.count - 1] = .explicit(segments)
            ends[ends.count - 1] += 1
        } else {
            appendRun(.explicit([segment]))
        }
    }

    /// Appends the segments of `other`, keeping their compact form.
    public mutating func append(contentsOf other: SegmentList) {
        for run in other.runs { appendRun(run) }
    }

    /// Appends explicit segments.
    public mutating func append(contentsOf segments: [DownloadSegment]) {
        for segment in segments { append(segment) }
    }

    private mutating func appendRun(_ run: Run) {
        guard run.count > 0 else { return }
        runs.append(run)
        ends.append(endIndex + run.count)
    }

    /// Which run holds `index`, and where in it.
    private func locate(_ index: Int) -> (run: Int, offset: Int) {
        precondition(index >= 0 && index < endIndex, "segment index \(index) out of range 0..<\(endIndex)")
        if runs.count == 1 { return (0, index) }
        let run = SegmentNumbering.position(of: index, in: ends)
        return (run, index - (run == 0 ? 0 : ends[run - 1]))
    }

    // MARK: - Reading without building URLs

    /// The size of the segment at `index` when known (as ``DownloadSegment/knownSize``),
    /// without building its URLs.
    public func knownSize(at index: Int) -> Int64? {
        let (run, offset) = locate(index)
        switch runs[run] {
        case .explicit(let segments): return segments[offset].knownSize
        case .numbered: return nil
        case .listed(let list): return list.range(at: offset)?.length
        }
    }

    /// Whether the segment at `index` is encrypted, without building its URLs.
    public func isEncrypted(at index: Int) -> Bool {
        let (run, offset) = locate(index)
        switch runs[run] {
        case .explicit(let segments): return segments[offset].encryption != nil
        case .numbered: return false
        case .listed(let list): return list.encryption(at: offset) != nil
        }
    }

    /// The checksum of the segment at `index`, without building its URLs.
    public func checksum(at index: Int) -> Checksum? {
        let (run, offset) = locate(index)
        guard case .explicit(let segments) = runs[run] else { return nil }
        return segments[offset].checksum
    }

    /// The byte range of the segment at `index`, without building its URLs.
    public func range(at index: Int) -> ByteRange? {
        let (run, offset) = locate(index)
        switch runs[run] {
        case .explicit(let segments): return segments[offset].range
        case .numbered: return nil
        case .listed(let list): return list.range(at: offset)
        }
    }

    /// The extra header fields of the segment at `index`, without building its URLs.
    public func headers(at index: Int) -> HTTPHeaders {
        let (run, offset) = locate(index)
        switch runs[run] {
        case .explicit(let segments): return segments[offset].headers
        case .numbered(let numbered): return numbered.headers
        case .listed(let list): return list.headers
        }
    }

    /// Whether `other` has the same segments but for their URLs: the same count, ranges, sizes,
    /// checksums, offsets, names and header fields (fresh signatures keep the progress made).
    public func hasSameLayout(as other: SegmentList) -> Bool {
        guard count == other.count else { return false }
        if runs == other.runs { return true }
        for index in indices {
            guard range(at: index) == other.range(at: index), knownSize(at: index) == other.knownSize(at: index),
                checksum(at: index) == other.checksum(at: index), pieceOffset(at: index) == other.pieceOffset(at: index),
                name(at: index) == other.name(at: index), headers(at: index) == other.headers(at: index)
            else { return false }
        }
        return true
    }

    /// The file name of the segment at `index` (``DownloadSegment/name``).
    public func name(at index: Int) -> String? {
        let (run, offset) = locate(index)
        guard case .explicit(let segments) = runs[run] else { return nil }
        return segments[offset].name
    }

    /// Where the segment at `index` goes in a ``DownloadOutput/Assembly/pieces`` output
    /// (``DownloadSegment/pieceOffset``).
    public func pieceOffset(at index: Int) -> Int64? {
        let (run, offset) = locate(index)
        switch runs[run] {
        case .explicit(let segments): return segments[offset].pieceOffset
        case .numbered: return nil
        case .listed(let list): return list.range(at: offset)?.offset
        }
    }

    /// Checks every segment as ``DownloadOutput/validate()`` needs; a compact run's URLs and
    /// headers were checked when it was made.
    func validate(in output: DownloadOutput) throws(DownloadError) {
        var start = 0
        for (run, end) in zip(runs, ends) {
            defer { start = end }
            switch run {
            case .explicit(let segments):
                for (offset, segment) in segments.enumerated() { try segment.validate(in: output, index: start + offset) }
            case .numbered:
                if output.assembly == .pieces {
                    throw DownloadError(.manifestInvalid, "segment \(start + 1) of \"\(output.name)\" is a piece without an offset")
                }
            case .listed(let list):
                for offset in 0..<list.count {
                    let range = list.range(at: offset)
                    let label = "segment \(start + offset + 1) of \"\(output.name)\""
                    try DownloadSegment.validate(range: range, expectedSize: range?.length, encrypted: false, label: label)
                    if output.assembly == .pieces, range?.length == nil {
                        throw DownloadError(.manifestInvalid, "\(label) is a piece without a size")
                    }
                }
            }
        }
    }

    /// Whether any segment has a checksum.
    public var hasChecksums: Bool {
        runs.contains { run in
            if case .explicit(let segments) = run { segments.contains { $0.checksum != nil } } else { false }
        }
    }

    /// The sizes of the segments whose size is known and that are not encrypted, added up
    /// (saturating), and how many others there are, without building any URL.
    public var sizeSummary: (knownBytes: Int64, unknownCount: Int) {
        var known: Int64 = 0, unknown = 0
        for index in indices {
            if let size = knownSize(at: index), !isEncrypted(at: index) { known = known.saturatingAdding(size) } else { unknown += 1 }
        }
        return (known, unknown)
    }

    /// How many segments' first usable URL is on each host: `key` names the host of a segment
    /// (given the segment). A run whose segments all share their hosts is asked once.
    public func countByHost(_ key: (DownloadSegment) -> String) -> [String: Int] {
        var counts: [String: Int] = [:]
        var start = 0
        for (run, end) in zip(runs, ends) {
            if run.hasUniformHosts {
                counts[key(run.segment(at: 0)), default: 0] += run.count
            } else {
                for index in start..<end { counts[key(self[index]), default: 0] += 1 }
            }
            start = end
        }
        return counts
    }

    // MARK: - Equality

    public static func == (lhs: SegmentList, rhs: SegmentList) -> Bool {
        if lhs.runs == rhs.runs { return true }
        guard lhs.count == rhs.count else { return false }
        return zip(lhs, rhs).allSatisfy { $0 == $1 }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        hasher.combine(first)
        hasher.combine(last)
    }

    // MARK: - Coding

    private enum CodingKeys: String, CodingKey { case runs }

    /// Decodes the compact form, or a plain array of segments (the form stores written before
    /// compact lists).
    public init(from decoder: any Decoder) throws {
        self.init()
        if let array = try? decoder.singleValueContainer().decode([DownloadSegment].self) {
            if !array.isEmpty { appendRun(.explicit(array)) }
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        for run in try container.decode([Run].self, forKey: .runs) { appendRun(run) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(runs, forKey: .runs)
    }
}

// MARK: - Building compact lists

extension SegmentList {
    /// Numbered segments: `pattern` (absolute, or relative to each of `bases`: the first is the
    /// primary URL, the rest mirrors) expanded for each segment of `numbering`. The URLs are
    /// checked here, once: a pattern whose expansion would not be a safe `http(s)` URL is
    /// refused with `context` in the message ("a segment URL of …").
    public static func numbered(
        _ pattern: SegmentURLPattern, against bases: [URL], numbering: SegmentNumbering, headers: HTTPHeaders = HTTPHeaders(),
        context: String
    ) throws(DownloadError) -> SegmentList {
        let run = try NumberedRun(pattern: pattern, bases: bases, numbering: numbering, headers: headers, context: context)
        var list = SegmentList()
        list.appendRun(.numbered(run))
        return list
    }

    /// Builds a list of URL references (an HLS playlist's URIs, a DASH `SegmentList`), each
    /// resolved against the same bases, with an optional byte range and encryption each. A
    /// reference is checked when it is appended and resolved again when its segment is read:
    /// only its text is kept.
    public struct Builder: Sendable {
        private var run: ListedRun
        private var encryptionIndex: [SegmentEncryption: Int32] = [:]
        private let context: String

        /// A builder for references relative to `bases` (the first is the primary; each other
        /// base gives a mirror URL for a relative reference), sent with `headers`; `context`
        /// names the URLs in messages.
        public init(bases: [URL], headers: HTTPHeaders = HTTPHeaders(), context: String) throws(DownloadError) {
            run = try ListedRun(bases: bases, headers: headers)
            self.context = context
        }

        /// How many segments so far.
        public var count: Int { run.count }

        /// Appends a segment: `reference` resolved against the bases (`nil`: the bases
        /// themselves), with `range` and `encryption`.
        public mutating func append(
            reference: String?, range: ByteRange? = nil, encryption: SegmentEncryption? = nil
        ) throws(DownloadError) {
            var encryptionNumber: Int32 = -1
            if let encryption {
                if let known = encryptionIndex[encryption] {
                    encryptionNumber = known
                } else {
                    encryptionNumber = Int32(truncatingIfNeeded: run.encryptions.count)
                    run.encryptions.append(encryption)
                    encryptionIndex[encryption] = encryptionNumber
                }
            }
            try run.append(reference: reference, range: range, encryption: encryptionNumber, context: context)
        }

        /// The list.
        public func list() -> SegmentList {
            var list = SegmentList()
            list.appendRun(.listed(run))
            return list
        }
    }
}

// MARK: - Runs

extension SegmentList {
    enum Run: Sendable, Hashable, Codable {
        case explicit([DownloadSegment])
        case numbered(NumberedRun)
        case listed(ListedRun)

        var count: Int {
            switch self {
            case .explicit(let segments): segments.count
            case .numbered(let run): run.numbering.count
            case .listed(let run): run.count
            }
        }

        func segment(at offset: Int) -> DownloadSegment {
            switch self {
            case .explicit(let segments): segments[offset]
            case .numbered(let run): run.segment(at: offset)
            case .listed(let run): run.segment(at: offset)
            }
        }

        var all: [DownloadSegment] { (0..<count).map(segment(at:)) }

        /// Whether every segment's URLs are on the same hosts as the first one's.
        var hasUniformHosts: Bool {
            switch self {
            case .explicit(let segments): segments.count == 1
            case .numbered(let run): run.hasUniformHosts
            case .listed(let run): run.hasUniformHosts
            }
        }
    }
}

/// A URL marker for a pattern's holes while it is resolved against a base: unreserved
/// characters only, so resolution leaves it as it is.
private let holeMarker = "~TeSsErAhOlE"

/// Numbered segments: one pattern per URL (primary, then mirrors), resolved against its base
/// once, expanded per segment.
struct NumberedRun: Sendable, Hashable, Codable {
    struct Mirror: Sendable, Hashable, Codable {
        /// Absolute when `base` is `nil`; else resolved against `base` for each segment.
        var pattern: SegmentURLPattern
        var base: URL?
    }

    var mirrors: [Mirror]
    var numbering: SegmentNumbering
    var headers: HTTPHeaders
    var hasUniformHosts: Bool

    init(pattern: SegmentURLPattern, bases: [URL], numbering: SegmentNumbering, headers: HTTPHeaders, context: String) throws(DownloadError) {
        if headers.firstInvalidField != nil {
            throw DownloadError(.unsafeInput, "\(context) has a header field that cannot be sent")
        }
        let sample = pattern.expand(number: 0, time: 0)
        let candidates: [URL?] = URLSafety.hasScheme(sample) || bases.count <= 1 ? [bases.first] : bases
        var mirrors: [Mirror] = []
        var uniform = true
        for base in candidates {
            let mirror = try Self.resolve(pattern, against: base, context: context)
            guard !mirrors.contains(mirror) else { continue }
            mirrors.append(mirror)
            if mirror.base != nil || !Self.holesFollowAuthority(mirror.pattern) { uniform = false }
        }
        self.mirrors = mirrors
        self.numbering = numbering
        self.headers = headers
        hasUniformHosts = uniform
        // Holes only ever hold digits, so the first and the last segment stand for them all.
        if numbering.count > 0 {
            for index in Set([0, numbering.count - 1]) {
                for url in try urls(at: index, context: context) { try URLSafety.check(url, context: context) }
            }
        }
    }

    /// `pattern` resolved against `base` with its holes kept; when the resolution does not keep
    /// them in place, the pattern stays relative and each segment is resolved on its own.
    private static func resolve(_ pattern: SegmentURLPattern, against base: URL?, context: String) throws(DownloadError) -> Mirror {
        var marked = ""
        var texts: [String] = []
        for (index, part) in pattern.parts.enumerated() {
            if case .text(let text) = part {
                marked += text
                texts.append(text)
            } else {
                marked += "\(holeMarker)\(index)~"
            }
        }
        guard !texts.contains(where: { $0.contains(holeMarker) }) else { return Mirror(pattern: pattern, base: base) }
        let absolute = try URLSafety.resolve(marked, against: base, context: context).absoluteString
        // Split the absolute text at the markers, which must come back in order.
        var parts: [SegmentURLPattern.Part] = []
        var rest = Substring(absolute)
        for (index, part) in pattern.parts.enumerated() {
            if case .text = part { continue }
            let marker = "\(holeMarker)\(index)~"
            guard let found = rest.range(of: marker) else { return Mirror(pattern: pattern, base: base) }
            if found.lowerBound > rest.startIndex { parts.append(.text(String(rest[..<found.lowerBound]))) }
            parts.append(part)
            rest = rest[found.upperBound...]
        }
        if !rest.isEmpty { parts.append(.text(String(rest))) }
        guard !rest.contains(holeMarker) else { return Mirror(pattern: pattern, base: base) }
        return Mirror(pattern: SegmentURLPattern(parts), base: nil)
    }

    /// Whether an absolute pattern's holes all come after its host and port.
    private static func holesFollowAuthority(_ pattern: SegmentURLPattern) -> Bool {
        guard case .text(let first) = pattern.parts.first, let scheme = first.range(of: "://") else { return false }
        return first[scheme.upperBound...].contains("/")
    }

    func urls(at offset: Int, context: String = "a segment URL") throws(DownloadError) -> [URL] {
        let number = numbering.number(at: offset), time = numbering.time(at: offset)
        var urls: [URL] = []
        urls.reserveCapacity(mirrors.count)
        for mirror in mirrors {
            let text = mirror.pattern.expand(number: number, time: time)
            if let base = mirror.base {
                urls.append(try URLSafety.resolve(text, against: base, context: context))
            } else if let url = URL(string: text) {
                urls.append(url)
            } else {
                throw DownloadError(.manifestInvalid, "\(context) is not a URL: \(UntrustedText.quoted(text))")
            }
        }
        return urls
    }

    func segment(at offset: Int) -> DownloadSegment {
        // Checked when the run was made: the first and last expansion pass, and the others differ
        // from them only in digits.
        let urls = (try? urls(at: offset)) ?? []
        return DownloadSegment(urls: urls, headers: headers)
    }
}

/// URL references (as written in the manifest) against shared bases, kept as text.
struct ListedRun: Sendable, Hashable, Codable {
    struct Base: Sendable, Hashable {
        var url: URL
        /// The text a simple reference is appended to (the base up to its last `/`).
        var directory: String
    }

    var bases: [Base]
    var headers: HTTPHeaders
    /// The references' UTF-8 text, one after the other, and where each ends.
    var text: [UInt8] = []
    var ends: [UInt32] = []
    /// One per segment, or empty when no segment has a range.
    var ranges: [ByteRange?] = []
    var encryptions: [SegmentEncryption] = []
    /// One per segment (-1: none), or empty when no segment is encrypted.
    var encryptionNumbers: [Int32] = []
    var hasUniformHosts = true

    var count: Int { ends.count }

    init(bases: [URL], headers: HTTPHeaders) throws(DownloadError) {
        if headers.firstInvalidField != nil {
            throw DownloadError(.unsafeInput, "a segment has a header field that cannot be sent")
        }
        self.headers = headers
        self.bases = try bases.map { url throws(DownloadError) in
            try URLSafety.check(url, context: "the manifest's base URL")
            return Base(url: url, directory: URLSafety.directory(of: url))
        }
    }

    mutating func append(reference: String?, range: ByteRange?, encryption: Int32, context: String) throws(DownloadError) {
        let reference = reference.map(Self.trimmed) ?? ""
        guard text.count + reference.utf8.count < Int(UInt32.max) else {
            throw DownloadError(.manifestTooLarge, "the manifest's segment URLs add up to more than 4 GB")
        }
        let label = "\(context) (segment \(count + 1))"
        if reference.isEmpty {
            guard !bases.isEmpty else { throw DownloadError(.manifestInvalid, "\(label) has no URL") }
        } else if !(URLSafety.isPlainRelative(reference) && !bases.isEmpty && !bases.contains { $0.directory.isEmpty }) {
            // Anything but a plain relative path is resolved now, once, to be checked.
            for url in try resolve(reference, context: label) where url.host != bases.first?.url.host {
                hasUniformHosts = false
            }
            if bases.count > 1 { hasUniformHosts = false }
        }
        if let range {
            if ranges.isEmpty { ranges = Array(repeating: nil, count: count) }
            ranges.append(range)
        } else if !ranges.isEmpty {
            ranges.append(nil)
        }
        if encryption >= 0 {
            if encryptionNumbers.isEmpty { encryptionNumbers = Array(repeating: -1, count: count) }
            encryptionNumbers.append(encryption)
        } else if !encryptionNumbers.isEmpty {
            encryptionNumbers.append(-1)
        }
        text.append(contentsOf: reference.utf8)
        ends.append(UInt32(text.count))
    }

    /// `text` without white space around it (the common case, none, costs no copy).
    static func trimmed(_ text: String) -> String {
        let utf8 = text.utf8
        guard let first = utf8.first, let last = utf8.last else { return text }
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) || byte >= 0x80 }
        guard isSpace(first) || isSpace(last) else { return text }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The URLs of a reference: absolute, or against each base (duplicates dropped).
    private func resolve(_ reference: String, context: String) throws(DownloadError) -> [URL] {
        if URLSafety.hasScheme(reference) || bases.count <= 1 {
            return [try URLSafety.resolve(reference, against: bases.first?.url, context: context)]
        }
        var urls: [URL] = []
        for base in bases {
            let url = try URLSafety.resolve(reference, against: base.url, context: context)
            if !urls.contains(url) { urls.append(url) }
        }
        return urls
    }

    func reference(at offset: Int) -> String {
        let start = offset == 0 ? 0 : Int(ends[offset - 1]), end = Int(ends[offset])
        return String(decoding: text[start..<end], as: UTF8.self)
    }

    func range(at offset: Int) -> ByteRange? { ranges.isEmpty ? nil : ranges[offset] }

    func encryption(at offset: Int) -> SegmentEncryption? {
        guard !encryptionNumbers.isEmpty, encryptionNumbers[offset] >= 0 else { return nil }
        return encryptions[Int(encryptionNumbers[offset])]
    }

    func segment(at offset: Int) -> DownloadSegment {
        let reference = reference(at: offset)
        let urls: [URL]
        if reference.isEmpty {
            urls = bases.map(\.url)
        } else if URLSafety.isPlainRelative(reference), !bases.isEmpty, !bases.contains(where: { $0.directory.isEmpty }) {
            var simple: [URL] = []
            for base in bases {
                if let url = URL(string: base.directory + reference), !simple.contains(url) { simple.append(url) }
            }
            urls = simple
        } else {
            // Checked when it was appended.
            urls = (try? resolve(reference, context: "a segment URL")) ?? []
        }
        let range = range(at: offset), encryption = encryption(at: offset)
        // An encrypted segment's size is known only once it is decrypted.
        return DownloadSegment(
            urls: urls, range: range, expectedSize: encryption == nil ? range?.length : nil, headers: headers, encryption: encryption)
    }

    // MARK: Coding

    private enum CodingKeys: String, CodingKey { case bases, headers, references, ranges, encryptions, encryptionNumbers }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        do {
            try self.init(bases: container.decode([URL].self, forKey: .bases), headers: container.decode(HTTPHeaders.self, forKey: .headers))
        } catch let error as DownloadError {
            throw DecodingError.dataCorruptedError(forKey: .bases, in: container, debugDescription: error.message)
        }
        let references = try container.decode([String].self, forKey: .references)
        ranges = try container.decode([ByteRange?].self, forKey: .ranges)
        encryptions = try container.decode([SegmentEncryption].self, forKey: .encryptions)
        encryptionNumbers = try container.decode([Int32].self, forKey: .encryptionNumbers)
        guard ranges.isEmpty || ranges.count == references.count,
            encryptionNumbers.isEmpty || encryptionNumbers.count == references.count,
            encryptionNumbers.allSatisfy({ $0 < encryptions.count })
        else {
            throw DecodingError.dataCorruptedError(forKey: .references, in: container, debugDescription: "inconsistent segment list")
        }
        for reference in references {
            guard !reference.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
                throw DecodingError.dataCorruptedError(forKey: .references, in: container, debugDescription: "a reference with a control character")
            }
            text.append(contentsOf: reference.utf8)
            ends.append(UInt32(truncatingIfNeeded: text.count))
            if !(reference.isEmpty || URLSafety.isPlainRelative(reference)) { hasUniformHosts = false }
        }
        if bases.count > 1 { hasUniformHosts = false }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(bases.map(\.url), forKey: .bases)
        try container.encode(headers, forKey: .headers)
        try container.encode((0..<count).map(reference(at:)), forKey: .references)
        try container.encode(ranges, forKey: .ranges)
        try container.encode(encryptions, forKey: .encryptions)
        try container.encode(encryptionNumbers, forKey: .encryptionNumbers)
    }
}

extension SegmentList {
    /// The URLs of the segment at `index` (its first, then its mirrors).
    func urls(at index: Int) -> [URL] { self[index].urls }

    /// The URLs of the segment at `index` as text, when it has nothing but its URLs and the
    /// compact form holds them as text (a numbered run of absolute patterns): no `URL` value is
    /// built. `nil` for any other segment (read it with the subscript).
    package func plainURLTexts(at index: Int) -> [String]? {
        let (run, offset) = locate(index)
        guard case .numbered(let numbered) = runs[run], numbered.headers.isEmpty,
            numbered.mirrors.allSatisfy({ $0.base == nil })
        else { return nil }
        let number = numbered.numbering.number(at: offset), time = numbered.numbering.time(at: offset)
        return numbered.mirrors.map { $0.pattern.expand(number: number, time: time) }
    }
}
