import Foundation
import Tessera

/// Reads a Metalink document (Metalink 4, RFC 5854, or Metalink 3) one `<file>` at a time,
/// without a tree of the document: memory stays that of one file, however many the document
/// lists (a ``MetalinkDocument`` holds the whole document as a tree, several times its size).
///
/// It reads the same files as ``MetalinkDocument`` does from the same bytes, and fails the same
/// way: each file's details (or the error that spoils only that file) come with it, and what
/// is wrong with the document as a whole (malformed XML, another root element, no files, more
/// than `maxFiles`, a file without a name) is thrown once the whole document has been read, as
/// the tree parser would, with the same codes and messages. The XML is read by
/// ``XMLStreamReader``, with the same safety limits as the tree parser. (Past line 65535 of a
/// document, where libxml2 keeps no line for an element, both take a line from nearby text, and
/// may take it from different places.)
///
/// ```swift
/// let reader = try MetalinkStreamReader(data: data, url: URL(string: "https://example.com/a.meta4")!)
/// while let item = try reader.next() {
///     print(item.entry.name, (try? item.file.get())?.mirrors.count ?? 0)
/// }
/// ```
///
/// The reader is a single-threaded object, like the ``XMLStreamReader`` it reads with.
package final class MetalinkStreamReader {
    /// One `<file>` of the document, read.
    package struct Item: Sendable {
        /// Its name and line, as ``MetalinkDocument/entries`` lists them.
        package var entry: MetalinkDocument.Entry
        /// Its details, as ``MetalinkDocument/file(at:maxPieces:)`` reads them, or why they could
        /// not be read (a fault of this file only).
        package var file: Result<MetalinkFile, DownloadError>
    }

    /// The URL the document was read from, after redirects: the base of its relative URLs.
    package let url: URL
    /// At most this many `<file>` elements.
    package let maxFiles: Int
    /// At most this many pieces in a file.
    package let maxPieces: Int
    /// The document's format, known once its root element has been read (by the first
    /// ``next()`` or ``file(named:)``); `nil` before, and for a document that is not a Metalink.
    package private(set) var version: MetalinkDocument.Version?

    private let xml: XMLStreamReader
    /// Whether the root element has been read.
    private var rootRead = false
    /// Why the document is not a Metalink: thrown at its end (malformed XML, found later, wins).
    private var rootError: DownloadError?
    /// The first `<file>` without a name: thrown at the end, as the tree parser would.
    private var namelessError: DownloadError?
    /// `<file>` elements seen so far.
    private var fileCount = 0
    /// `xml:base` of the root element.
    private var rootBases: [String] = []
    /// Inside a Metalink 3 `<files>`: the `xml:base` attributes up to it.
    private var filesBases: [String]?
    private var finished = false
    private var failure: DownloadError?

    /// Prepares to read `data`. Nothing is parsed until the first ``next()`` or ``file(named:)``.
    ///
    /// - Parameters:
    ///   - data: The document.
    ///   - url: Where it came from, after redirects; relative URLs are resolved against it.
    ///   - maxFiles: At most this many `<file>` elements (more is refused with
    ///     ``DownloadError/Code/manifestTooLarge``, at the end of the document; the files over
    ///     the limit are not read).
    ///   - maxPieces: At most this many pieces in a file (more spoils that file with
    ///     ``DownloadError/Code/manifestTooLarge``; the hashes over the limit are not kept).
    ///   - options: XML size, depth and element limits.
    /// - Throws: ``DownloadError``: ``DownloadError/Code/manifestTooLarge`` when `data` is over
    ///   the size limit, ``DownloadError/Code/manifestInvalid`` when it is empty.
    package init(
        data: Data, url: URL, maxFiles: Int = 1_000_000, maxPieces: Int = 1_000_000, options: XMLParseOptions = XMLParseOptions()
    ) throws(DownloadError) {
        // Whitespace too: an element's text is every descendant's, as the tree gives it.
        xml = try XMLStreamReader(data: data, options: options, reportsWhitespace: true)
        self.url = url
        self.maxFiles = maxFiles
        self.maxPieces = maxPieces
    }

    /// The next file, in document order, or `nil` after the last.
    ///
    /// - Throws: ``DownloadError``, when the document as a whole is refused (see
    ///   ``MetalinkDocument/parse(_:url:maxFiles:options:)``): malformed or unsafe XML as soon as
    ///   it is found, the rest once the whole document has been read. After an error, every
    ///   later call throws it again.
    package func next() throws(DownloadError) -> Item? {
        try nextFile { _ in true }
    }

    /// The details of the first file called `name`, read without reading the document past
    /// that file's end.
    ///
    /// As ``MetalinkDocument/file(named:maxPieces:)`` for the same bytes, but for what lies after
    /// the file: the rest of the document is not read, so malformed XML there, a file without a
    /// name there, or files past `maxFiles` there do not make it fail.
    ///
    /// - Throws: ``DownloadError``: this file's own error, the document's (see ``next()``), or
    ///   ``DownloadError/Code/manifestInvalid`` when no file has that name.
    package func file(named name: String) throws(DownloadError) -> MetalinkFile {
        try file(named: name, passing: { _ in })
    }

    /// As ``file(named:)``; `passing` learns the name of each file passed over before it.
    package func file(named name: String, passing: (String) -> Void) throws(DownloadError) -> MetalinkFile {
        while let item = try nextFile(reading: { candidate in
            if candidate != name { passing(candidate) }
            return candidate == name
        }) {
            if item.entry.name == name { return try item.file.get() }
        }
        throw MetalinkDocument.notListedError(name, url: url)
    }

    // MARK: - Reading

    /// The next file whose name `wanted` accepts; the others are passed over unread.
    private func nextFile(reading wanted: (String) -> Bool) throws(DownloadError) -> Item? {
        if let failure { throw failure }
        if finished { return nil }
        do throws(DownloadError) {
            while let node = try xml.next() {
                if let item = try read(node, wanted: wanted) { return item }
            }
            finished = true
            if let error = documentError() { throw error }
            return nil
        } catch {
            failure = error
            finished = true
            throw error
        }
    }

    /// What is wrong with the whole document, in the order the tree parser checks it.
    private func documentError() -> DownloadError? {
        if let rootError { return rootError }
        guard let version else { return DownloadError(.manifestInvalid, "the XML has no root element") }
        return MetalinkDocument.countError(fileCount, maxFiles: maxFiles, version: version, url: url) ?? namelessError
    }

    /// Reads one node of the document's outline (the root, a Metalink 3 `<files>`, a
    /// `<file>`); a file comes back read when it is wanted.
    private func read(_ node: XMLStreamReader.Node, wanted: (String) -> Bool) throws(DownloadError) -> Item? {
        guard rootRead else {
            rootRead = true
            do {
                version = try MetalinkDocument.version(
                    ofRoot: node.name, prefix: node.prefix, namespace: node.namespaceURI, line: node.line, url: url)
            } catch {
                rootError = error
            }
            if let base = node.attributes["xml:base"] { rootBases = [base] }
            return nil
        }
        guard let version, node.depth <= 2 else { return nil }
        let namespace = version.namespace
        switch (version, node.depth, node.kind) {
        case (.v4, 1, .startElement) where node.name == "file" && node.namespaceURI == namespace:
            return try file(node, bases: rootBases, wanted: wanted)
        case (.v3, 1, .startElement) where node.name == "files" && node.namespaceURI == namespace:
            filesBases = node.isEmptyElement ? nil : rootBases + (node.attributes["xml:base"].map { [$0] } ?? [])
        case (.v3, 1, .endElement):
            filesBases = nil
        case (.v3, 2, .startElement) where node.name == "file" && node.namespaceURI == namespace:
            guard let bases = filesBases else { return nil }
            return try file(node, bases: bases, wanted: wanted)
        default:
            break
        }
        return nil
    }

    /// A `<file>` start tag: the file read, or passed over (not wanted, over the limit, or the
    /// document already refused).
    private func file(_ start: XMLStreamReader.Node, bases: [String], wanted: (String) -> Bool) throws(DownloadError) -> Item? {
        guard let version else { return nil }
        fileCount += 1
        let name = start.attributes["name"]
        if name == nil, namelessError == nil { namelessError = MetalinkDocument.namelessFileError(line: start.line) }
        guard let name, namelessError == nil, fileCount <= maxFiles, wanted(name) else {
            try skip(start)
            return nil
        }
        let element = try capture(start, bases: bases, version: version)
        let entry = MetalinkDocument.Entry(name: name, line: start.line)
        var reader = MetalinkFileReader(element: element, entry: entry, version: version, url: url, maxPieces: maxPieces)
        return Item(entry: entry, file: Result { () throws(DownloadError) in try reader.read() })
    }

    /// Reads the element `start` begins up to its end tag, keeping what
    /// ``MetalinkFileReader`` reads of it (see ``MetalinkFileReader/keep(_:in:version:)``).
    private func capture(_ start: XMLStreamReader.Node, bases: [String], version: MetalinkDocument.Version) throws(DownloadError)
        -> CapturedElement
    {
        var bases = bases
        if let base = start.attributes["xml:base"] { bases.append(base) }
        var element = CapturedElement(name: start.name, line: start.line, attributes: start.attributes, xmlBases: bases)
        if start.isEmptyElement { return element }
        let readsText = MetalinkFileReader<CapturedElement>.readsText(of: start.name)
        while let node = try xml.next() {
            switch node.kind {
            case .endElement:
                if node.depth == start.depth { return element }
            case .text:
                // Text at any depth: an element's text is all its descendants'.
                if readsText, let text = node.text { element.text += text }
            case .startElement:
                guard node.depth == start.depth + 1, node.namespaceURI == version.namespace,
                    let keep = MetalinkFileReader<CapturedElement>.keep(node.name, in: start.name, version: version)
                else {
                    // A text's descendants are read for their text; anything else is passed over.
                    if !readsText { try skip(node) }
                    continue
                }
                let count = element.counts[node.name, default: 0] + 1
                element.counts[node.name] = count
                let kept: Bool
                switch keep {
                case .first: kept = count == 1
                case .all: kept = start.name != "pieces" || count <= maxPieces
                case .count: kept = false
                }
                if kept {
                    element.children.append(try capture(node, bases: bases, version: version))
                } else {
                    try skip(node)
                }
            }
        }
        return element
    }

    /// Reads past the element `start` begins.
    private func skip(_ start: XMLStreamReader.Node) throws(DownloadError) {
        guard start.kind == .startElement, !start.isEmptyElement else { return }
        while let node = try xml.next() {
            if node.kind == .endElement, node.depth == start.depth { return }
        }
    }
}

@available(*, unavailable, message: "MetalinkStreamReader is single-threaded; use it from one task at a time")
extension MetalinkStreamReader: Sendable {}
