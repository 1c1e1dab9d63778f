import Foundation
import Tessera

/// A parsed Metalink document: Metalink 4 (RFC 5854, namespace `urn:ietf:params:xml:ns:metalink`)
/// or Metalink 3 (namespace `http://www.metalinker.org/`).
///
/// Parsing a document only checks its shape (root element, namespace, a `name` on every
/// `<file>`) and lists its files; the details of one file (size, hashes, pieces, mirrors) are
/// read by ``file(named:maxPieces:)``, so one broken `<file>` spoils only its own download.
///
/// ```swift
/// let document = try MetalinkDocument.parse(data, url: URL(string: "https://example.com/a.meta4")!)
/// let file = try document.file(named: document.entries[0].name)
/// print(file.mirrors.map(\.url), file.checksum as Any)
/// ```
public struct MetalinkDocument: Sendable {
    /// The two formats Tessera reads.
    public enum Version: String, Sendable, Hashable, Codable {
        /// Metalink 4, RFC 5854.
        case v4 = "4.0"
        /// Metalink 3.0, the metalinker.org format that predates the RFC.
        case v3 = "3.0"

        /// The namespace the format's elements are in.
        public var namespace: String {
            switch self {
            case .v4: MetalinkDocument.namespaceV4
            case .v3: MetalinkDocument.namespaceV3
            }
        }
    }

    /// One `<file>` of the document, as listed before its details are read.
    public struct Entry: Sendable, Hashable {
        /// The `name` attribute, exactly as written (it is checked when the file is downloaded).
        public var name: String
        /// The line of the `<file>` start tag.
        public var line: Int
    }

    /// The Metalink 4 namespace (RFC 5854).
    public static let namespaceV4 = "urn:ietf:params:xml:ns:metalink"
    /// The Metalink 3 namespace.
    public static let namespaceV3 = "http://www.metalinker.org/"
    /// At most this many mirrors of a file are used (the first ones in priority order); a
    /// document listing more is not refused, the rest are ignored.
    public static let maxMirrorsPerFile = 64
    /// The XML namespace, for `xml:base`.
    static let xmlNamespace = "http://www.w3.org/XML/1998/namespace"

    /// Which format the document is in.
    public let version: Version
    /// The URL the document was read from, after redirects: the base of its relative URLs.
    public let url: URL
    /// The files, in document order.
    public let entries: [Entry]
    /// The `<file>` elements, parallel to ``entries``.
    let fileElements: [SafeXMLElement]

    /// Parses a document from bytes.
    ///
    /// - Parameters:
    ///   - data: The document.
    ///   - url: Where it came from, after redirects; relative URLs are resolved against it.
    ///   - maxFiles: At most this many `<file>` elements (more is refused with
    ///     ``DownloadError/Code/manifestTooLarge`` before any is read).
    ///   - options: XML size, depth and element limits.
    /// - Throws: ``DownloadError``: ``DownloadError/Code/unsafeInput`` for entity declarations or
    ///   external entities, ``DownloadError/Code/manifestInvalid`` for malformed XML, another root
    ///   element or namespace, no files or a file without a name.
    public static func parse(
        _ data: Data, url: URL, maxFiles: Int = 1_000_000, options: XMLParseOptions = XMLParseOptions()
    ) throws(DownloadError) -> MetalinkDocument {
        try MetalinkDocument(SafeXMLDocument.parse(data, options: options, baseURL: url), url: url, maxFiles: maxFiles)
    }

    /// Reads a parsed XML document as a Metalink; see ``parse(_:url:maxFiles:options:)``.
    public init(_ xml: SafeXMLDocument, url: URL, maxFiles: Int = 1_000_000) throws(DownloadError) {
        self.url = url
        let root = xml.root
        let namespace = root.namespaceURI
        guard root.name == "metalink" else {
            throw DownloadError(
                .manifestInvalid,
                "the document at \(Self.printable(url.absoluteString)) is not a Metalink: its root element is "
                    + "\(root) (expected <metalink xmlns=\"\(Self.namespaceV4)\">, RFC 5854)")
        }
        switch namespace {
        case Self.namespaceV4: version = .v4
        case Self.namespaceV3: version = .v3
        default:
            throw DownloadError(
                .manifestInvalid,
                "the <metalink> root element at line \(root.line) of \(Self.printable(url.absoluteString)) is in "
                    + (namespace.map { "the namespace \"\(Self.printable($0))\"" } ?? "no namespace")
                    + ", not \(Self.namespaceV4) (Metalink 4, RFC 5854) or \(Self.namespaceV3) (Metalink 3)")
        }
        let prefixes = ["m": version.namespace]
        let path = version == .v4 ? "m:file" : "m:files/m:file"
        // Count before building anything.
        let count = Int(try root.evaluateString("count(\(path))", namespaces: prefixes)) ?? 0
        guard count > 0 else {
            throw DownloadError(
                .manifestInvalid,
                "the Metalink at \(Self.printable(url.absoluteString)) lists no <file> "
                    + (version == .v4 ? "(RFC 5854 requires at least one)" : "inside <files>"))
        }
        guard count <= maxFiles else {
            throw DownloadError(
                .manifestTooLarge,
                "the Metalink at \(Self.printable(url.absoluteString)) lists \(count) files, more than the limit of \(maxFiles)")
        }
        let elements = try root.select(path, namespaces: prefixes)
        var entries: [Entry] = []
        entries.reserveCapacity(elements.count)
        for element in elements {
            guard let name = element[attribute: "name"] else {
                throw DownloadError(
                    .manifestInvalid,
                    "the <file> element at line \(element.line) has no name attribute "
                        + "(every file of a Metalink needs one)")
            }
            entries.append(Entry(name: name, line: element.line))
        }
        self.entries = entries
        fileElements = elements
    }

    /// The details of the first file called `name`.
    ///
    /// - Parameter maxPieces: At most this many pieces; more is refused with
    ///   ``DownloadError/Code/manifestTooLarge`` before any piece is read.
    /// - Throws: ``DownloadError/Code/manifestInvalid`` when there is no such file or its
    ///   elements are malformed (the message names the element and its line).
    public func file(named name: String, maxPieces: Int = 1_000_000) throws(DownloadError) -> MetalinkFile {
        guard let index = entries.firstIndex(where: { $0.name == name }) else {
            throw DownloadError(
                .manifestInvalid,
                "the Metalink at \(Self.printable(url.absoluteString)) no longer lists a file named \"\(Self.printable(name))\"")
        }
        return try file(at: index, maxPieces: maxPieces)
    }

    /// The details of the file at `index` in ``entries``; see ``file(named:maxPieces:)``.
    public func file(at index: Int, maxPieces: Int = 1_000_000) throws(DownloadError) -> MetalinkFile {
        precondition(entries.indices.contains(index), "no file at index \(index)")
        var reader = FileReader(document: self, element: fileElements[index], entry: entries[index], maxPieces: maxPieces)
        return try reader.read()
    }

    /// `text` with control characters replaced and cut to 200 characters, for messages.
    static func printable(_ text: String) -> String { UntrustedText.printable(text) }
}

/// One file of a Metalink document, with what Tessera uses of it.
public struct MetalinkFile: Sendable, Hashable {
    /// The `name` attribute as written; a relative path, checked when the file is downloaded.
    public var name: String
    /// The line of the `<file>` start tag.
    public var line: Int
    /// `<size>`: the file's size in bytes, when given.
    public var size: Int64?
    /// The whole-file hashes of known types (`md5`, `sha-1`, `sha-256`, `sha-384`, `sha-512`), in
    /// document order; hashes of other types are ignored.
    public var hashes: [Checksum]
    /// The piece hashes of the strongest known type, when the file has `<pieces>`.
    public var pieces: MetalinkPieces?
    /// The http and https mirrors, in the order to try them: by `priority` (lower first; none
    /// counts as 999999) for Metalink 4, by `preference` (higher first; none comes last) for
    /// Metalink 3; ties keep document order. At most ``MetalinkDocument/maxMirrorsPerFile``.
    public var mirrors: [MetalinkMirror]
    /// Mirrors that were left out (other protocols, unusable URLs), with the reason.
    public var skippedMirrors: [String]
    /// Things in the file that were ignored, for the log: unknown hash types, torrents, bad priorities.
    public var notes: [String]
    /// `<identity>`, `<version>`, `<description>`, `<language>`, `<os>` when present.
    public var metadata: [String: String]

    /// The strongest whole-file hash, the one a download is verified with.
    public var checksum: Checksum? { Checksum.strongest(hashes) }
}

/// A mirror of a Metalink file.
public struct MetalinkMirror: Sendable, Hashable {
    /// The URL, resolved against the document's URL (and any `xml:base`) and checked.
    public var url: URL
    /// Metalink 4's `priority` (1 ... 999999, lower first), when valid.
    public var priority: Int?
    /// Metalink 3's `preference` (0 ... 100, higher first), when valid.
    public var preference: Int?
    /// `location`: an ISO 3166-1 country code, lowercased, when given.
    public var location: String?
    /// The line of the `<url>` element.
    public var line: Int
}

/// The piece hashes of a Metalink file (`<pieces length="…" type="…">`).
public struct MetalinkPieces: Sendable, Hashable {
    /// The length of every piece but the last, in bytes.
    public var length: Int64
    /// The hash function.
    public var algorithm: Checksum.Algorithm
    /// One checksum per piece, in order.
    public var hashes: [Checksum]
    /// The line of the `<pieces>` element.
    public var line: Int
}

/// Reads the details of one `<file>` element.
private struct FileReader {
    let document: MetalinkDocument
    let element: SafeXMLElement
    let entry: MetalinkDocument.Entry
    let maxPieces: Int
    var notes: [String] = []

    init(document: MetalinkDocument, element: SafeXMLElement, entry: MetalinkDocument.Entry, maxPieces: Int) {
        self.document = document
        self.element = element
        self.entry = entry
        self.maxPieces = maxPieces
    }

    private var namespace: String { document.version.namespace }
    private var isV4: Bool { document.version == .v4 }
    private var label: String { "the file \"\(MetalinkDocument.printable(entry.name))\" (line \(entry.line))" }

    private func invalid(_ message: String) -> DownloadError {
        DownloadError(.manifestInvalid, "\(label): \(message)", url: document.url.absoluteString)
    }

    mutating func read() throws(DownloadError) -> MetalinkFile {
        let size = try readSize()
        // Metalink 3 keeps hashes in <verification> and URLs in <resources>.
        let verification = isV4 ? [element] : element.children(named: "verification", namespaceURI: namespace)
        let hashes = try readHashes(in: verification)
        let pieces = try readPieces(in: verification, size: size)
        if pieces != nil, size == nil {
            notes.append("\(label): <pieces> ignored, as the file has no <size> (downloaded whole, checked with its file hash)")
        }
        let resources = isV4 ? [element] : element.children(named: "resources", namespaceURI: namespace)
        let (mirrors, skipped) = readMirrors(in: resources)
        if isV4 {
            let torrents = element.children(named: "metaurl", namespaceURI: namespace).count
            if torrents > 0 { notes.append("\(label): \(torrents) <metaurl> (torrent, metalink) ignored") }
        }
        var metadata: [String: String] = [:]
        for key in ["identity", "version", "description", "language", "os"] {
            if let value = element.firstChild(named: key, namespaceURI: namespace)?.text.trimmingCharacters(in: .whitespacesAndNewlines),
                !value.isEmpty
            {
                metadata[key] = value
            }
        }
        return MetalinkFile(
            name: entry.name, line: entry.line, size: size, hashes: hashes, pieces: pieces, mirrors: mirrors,
            skippedMirrors: skipped, notes: notes, metadata: metadata)
    }

    private func readSize() throws(DownloadError) -> Int64? {
        guard let sizeElement = element.firstChild(named: "size", namespaceURI: namespace) else { return nil }
        let text = sizeElement.text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let size = Int64(text), size >= 0 else {
            throw invalid("the <size> at line \(sizeElement.line) is not a number of bytes: \"\(MetalinkDocument.printable(text))\"")
        }
        return size
    }

    private mutating func readHashes(in parents: [SafeXMLElement]) throws(DownloadError) -> [Checksum] {
        var hashes: [Checksum] = []
        for parent in parents {
            for hash in parent.children(named: "hash", namespaceURI: namespace) {
                guard let type = hash[attribute: "type"] else {
                    throw invalid("the <hash> at line \(hash.line) has no type attribute")
                }
                guard let algorithm = Checksum.Algorithm(name: type) else {
                    notes.append("\(label): a <hash> of unknown type \"\(MetalinkDocument.printable(type))\" ignored")
                    continue
                }
                hashes.append(try checksum(algorithm, hash, what: "the <hash type=\"\(type)\">"))
            }
        }
        return hashes
    }

    private func checksum(_ algorithm: Checksum.Algorithm, _ hash: SafeXMLElement, what: String) throws(DownloadError) -> Checksum {
        do {
            return try Checksum(algorithm, hex: hash.text.trimmingCharacters(in: .whitespacesAndNewlines))
        } catch {
            throw invalid("\(what) at line \(hash.line) is not a valid digest: \(error.message)")
        }
    }

    /// The `<pieces>` of the strongest known type (the first of several equally strong ones).
    private mutating func readPieces(in parents: [SafeXMLElement], size: Int64?) throws(DownloadError) -> MetalinkPieces? {
        var best: (element: SafeXMLElement, algorithm: Checksum.Algorithm, length: Int64)?
        for parent in parents {
            for pieces in parent.children(named: "pieces", namespaceURI: namespace) {
                guard let type = pieces[attribute: "type"] else {
                    throw invalid("the <pieces> at line \(pieces.line) has no type attribute")
                }
                guard let lengthText = pieces[attribute: "length"] else {
                    throw invalid("the <pieces> at line \(pieces.line) has no length attribute")
                }
                guard let length = Int64(lengthText.trimmingCharacters(in: .whitespaces)), length > 0 else {
                    throw invalid("the <pieces> at line \(pieces.line) has a length that is not a positive number: \"\(MetalinkDocument.printable(lengthText))\"")
                }
                guard let algorithm = Checksum.Algorithm(name: type) else {
                    notes.append("\(label): <pieces> of unknown type \"\(MetalinkDocument.printable(type))\" ignored")
                    continue
                }
                if let current = best, !(current.algorithm < algorithm) { continue }
                best = (pieces, algorithm, length)
            }
        }
        guard let best else { return nil }
        let element = best.element
        let subject = "the <pieces type=\"\(best.algorithm.textualName)\"> at line \(element.line)"
        // Count before reading: a size in tiny pieces, or a flood of hashes, is refused unbuilt.
        if let size {
            let expected = size / best.length + (size % best.length == 0 ? 0 : 1)
            guard expected <= Int64(maxPieces) else {
                throw DownloadError(
                    .manifestTooLarge,
                    "\(label): \(size) bytes in pieces of \(best.length) bytes are \(expected) pieces, more than the limit of \(maxPieces)",
                    url: document.url.absoluteString)
            }
        }
        let count = Int(try element.evaluateString("count(m:hash)", namespaces: ["m": namespace])) ?? 0
        guard count <= maxPieces else {
            throw DownloadError(
                .manifestTooLarge, "\(label): \(subject) lists \(count) hashes, more than the limit of \(maxPieces)",
                url: document.url.absoluteString)
        }
        if let size {
            let expected = size / best.length + (size % best.length == 0 ? 0 : 1)
            guard Int64(count) == expected else {
                throw invalid("\(subject) lists \(count) hashes, but \(size) bytes in pieces of \(best.length) bytes are \(expected)")
            }
        }
        guard count > 0 else { throw invalid("\(subject) lists no <hash>") }
        var hashes: [Checksum] = []
        hashes.reserveCapacity(count)
        var indices: [Int?] = []
        for hash in element.children(named: "hash", namespaceURI: namespace) {
            hashes.append(try checksum(best.algorithm, hash, what: "piece hash \(hashes.count + 1) of \(subject)"))
            // Metalink 3 numbers its pieces (`piece="0"`); Metalink 4 lists them in order.
            if !isV4 { indices.append(hash[attribute: "piece"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }) }
        }
        if !isV4, indices.contains(where: { $0 != nil }) {
            guard indices.allSatisfy({ $0 != nil }) else {
                throw invalid("\(subject) numbers some of its hashes with piece=\"…\" but not all")
            }
            let ordered = zip(indices.map { $0! }, hashes).sorted { $0.0 < $1.0 }
            guard ordered.enumerated().allSatisfy({ $0.offset == $0.element.0 }) else {
                throw invalid("\(subject) does not number its hashes 0 to \(count - 1) exactly once each")
            }
            hashes = ordered.map(\.1)
        }
        return MetalinkPieces(length: best.length, algorithm: best.algorithm, hashes: hashes, line: element.line)
    }

    /// The usable mirrors in the order to try them (at most ``MetalinkDocument/maxMirrorsPerFile``),
    /// and the skipped ones with the reason.
    private mutating func readMirrors(in parents: [SafeXMLElement]) -> ([MetalinkMirror], [String]) {
        var candidates: [(element: SafeXMLElement, rank: Int, priority: Int?, preference: Int?)] = []
        var skipped: [String] = []
        for parent in parents {
            for url in parent.children(named: "url", namespaceURI: namespace) {
                if !isV4, let type = url[attribute: "type"]?.lowercased(), type != "http", type != "https" {
                    // A .torrent file, an ftp or ed2k link: not the file over http.
                    skipped.append("\(shown(url)): type=\"\(MetalinkDocument.printable(type))\" is not http or https")
                    continue
                }
                var priority: Int?
                var preference: Int?
                let rank: Int
                if isV4 {
                    if let value = url[attribute: "priority"] {
                        if let number = Int(value.trimmingCharacters(in: .whitespaces)), (1...999_999).contains(number) {
                            priority = number
                        } else {
                            notes.append("\(label): the priority \"\(MetalinkDocument.printable(value))\" of the <url> at line \(url.line) is not 1 to 999999; taken as 999999")
                        }
                    }
                    rank = priority ?? 999_999
                } else {
                    if let value = url[attribute: "preference"] {
                        if let number = Int(value.trimmingCharacters(in: .whitespaces)), (0...100).contains(number) {
                            preference = number
                        } else {
                            notes.append("\(label): the preference \"\(MetalinkDocument.printable(value))\" of the <url> at line \(url.line) is not 0 to 100; ignored")
                        }
                    }
                    rank = preference.map { 100 - $0 } ?? 1_000
                }
                candidates.append((url, rank, priority, preference))
            }
        }
        // Stable: equal ranks keep document order (sort by rank, then by position).
        let ordered = candidates.enumerated().sorted {
            $0.element.rank != $1.element.rank ? $0.element.rank < $1.element.rank : $0.offset < $1.offset
        }.map(\.element)
        var mirrors: [MetalinkMirror] = []
        for (position, candidate) in ordered.enumerated() {
            guard mirrors.count < MetalinkDocument.maxMirrorsPerFile else {
                notes.append("\(label): \(ordered.count - position) more <url> ignored (at most \(MetalinkDocument.maxMirrorsPerFile) mirrors are used)")
                break
            }
            let url = candidate.element
            let resolved: URL
            do {
                resolved = try URLSafety.resolve(
                    url.text.trimmingCharacters(in: .whitespacesAndNewlines), against: base(of: url), context: "the mirror")
            } catch {
                skipped.append("\(shown(url)): \(error.message)")
                continue
            }
            let location = url[attribute: "location"].map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            mirrors.append(MetalinkMirror(
                url: resolved, priority: candidate.priority, preference: candidate.preference,
                location: location?.isEmpty == false ? location : nil, line: url.line))
        }
        return (mirrors, skipped)
    }

    /// A `<url>` for messages: its text and line.
    private func shown(_ url: SafeXMLElement) -> String {
        "\"\(MetalinkDocument.printable(url.text.trimmingCharacters(in: .whitespacesAndNewlines)))\" (line \(url.line))"
    }

    /// The base URL of an element's relative references: the document's URL, refined by any
    /// `xml:base` on the element and its ancestors (outermost first).
    private func base(of element: SafeXMLElement) -> URL {
        var bases: [String] = []
        var current: SafeXMLElement? = element
        while let node = current {
            if let base = node.attribute("base", namespaceURI: MetalinkDocument.xmlNamespace) { bases.append(base) }
            current = node.parent
        }
        var url = document.url
        for base in bases.reversed() {
            let trimmed = base.trimmingCharacters(in: .whitespacesAndNewlines)
            if let next = URL(string: trimmed, relativeTo: url)?.absoluteURL { url = next }
        }
        return url
    }
}
