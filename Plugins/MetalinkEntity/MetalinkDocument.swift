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
package struct MetalinkDocument: Sendable {
    /// The two formats Tessera reads.
    package enum Version: String, Sendable, Hashable, Codable {
        /// Metalink 4, RFC 5854.
        case v4 = "4.0"
        /// Metalink 3.0, the metalinker.org format that predates the RFC.
        case v3 = "3.0"

        /// The namespace the format's elements are in.
        package var namespace: String {
            switch self {
            case .v4: MetalinkDocument.namespaceV4
            case .v3: MetalinkDocument.namespaceV3
            }
        }
    }

    /// One `<file>` of the document, as listed before its details are read.
    package struct Entry: Sendable, Hashable {
        /// The `name` attribute, exactly as written (it is checked when the file is downloaded).
        package var name: String
        /// The line of the `<file>` start tag.
        package var line: Int
    }

    /// The Metalink 4 namespace (RFC 5854).
    package static let namespaceV4 = "urn:ietf:params:xml:ns:metalink"
    /// The Metalink 3 namespace.
    package static let namespaceV3 = "http://www.metalinker.org/"
    /// At most this many mirrors of a file are used (the first ones in priority order); a
    /// document listing more is not refused, the rest are ignored.
    package static let maxMirrorsPerFile = 64
    /// The XML namespace, for `xml:base`.
    static let xmlNamespace = "http://www.w3.org/XML/1998/namespace"

    /// Which format the document is in.
    package let version: Version
    /// The URL the document was read from, after redirects: the base of its relative URLs.
    package let url: URL
    /// The files, in document order.
    package let entries: [Entry]
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
    package static func parse(
        _ data: Data, url: URL, maxFiles: Int = 1_000_000, options: XMLParseOptions = XMLParseOptions()
    ) throws(DownloadError) -> MetalinkDocument {
        try MetalinkDocument(SafeXMLDocument.parse(data, options: options, baseURL: url), url: url, maxFiles: maxFiles)
    }

    /// Reads a parsed XML document as a Metalink; see ``parse(_:url:maxFiles:options:)``.
    package init(_ xml: SafeXMLDocument, url: URL, maxFiles: Int = 1_000_000) throws(DownloadError) {
        self.url = url
        let root = xml.root
        version = try Self.version(ofRoot: root.name, prefix: root.prefix, namespace: root.namespaceURI, line: root.line, url: url)
        let prefixes = ["m": version.namespace]
        let path = version == .v4 ? "m:file" : "m:files/m:file"
        // Count before building anything.
        let count = Int(try root.evaluateString("count(\(path))", namespaces: prefixes)) ?? 0
        if let error = Self.countError(count, maxFiles: maxFiles, version: version, url: url) { throw error }
        let elements = try root.select(path, namespaces: prefixes)
        var entries: [Entry] = []
        entries.reserveCapacity(elements.count)
        for element in elements {
            guard let name = element[attribute: "name"] else { throw Self.namelessFileError(line: element.line) }
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
    package func file(named name: String, maxPieces: Int = 1_000_000) throws(DownloadError) -> MetalinkFile {
        guard let index = entries.firstIndex(where: { $0.name == name }) else { throw Self.notListedError(name, url: url) }
        return try file(at: index, maxPieces: maxPieces)
    }

    /// The details of the file at `index` in ``entries``; see ``file(named:maxPieces:)``.
    package func file(at index: Int, maxPieces: Int = 1_000_000) throws(DownloadError) -> MetalinkFile {
        precondition(entries.indices.contains(index), "no file at index \(index)")
        var reader = MetalinkFileReader(
            element: TreeElement(element: fileElements[index], namespace: version.namespace), entry: entries[index],
            version: version, url: url, maxPieces: maxPieces)
        return try reader.read()
    }

    /// `text` with control characters replaced and cut to 200 characters, for messages.
    static func printable(_ text: String) -> String { UntrustedText.printable(text) }

    // MARK: - The document's shape (shared with MetalinkStreamReader)

    /// The version of a document whose root element is `<prefix:name xmlns="namespace">` at
    /// `line`, or the error that it is not a Metalink.
    static func version(ofRoot name: String, prefix: String?, namespace: String?, line: Int, url: URL) throws(DownloadError)
        -> Version
    {
        guard name == "metalink" else {
            let element = "<\(prefix.map { "\($0):\(name)" } ?? name)> at line \(line)"
            throw DownloadError(
                .manifestInvalid,
                "the document at \(printable(url.absoluteString)) is not a Metalink: its root element is "
                    + "\(element) (expected <metalink xmlns=\"\(namespaceV4)\">, RFC 5854)")
        }
        switch namespace {
        case namespaceV4: return .v4
        case namespaceV3: return .v3
        default:
            throw DownloadError(
                .manifestInvalid,
                "the <metalink> root element at line \(line) of \(printable(url.absoluteString)) is in "
                    + (namespace.map { "the namespace \"\(printable($0))\"" } ?? "no namespace")
                    + ", not \(namespaceV4) (Metalink 4, RFC 5854) or \(namespaceV3) (Metalink 3)")
        }
    }

    /// Why a document listing `count` files is refused (none, or more than `maxFiles`), or `nil`.
    static func countError(_ count: Int, maxFiles: Int, version: Version, url: URL) -> DownloadError? {
        guard count > 0 else {
            return DownloadError(
                .manifestInvalid,
                "the Metalink at \(printable(url.absoluteString)) lists no <file> "
                    + (version == .v4 ? "(RFC 5854 requires at least one)" : "inside <files>"))
        }
        guard count <= maxFiles else {
            return DownloadError(
                .manifestTooLarge,
                "the Metalink at \(printable(url.absoluteString)) lists \(count) files, more than the limit of \(maxFiles)")
        }
        return nil
    }

    /// The error for a `<file>` without a name at `line`.
    static func namelessFileError(line: Int) -> DownloadError {
        DownloadError(
            .manifestInvalid, "the <file> element at line \(line) has no name attribute (every file of a Metalink needs one)")
    }

    /// The error for a document that has no file called `name`.
    static func notListedError(_ name: String, url: URL) -> DownloadError {
        DownloadError(
            .manifestInvalid,
            "the Metalink at \(printable(url.absoluteString)) no longer lists a file named \"\(printable(name))\"")
    }
}

/// One file of a Metalink document, with what Tessera uses of it.
package struct MetalinkFile: Sendable, Hashable {
    /// The `name` attribute as written; a relative path, checked when the file is downloaded.
    package var name: String
    /// The line of the `<file>` start tag.
    package var line: Int
    /// `<size>`: the file's size in bytes, when given.
    package var size: Int64?
    /// The whole-file hashes of known types (`md5`, `sha-1`, `sha-256`, `sha-384`, `sha-512`), in
    /// document order; hashes of other types are ignored.
    package var hashes: [Checksum]
    /// The piece hashes of the strongest known type, when the file has `<pieces>`.
    package var pieces: MetalinkPieces?
    /// The http and https mirrors, in the order to try them: by `priority` (lower first; none
    /// counts as 999999) for Metalink 4, by `preference` (higher first; none comes last) for
    /// Metalink 3; ties keep document order. At most ``MetalinkDocument/maxMirrorsPerFile``.
    package var mirrors: [MetalinkMirror]
    /// Mirrors that were left out (other protocols, unusable URLs), with the reason.
    package var skippedMirrors: [String]
    /// Things in the file that were ignored, for the log: unknown hash types, torrents, bad priorities.
    package var notes: [String]
    /// `<identity>`, `<version>`, `<description>`, `<language>`, `<os>` when present.
    package var metadata: [String: String]

    /// The strongest whole-file hash, the one a download is verified with.
    package var checksum: Checksum? { Checksum.strongest(hashes) }
}

/// A mirror of a Metalink file.
package struct MetalinkMirror: Sendable, Hashable {
    /// The URL, resolved against the document's URL (and any `xml:base`) and checked.
    package var url: URL
    /// Metalink 4's `priority` (1 ... 999999, lower first), when valid.
    package var priority: Int?
    /// Metalink 3's `preference` (0 ... 100, higher first), when valid.
    package var preference: Int?
    /// `location`: an ISO 3166-1 country code, lowercased, when given.
    package var location: String?
    /// The line of the `<url>` element.
    package var line: Int
}

/// The piece hashes of a Metalink file (`<pieces length="…" type="…">`).
package struct MetalinkPieces: Sendable, Hashable {
    /// The length of every piece but the last, in bytes.
    package var length: Int64
    /// The hash function.
    package var algorithm: Checksum.Algorithm
    /// One checksum per piece, in order.
    package var hashes: [Checksum]
    /// The line of the `<pieces>` element.
    package var line: Int
}
