import CLibXML2
import Foundation

/// A streaming pull reader for XML documents too large to hold as a tree (a Metalink file with
/// millions of pieces, an MPD with a huge `SegmentTimeline`).
///
/// It is built on libxml2's `xmlTextReader` with the same safety settings as
/// ``SafeXMLDocument``: no network, no entity substitution, no DTD loading, entity declarations
/// and external DTDs refused with ``DownloadError/Code/unsafeInput``, and the limits of
/// ``XMLParseOptions``. Nodes already read are freed as the reader moves on, so memory stays
/// constant in the size of the document (apart from the copy of the input the reader keeps).
///
/// ```swift
/// let reader = try XMLStreamReader(data: data)
/// while let node = try reader.next() {
///     if node.kind == .startElement, node.name == "url" { … }
/// }
/// ```
///
/// The reader is a single-threaded object: it is not `Sendable`; use it from one task or
/// thread at a time.
public final class XMLStreamReader {
    /// One event of the document.
    public struct Node: Sendable {
        /// What the node is.
        public enum Kind: Sendable, Hashable {
            /// A start tag, or an empty-element tag (then ``Node/isEmptyElement`` is `true` and
            /// no ``endElement`` follows).
            case startElement
            /// An end tag.
            case endElement
            /// Character data: text or a CDATA section. Text consisting only of whitespace is
            /// reported only by a reader made with `reportsWhitespace: true`. Long or mixed
            /// content may arrive as more than one text node.
            case text
        }

        /// What the node is.
        public var kind: Kind
        /// The element's local name, without a prefix; `"#text"` for text.
        public var name: String
        /// The element's namespace URI, or `nil` when it is in no namespace (and for text).
        public var namespaceURI: String?
        /// The prefix the document uses for the element's namespace (`"mpd"` for `<mpd:MPD>`),
        /// or `nil` for an unprefixed name (and for text). Match on ``namespaceURI``, not on
        /// the prefix.
        public var prefix: String?
        /// The nesting depth: 0 for the root element, 1 for its children; text is one level
        /// deeper than the element that contains it.
        public var depth: Int
        /// A start tag's attributes (namespace declarations excluded): attributes in no
        /// namespace by name, others by qualified name (`"xlink:href"`). Empty for other kinds.
        ///
        /// The prefix `xml` always stands for the XML namespace, so `attributes["xml:base"]`
        /// and `attributes["xml:lang"]` are `xml:base` and `xml:lang` whatever the document
        /// declares (XML Namespaces 1.0 forbids binding another prefix to that namespace).
        public var attributes: [String: String]
        /// The characters of a text node (CDATA content included); `nil` for elements.
        public var text: String?
        /// Whether a start tag is an empty-element tag (`<S t="0"/>`); no ``Kind/endElement``
        /// follows it.
        public var isEmptyElement: Bool
        /// The source line of the node, for error messages (0 when unknown): for a start tag,
        /// the line ``SafeXMLElement/line`` gives for the same element of the same document;
        /// for an end tag, an approximation. Past line 65535 a start tag's line is taken from
        /// nearby text and may be reported as 65535 (see ``SafeXMLElement/line``); a text
        /// node's line stays exact.
        public var line: Int
    }

    private let reader: OpaquePointer
    private let buffer: UnsafeMutableRawBufferPointer
    private let options: XMLParseOptions
    private let state = XMLReaderErrorState()
    private var elementCount = 0
    private var checkedDTD = false
    private var finished = false
    private var failure: DownloadError?
    private let reportsWhitespace: Bool

    /// Prepares to read `data`. Nothing is parsed until the first ``next()``.
    ///
    /// - Parameters:
    ///   - data: The document.
    ///   - options: Size, depth and element-count limits.
    ///   - reportsWhitespace: Whether text that is only whitespace (the line breaks and
    ///     indentation between elements) is reported as ``Node/Kind/text`` too. Off by
    ///     default; a reader that must see an element's text exactly as
    ///     ``SafeXMLElement/text`` gives it (every descendant's text, whitespace included)
    ///     turns it on.
    /// - Throws: ``DownloadError`` with ``DownloadError/Code/manifestTooLarge`` when `data` is
    ///   over ``XMLParseOptions/maxDocumentSize``, and ``DownloadError/Code/manifestInvalid``
    ///   when it is empty.
    public init(data: Data, options: XMLParseOptions = .init(), reportsWhitespace: Bool = false) throws(DownloadError) {
        LibXML2.ensureInitialized()
        try options.checkSize(data.count)
        guard !data.isEmpty else {
            throw DownloadError(.manifestInvalid, "the XML is malformed at line 1, column 1: the document is empty (0 bytes)")
        }
        // xmlReaderForMemory reads the caller's memory in place, so the reader owns a copy.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: data.count, alignment: 1)
        buffer.copyBytes(from: data)
        guard
            let reader = xmlReaderForMemory(
                buffer.baseAddress!.assumingMemoryBound(to: CChar.self),
                Int32(data.count),
                nil,
                nil,
                XMLParseOptions.libxml2Flags
            )
        else {
            buffer.deallocate()
            throw DownloadError(.manifestInvalid, "the XML could not be read: libxml2 could not create a reader")
        }
        self.reader = reader
        self.buffer = buffer
        self.options = options
        self.reportsWhitespace = reportsWhitespace
        xmlTextReaderSetStructuredErrorHandler(
            reader,
            { argument, error in
                guard let argument, let error else { return }
                Unmanaged<XMLReaderErrorState>.fromOpaque(argument).takeUnretainedValue().record(error)
            },
            Unmanaged.passUnretained(state).toOpaque()
        )
    }

    deinit {
        xmlFreeTextReader(reader)
        buffer.deallocate()
    }

    /// The next start tag, end tag or text node, or `nil` at the end of the document.
    ///
    /// Comments, processing instructions, the DOCTYPE and whitespace-only text are skipped.
    ///
    /// - Throws: ``DownloadError``: ``DownloadError/Code/manifestInvalid`` with line and column
    ///   when the document turns out malformed, ``DownloadError/Code/unsafeInput`` for entity
    ///   declarations, an external DTD or XInclude, ``DownloadError/Code/manifestTooLarge``
    ///   over the depth or element-count limit. A malformed or refused document fails in the
    ///   words ``SafeXMLDocument/parse(_:options:baseURL:)`` uses for it (only the advice of the
    ///   element-count error differs). After an error, every later call throws it again.
    public func next() throws(DownloadError) -> Node? {
        if let failure { throw failure }
        if finished { return nil }
        do {
            return try readNext()
        } catch {
            failure = error
            finished = true
            throw error
        }
    }

    private func readNext() throws(DownloadError) -> Node? {
        while true {
            let status = LibXML2.collectingThreadErrors(into: state.errors) { xmlTextReaderRead(reader) }
            if let unsafe = state.unsafe { throw treeParserError(or: unsafe) }
            if status < 0 || state.errors.first != nil {
                throw treeParserError(or: state.errors.malformedError(options: options, fallback: xmlError()))
            }
            if status == 0 {
                finished = true
                return nil
            }
            let current = xmlTextReaderCurrentNode(reader)
            if !checkedDTD {
                // The whole prolog, DOCTYPE included, is parsed before the first node comes out.
                checkedDTD = true
                if let doc = current?.pointee.doc, let unsafe = LibXML2.unsafeDTDError(in: doc) {
                    throw treeParserError(or: unsafe)
                }
            }
            let line = current.map { Int(xmlGetLineNo($0)) } ?? 0
            let depth = Int(xmlTextReaderDepth(reader))
            switch xmlTextReaderNodeType(reader) {
            case Int32(XML_READER_TYPE_ELEMENT.rawValue):
                return try startElement(depth: depth, line: line)
            case Int32(XML_READER_TYPE_END_ELEMENT.rawValue):
                return Node(
                    kind: .endElement,
                    name: LibXML2.string(xmlTextReaderConstLocalName(reader)) ?? "",
                    namespaceURI: LibXML2.string(xmlTextReaderConstNamespaceUri(reader)),
                    prefix: LibXML2.string(xmlTextReaderConstPrefix(reader)),
                    depth: depth,
                    attributes: [:],
                    text: nil,
                    isEmptyElement: false,
                    line: line
                )
            case Int32(XML_READER_TYPE_WHITESPACE.rawValue), Int32(XML_READER_TYPE_SIGNIFICANT_WHITESPACE.rawValue):
                guard reportsWhitespace else { continue }
                fallthrough
            case Int32(XML_READER_TYPE_TEXT.rawValue), Int32(XML_READER_TYPE_CDATA.rawValue):
                return Node(
                    kind: .text,
                    name: "#text",
                    namespaceURI: nil,
                    prefix: nil,
                    depth: depth,
                    attributes: [:],
                    text: LibXML2.string(xmlTextReaderConstValue(reader)) ?? "",
                    isEmptyElement: false,
                    line: line
                )
            default:
                continue
            }
        }
    }

    /// The error ``SafeXMLDocument`` gives for this document, found without building its tree;
    /// `fallback` when it gives none.
    ///
    /// libxml2 words some failures differently when it reads a stream: a truncated document is
    /// "Extra content at the end of the document" (the tree parser: "Premature end of data in
    /// tag MPD line 2"), a refused DTD comes without its line. Asking the tree parser's checks
    /// again (only when the reader fails; they stop at the same place) makes a document refused
    /// in the same words whichever way it is read.
    private func treeParserError(or fallback: DownloadError) -> DownloadError {
        XMLDocumentStorage.error(parsing: UnsafeRawBufferPointer(buffer), options: options) ?? fallback
    }

    private func startElement(depth: Int, line: Int) throws(DownloadError) -> Node {
        let name = LibXML2.string(xmlTextReaderConstLocalName(reader)) ?? ""
        let namespaceURI = LibXML2.string(xmlTextReaderConstNamespaceUri(reader))
        elementCount += 1
        if depth + 1 > options.maxDepth {
            throw options.depthError(depth: depth + 1, name: name, line: line)
        }
        if let limit = options.maxElementCount, elementCount > limit {
            throw options.elementCountError(limit: limit, line: line, streaming: true)
        }
        if let namespaceURI, LibXML2.xincludeNamespaces.contains(namespaceURI) {
            throw LibXML2.xincludeError(name: name, line: line)
        }
        let isEmpty = xmlTextReaderIsEmptyElement(reader) == 1
        var attributes: [String: String] = [:]
        if xmlTextReaderHasAttributes(reader) == 1 {
            while xmlTextReaderMoveToNextAttribute(reader) == 1 {
                if xmlTextReaderIsNamespaceDecl(reader) == 1 { continue }
                let key =
                    xmlTextReaderConstNamespaceUri(reader) != nil
                    ? xmlTextReaderConstName(reader) : xmlTextReaderConstLocalName(reader)
                attributes[LibXML2.string(key) ?? ""] = LibXML2.string(xmlTextReaderConstValue(reader)) ?? ""
            }
            xmlTextReaderMoveToElement(reader)
        }
        return Node(
            kind: .startElement,
            name: name,
            namespaceURI: namespaceURI,
            prefix: LibXML2.string(xmlTextReaderConstPrefix(reader)),
            depth: depth,
            attributes: attributes,
            text: nil,
            isEmptyElement: isEmpty,
            line: line
        )
    }
}

@available(*, unavailable, message: "XMLStreamReader is single-threaded; use it from one task at a time")
extension XMLStreamReader: Sendable {}

/// The reader's errors, and whether one of them came from a document that declares entities
/// (libxml2 may reach an entity reference, and fail on it, before the first node comes out).
final class XMLReaderErrorState {
    let errors = XMLErrorCollector()
    var unsafe: DownloadError?

    func record(_ error: UnsafePointer<xmlError>) {
        errors.record(error)
        guard unsafe == nil, let context = error.pointee.ctxt else { return }
        let domain = error.pointee.domain
        guard domain == Int32(XML_FROM_PARSER.rawValue) || domain == Int32(XML_FROM_NAMESPACE.rawValue)
            || domain == Int32(XML_FROM_DTD.rawValue)
        else { return }
        let parser = context.assumingMemoryBound(to: xmlParserCtxt.self)
        if let doc = parser.pointee.myDoc {
            unsafe = LibXML2.unsafeDTDError(in: doc)
        }
    }
}
