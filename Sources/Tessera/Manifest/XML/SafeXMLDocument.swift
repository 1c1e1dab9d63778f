import CLibXML2
import Foundation

/// A parsed XML manifest: an MPEG-DASH MPD, a Metalink v4 file, an XML API answer.
///
/// (Named so that it does not shadow Foundation's `XMLDocument` in code that imports both.)
///
/// Parsing treats the input as hostile (see ``XMLParseOptions``): no network access, no
/// entity substitution, no DTD loading, size, depth and element-count limits, and documents
/// whose DTD declares entities or refers to an external DTD are refused with
/// ``DownloadError/Code/unsafeInput``. Every failure is a ``DownloadError``; a malformed
/// document gives ``DownloadError/Code/manifestInvalid`` with libxml2's line, column and
/// message.
///
/// The document is immutable once parsed and may be read from many threads at once: its
/// elements (``SafeXMLElement``) and XPath queries only read the tree. Elements keep the
/// underlying tree alive, so they stay valid after the `SafeXMLDocument` itself is gone.
///
/// ```swift
/// let mpd = try SafeXMLDocument.parse(data)
/// let ns = ["mpd": "urn:mpeg:dash:schema:mpd:2011"]
/// for representation in try mpd.select("//mpd:Representation", namespaces: ns) {
///     let bandwidth = representation[attribute: "bandwidth"]
/// }
/// ```
public final class SafeXMLDocument: Sendable {
    /// The parsed tree, shared with every ``SafeXMLElement`` taken from this document.
    let storage: XMLDocumentStorage

    /// The URL the document was fetched from, as passed to ``parse(_:options:baseURL:)``.
    /// Tessera records it as the document's URL; it is never used to load anything.
    public let baseURL: URL?

    init(storage: XMLDocumentStorage, baseURL: URL?) {
        self.storage = storage
        self.baseURL = baseURL
    }

    /// Parses an XML document from bytes.
    ///
    /// The encoding comes from a byte-order mark (UTF-8, UTF-16) or the XML declaration
    /// (`<?xml version="1.0" encoding="ISO-8859-1"?>`), and defaults to UTF-8.
    ///
    /// - Parameters:
    ///   - data: The document.
    ///   - options: Size, depth and element-count limits.
    ///   - baseURL: The URL the document came from; kept as ``baseURL``, never fetched.
    /// - Throws: ``DownloadError`` with ``DownloadError/Code/manifestTooLarge`` over a limit,
    ///   ``DownloadError/Code/unsafeInput`` for entity declarations, an external DTD or
    ///   XInclude, and ``DownloadError/Code/manifestInvalid`` for anything that is not
    ///   well-formed, namespace-correct XML (the message names line and column).
    public static func parse(
        _ data: Data,
        options: XMLParseOptions = .init(),
        baseURL: URL? = nil
    ) throws(DownloadError) -> SafeXMLDocument {
        try options.checkSize(data.count)
        let result: Result<XMLDocumentStorage, DownloadError> = data.withUnsafeBytes { bytes in
            Result { () throws(DownloadError) in
                try XMLDocumentStorage.parse(bytes, isText: false, options: options, baseURL: baseURL)
            }
        }
        return SafeXMLDocument(storage: try result.get(), baseURL: baseURL)
    }

    /// Parses an XML document from a string.
    ///
    /// The string is parsed as the Unicode text it is: an `encoding` in its XML declaration
    /// is ignored.
    ///
    /// - Throws: ``DownloadError``, as ``parse(_:options:baseURL:)``; the size limit applies to
    ///   the string's UTF-8 length.
    public static func parse(_ text: String, options: XMLParseOptions = .init()) throws(DownloadError) -> SafeXMLDocument {
        var text = text
        try options.checkSize(text.utf8.count)
        let result: Result<XMLDocumentStorage, DownloadError> = text.withUTF8 { utf8 in
            Result { () throws(DownloadError) in
                try XMLDocumentStorage.parse(UnsafeRawBufferPointer(utf8), isText: true, options: options, baseURL: nil)
            }
        }
        return SafeXMLDocument(storage: try result.get(), baseURL: nil)
    }

    /// The document's root element.
    public var root: SafeXMLElement {
        SafeXMLElement(storage: storage, node: storage.rootNode)
    }

    /// Evaluates an XPath 1.0 expression against the document and returns the elements it
    /// selects, in document order.
    ///
    /// Element names in a namespace need a prefix in the expression, bound in `namespaces`,
    /// whatever prefix (or default namespace) the document itself uses:
    /// `select("/mpd:MPD/mpd:Period", namespaces: ["mpd": "urn:mpeg:dash:schema:mpd:2011"])`
    /// matches both `<MPD xmlns="urn:mpeg:dash:schema:mpd:2011">` and
    /// `<dash:MPD xmlns:dash="urn:mpeg:dash:schema:mpd:2011">`.
    ///
    /// Only element nodes are returned: attributes, text and other nodes in the result are
    /// skipped. For a number, string or boolean result use ``evaluateString(_:namespaces:)``.
    ///
    /// - Parameters:
    ///   - xpath: An XPath 1.0 expression, evaluated with the document node as context.
    ///   - namespaces: Prefixes for the expression, mapped to namespace URIs.
    /// - Throws: ``DownloadError`` with ``DownloadError/Code/manifestInvalid`` for an invalid
    ///   expression (the message names it and the position), an unbound prefix, or an
    ///   expression whose result is not a node set.
    public func select(_ xpath: String, namespaces: [String: String] = [:]) throws(DownloadError) -> [SafeXMLElement] {
        try storage.select(xpath, namespaces: namespaces, contextNode: nil)
    }

    /// Evaluates an XPath 1.0 expression and returns its value as text, as XPath's `string()`
    /// would: `count(//url)` gives `"3"`, `string(/MPD/@type)` the attribute's value, a
    /// boolean `"true"` or `"false"`, a node set the text of its first node (or `""`).
    ///
    /// - Throws: ``DownloadError`` with ``DownloadError/Code/manifestInvalid`` for an invalid
    ///   expression or an unbound prefix.
    public func evaluateString(_ xpath: String, namespaces: [String: String] = [:]) throws(DownloadError) -> String {
        try storage.evaluateString(xpath, namespaces: namespaces, contextNode: nil)
    }
}

// MARK: - Storage

/// Owns one parsed `xmlDoc` and frees it when the last document or element referring to it
/// is gone.
///
/// `@unchecked Sendable`: the tree is never modified after ``parse(_:isText:options:baseURL:)``
/// returns, and every libxml2 function used on it afterwards (node accessors,
/// `xmlNodeGetContent`, XPath evaluation with a context of its own) only reads it.
final class XMLDocumentStorage: @unchecked Sendable {
    /// The tree.
    let doc: xmlDocPtr
    /// Its root element, checked to exist while parsing.
    let rootNode: xmlNodePtr

    private init(doc: xmlDocPtr, rootNode: xmlNodePtr) {
        self.doc = doc
        self.rootNode = rootNode
    }

    deinit {
        xmlFreeDoc(doc)
    }

    /// Parses `bytes` with a parser context of its own, the safety hooks installed and errors
    /// captured per parse (nothing is printed, nothing global is changed).
    static func parse(
        _ bytes: UnsafeRawBufferPointer,
        isText: Bool,
        options: XMLParseOptions,
        baseURL: URL?
    ) throws(DownloadError) -> XMLDocumentStorage {
        let doc = try read(bytes, isText: isText, options: options, baseURL: baseURL, buildsTree: true)
        guard let root = xmlDocGetRootElement(doc) else {
            xmlFreeDoc(doc)
            throw DownloadError(.manifestInvalid, "the XML has no root element")
        }
        // Numbers the elements once, so XPath sorts node sets in document order cheaply. This
        // is the last write to the tree.
        xmlXPathOrderDocElems(doc)
        return XMLDocumentStorage(doc: doc, rootNode: root)
    }

    /// The error ``parse(_:isText:options:baseURL:)`` throws for `bytes`, found without building
    /// the tree (the parser's events only, in constant memory), or `nil` when the document is
    /// well-formed and safe. ``XMLStreamReader`` words its failures with it, so that a document
    /// is refused in the same words whichever way it is read.
    static func error(parsing bytes: UnsafeRawBufferPointer, options: XMLParseOptions) -> DownloadError? {
        do {
            xmlFreeDoc(try read(bytes, isText: false, options: options, baseURL: nil, buildsTree: false))
            return nil
        } catch {
            return error
        }
    }

    /// Parses `bytes`, the safety hooks installed, and returns the document, checked to be
    /// well-formed and safe; without its elements and text when `buildsTree` is `false`.
    private static func read(
        _ bytes: UnsafeRawBufferPointer,
        isText: Bool,
        options: XMLParseOptions,
        baseURL: URL?,
        buildsTree: Bool
    ) throws(DownloadError) -> xmlDocPtr {
        LibXML2.ensureInitialized()
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw DownloadError(.manifestInvalid, "the XML is malformed at line 1, column 1: the document is empty (0 bytes)")
        }
        guard let ctxt = xmlNewParserCtxt() else {
            throw DownloadError(.manifestInvalid, "the XML could not be parsed: libxml2 could not allocate a parser")
        }
        defer { xmlFreeParserCtxt(ctxt) }

        let state = XMLParseState(options: options, buildsTree: buildsTree)
        XMLParseState.installHooks(on: ctxt, buildsTree: buildsTree)
        ctxt.pointee._private = Unmanaged.passUnretained(state).toOpaque()
        defer { ctxt.pointee._private = nil }

        var flags = XMLParseOptions.libxml2Flags
        if isText { flags |= Int32(XML_PARSE_IGNORE_ENC.rawValue) }
        let parsed: xmlDocPtr? = withExtendedLifetime(state) {
            LibXML2.collectingThreadErrors(into: state.errors) {
                xmlCtxtReadMemory(
                    ctxt,
                    base.assumingMemoryBound(to: CChar.self),
                    Int32(bytes.count),
                    baseURL?.absoluteString,
                    isText ? "UTF-8" : nil,
                    flags
                )
            }
        }
        // A document halted by a hook may still come back (it was well-formed so far).
        if let refusal = state.refusal {
            if let parsed { xmlFreeDoc(parsed) }
            throw refusal
        }
        guard let doc = parsed, ctxt.pointee.wellFormed != 0, ctxt.pointee.nsWellFormed != 0 else {
            if let parsed { xmlFreeDoc(parsed) }
            throw state.errors.malformedError(options: options, fallback: ctxt.pointee.lastError)
        }
        if let unsafe = LibXML2.unsafeDTDError(in: doc) {
            xmlFreeDoc(doc)
            throw unsafe
        }
        return doc
    }

    // MARK: XPath

    /// The elements `xpath` selects, with `contextNode` (or the document node) as context.
    func select(
        _ xpath: String,
        namespaces: [String: String],
        contextNode: xmlNodePtr?
    ) throws(DownloadError) -> [SafeXMLElement] {
        try withXPathResult(xpath, namespaces: namespaces, contextNode: contextNode) { object throws(DownloadError) in
            guard object.pointee.type == XPATH_NODESET else {
                throw DownloadError(
                    .manifestInvalid,
                    "the XPath expression \(LibXML2.quoted(xpath)) gives \(LibXML2.describe(object.pointee.type)), "
                        + "not elements; use evaluateString(_:namespaces:) for it"
                )
            }
            guard let set = object.pointee.nodesetval, set.pointee.nodeNr > 0, let table = set.pointee.nodeTab else {
                return []
            }
            var elements: [SafeXMLElement] = []
            elements.reserveCapacity(Int(set.pointee.nodeNr))
            for index in 0..<Int(set.pointee.nodeNr) {
                if let node = table[index], node.pointee.type == XML_ELEMENT_NODE {
                    elements.append(SafeXMLElement(storage: self, node: node))
                }
            }
            return elements
        }
    }

    /// The value of `xpath` as text, as XPath's `string()` gives it.
    func evaluateString(
        _ xpath: String,
        namespaces: [String: String],
        contextNode: xmlNodePtr?
    ) throws(DownloadError) -> String {
        try withXPathResult(xpath, namespaces: namespaces, contextNode: contextNode) { object in
            LibXML2.takeString(xmlXPathCastToString(object)) ?? ""
        }
    }

    /// Evaluates `xpath` in a context of its own and hands the result to `body`; context and
    /// result are freed before returning.
    private func withXPathResult<R>(
        _ xpath: String,
        namespaces: [String: String],
        contextNode: xmlNodePtr?,
        _ body: (xmlXPathObjectPtr) throws(DownloadError) -> R
    ) throws(DownloadError) -> R {
        LibXML2.ensureInitialized()
        if xpath.utf8.contains(0) {
            throw DownloadError(.manifestInvalid, "invalid XPath expression \(LibXML2.quoted(xpath)): it contains a NUL character")
        }
        guard let context = xmlXPathNewContext(doc) else {
            throw DownloadError(.manifestInvalid, "could not evaluate XPath \(LibXML2.quoted(xpath)): libxml2 is out of memory")
        }
        defer {
            xmlResetError(&context.pointee.lastError)
            xmlXPathFreeContext(context)
        }
        // A structured handler of the context's own: errors stay here instead of going to stderr.
        context.pointee.error = { _, _ in }
        // An unknown function would make libxml2 print "function … not found" to stderr before
        // failing; resolve unknown names to a stub that fails the same way, silently.
        xmlXPathRegisterFuncLookup(
            context,
            { data, name, uri in
                guard let data, let name else { return nil }
                let context = data.assumingMemoryBound(to: xmlXPathContext.self)
                if xmlHashLookup2(context.pointee.funcHash, name, uri) != nil { return nil }
                return { parser, _ in xmlXPathErr(parser, Int32(XPATH_UNKNOWN_FUNC_ERROR.rawValue)) }
            },
            context
        )
        context.pointee.node = contextNode ?? xmlNodePtr(OpaquePointer(doc))
        for (prefix, uri) in namespaces.sorted(by: { $0.key < $1.key }) {
            guard !prefix.isEmpty, !prefix.utf8.contains(0), !uri.utf8.contains(0),
                xmlXPathRegisterNs(context, prefix, uri) == 0
            else {
                throw DownloadError(
                    .manifestInvalid,
                    "cannot bind the XPath namespace prefix \(LibXML2.quoted(prefix)) to \(LibXML2.quoted(uri)); "
                        + "a prefix must be a non-empty name"
                )
            }
        }
        guard let object = xmlXPathEval(xpath, context) else {
            throw LibXML2.xpathError(xpath, context.pointee.lastError, namespaces: namespaces)
        }
        defer { xmlXPathFreeObject(object) }
        return try body(object)
    }
}

// MARK: - Parse state and hooks

/// What one parse has seen so far; reached from libxml2's callbacks through the parser
/// context's `_private` pointer, so concurrent parses never share anything.
final class XMLParseState {
    let options: XMLParseOptions
    /// Whether elements go into the tree (else only the checks run).
    let buildsTree: Bool
    let errors = XMLErrorCollector()
    var depth = 0
    var elementCount = 0
    /// Set by a hook that stopped the parser: a limit or unsafe input.
    var refusal: DownloadError?

    init(options: XMLParseOptions, buildsTree: Bool = true) {
        self.options = options
        self.buildsTree = buildsTree
    }

    /// The parser context and this state, from the `ctx` argument libxml2 passes to SAX
    /// callbacks (the context's `userData`, which is the context itself).
    static func from(_ ctx: UnsafeMutableRawPointer?) -> (xmlParserCtxtPtr, XMLParseState)? {
        guard let ctx else { return nil }
        let ctxt = ctx.assumingMemoryBound(to: xmlParserCtxt.self)
        guard let state = ctxt.pointee._private else { return nil }
        return (ctxt, Unmanaged<XMLParseState>.fromOpaque(state).takeUnretainedValue())
    }

    /// Records the first refusal and stops the parser.
    func refuse(_ error: DownloadError, _ ctxt: xmlParserCtxtPtr) {
        if refusal == nil { refusal = error }
        xmlStopParser(ctxt)
    }

    /// The line the parser is at.
    static func line(_ ctxt: xmlParserCtxtPtr) -> Int {
        Int(ctxt.pointee.input?.pointee.line ?? 0)
    }

    /// Replaces the SAX callbacks that matter for safety and limits, and captures errors
    /// through the context's own structured error handler. Without `buildsTree`, elements,
    /// comments and processing instructions are not added to the document, nor text (libxml2
    /// adds text only inside an element); the parser reports the same errors, in the same words
    /// (the handlers are there, they only do nothing).
    static func installHooks(on ctxt: xmlParserCtxtPtr, buildsTree: Bool = true) {
        guard let sax = ctxt.pointee.sax else { return }
        if !buildsTree {
            sax.pointee.comment = { _, _ in }
            sax.pointee.processingInstruction = { _, _, _ in }
            sax.pointee.reference = { _, _ in }
        }

        sax.pointee.serror = { data, error in
            guard let error, let (_, state) = XMLParseState.from(data) else { return }
            state.errors.record(error)
        }

        sax.pointee.startElementNs = { ctx, localname, prefix, uri, nbNamespaces, namespaces, nbAttributes, nbDefaulted, attributes in
            let parse = XMLParseState.from(ctx)
            if parse?.1.buildsTree != false {
                xmlSAX2StartElementNs(ctx, localname, prefix, uri, nbNamespaces, namespaces, nbAttributes, nbDefaulted, attributes)
            }
            guard let (ctxt, state) = parse else { return }
            state.depth += 1
            state.elementCount += 1
            let name = LibXML2.string(localname) ?? ""
            if state.depth > state.options.maxDepth {
                state.refuse(state.options.depthError(depth: state.depth, name: name, line: XMLParseState.line(ctxt)), ctxt)
            } else if let limit = state.options.maxElementCount, state.elementCount > limit {
                state.refuse(state.options.elementCountError(limit: limit, line: XMLParseState.line(ctxt), streaming: false), ctxt)
            } else if let uri = LibXML2.string(uri), LibXML2.xincludeNamespaces.contains(uri) {
                state.refuse(LibXML2.xincludeError(name: name, line: XMLParseState.line(ctxt)), ctxt)
            }
        }

        sax.pointee.endElementNs = { ctx, localname, prefix, uri in
            let parse = XMLParseState.from(ctx)
            if parse?.1.buildsTree != false { xmlSAX2EndElementNs(ctx, localname, prefix, uri) }
            guard let (_, state) = parse else { return }
            state.depth -= 1
        }

        // Entity declarations are never registered: the parser stops at the first one.
        sax.pointee.entityDecl = { ctx, name, type, publicID, systemID, _ in
            guard let (ctxt, state) = XMLParseState.from(ctx) else { return }
            let error = LibXML2.entityDeclarationError(
                name: LibXML2.string(name) ?? "",
                isParameter: type == Int32(XML_INTERNAL_PARAMETER_ENTITY.rawValue)
                    || type == Int32(XML_EXTERNAL_PARAMETER_ENTITY.rawValue),
                publicID: LibXML2.string(publicID),
                systemID: LibXML2.string(systemID),
                line: XMLParseState.line(ctxt)
            )
            state.refuse(error, ctxt)
        }
        sax.pointee.unparsedEntityDecl = { ctx, name, publicID, systemID, _ in
            guard let (ctxt, state) = XMLParseState.from(ctx) else { return }
            let error = LibXML2.entityDeclarationError(
                name: LibXML2.string(name) ?? "",
                isParameter: false,
                publicID: LibXML2.string(publicID),
                systemID: LibXML2.string(systemID),
                line: XMLParseState.line(ctxt)
            )
            state.refuse(error, ctxt)
        }

        // `<!DOCTYPE MPD>` is fine; `<!DOCTYPE MPD SYSTEM "…">` or `PUBLIC` is refused.
        sax.pointee.internalSubset = { ctx, name, externalID, systemID in
            xmlSAX2InternalSubset(ctx, name, externalID, systemID)
            guard let (ctxt, state) = XMLParseState.from(ctx) else { return }
            if externalID != nil || systemID != nil {
                let error = LibXML2.externalDTDError(
                    publicID: LibXML2.string(externalID),
                    systemID: LibXML2.string(systemID),
                    line: XMLParseState.line(ctxt)
                )
                state.refuse(error, ctxt)
            }
        }

        // Never load an external subset or entity, whatever the flags say.
        sax.pointee.externalSubset = { _, _, _, _ in }
        sax.pointee.resolveEntity = { ctx, publicID, systemID in
            guard let (ctxt, state) = XMLParseState.from(ctx) else { return nil }
            let error = LibXML2.externalDTDError(
                publicID: LibXML2.string(publicID),
                systemID: LibXML2.string(systemID),
                line: XMLParseState.line(ctxt)
            )
            state.refuse(error, ctxt)
            return nil
        }
    }
}

/// Keeps the first error (and the first fatal one) libxml2 reports for one parse or one reader.
final class XMLErrorCollector {
    /// One libxml2 error, copied out of libxml2's memory.
    struct Captured {
        var domain: Int32
        var code: Int32
        var level: xmlErrorLevel
        var line: Int
        var column: Int
        var message: String
    }

    /// The first error of level `XML_ERR_ERROR` or worse.
    private(set) var first: Captured?
    /// The first error of level `XML_ERR_FATAL`.
    private(set) var firstFatal: Captured?

    func record(_ error: UnsafePointer<xmlError>) {
        let level = error.pointee.level
        guard level.rawValue >= XML_ERR_ERROR.rawValue else { return }
        let captured = XMLErrorCollector.capture(error.pointee)
        if first == nil { first = captured }
        if firstFatal == nil, level == XML_ERR_FATAL { firstFatal = captured }
    }

    static func capture(_ error: xmlError) -> Captured {
        let message = error.message.map { String(cString: $0) } ?? "unknown error (libxml2 code \(error.code))"
        return Captured(
            domain: error.domain,
            code: error.code,
            level: error.level,
            line: Int(error.line),
            column: Int(error.int2),
            message: LibXML2.clean(message)
        )
    }

    /// The error for a document that did not parse: the fatal error that ended the parse
    /// when there is one (the first error is sometimes a recoverable namespace error).
    func malformedError(options: XMLParseOptions, fallback: xmlError) -> DownloadError {
        var chosen = firstFatal ?? first
        if chosen == nil, fallback.code != 0 { chosen = XMLErrorCollector.capture(fallback) }
        guard let error = chosen else {
            return DownloadError(.manifestInvalid, "the XML is malformed (libxml2 gave no details)")
        }
        if error.code == Int32(XML_ERR_INTERNAL_ERROR.rawValue), error.message.hasPrefix("Excessive depth") {
            return DownloadError(
                .manifestTooLarge,
                "the XML nests elements deeper than libxml2's limit of \(XMLParseOptions.libxml2MaxDepth) "
                    + "levels at line \(error.line)"
            )
        }
        return DownloadError(.manifestInvalid, LibXML2.malformedMessage(error))
    }
}

// MARK: - libxml2 helpers

/// Small helpers around libxml2's C API, shared by the document, its elements and the reader.
enum LibXML2 {
    /// `xmlInitParser()`, run once before the first use from any thread.
    private static let initialized: Void = { xmlInitParser() }()

    /// Makes sure libxml2 is initialised; cheap after the first call.
    static func ensureInitialized() {
        _ = initialized
    }

    /// The XInclude namespaces; elements in them are refused rather than silently ignored.
    static let xincludeNamespaces: Set<String> = [
        "http://www.w3.org/2001/XInclude", "http://www.w3.org/2003/XInclude",
    ]

    /// A copy of a libxml2 string.
    static func string(_ pointer: UnsafePointer<xmlChar>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    /// A copy of a string libxml2 allocated for the caller, which is then freed.
    static func takeString(_ pointer: UnsafeMutablePointer<xmlChar>?) -> String? {
        guard let pointer else { return nil }
        defer { free(pointer) }
        return String(cString: pointer)
    }

    /// `xmlFree`: memory libxml2 allocated for the caller goes back through libxml2's allocator.
    static func free(_ pointer: UnsafeMutableRawPointer?) {
        guard let pointer else { return }
        if let function = freeFunction {
            function(pointer)
        } else {
            Foundation.free(pointer)
        }
    }

    /// libxml2's `xmlFree`, read once through `xmlMemGet` (the global itself is mutable state).
    private static let freeFunction: xmlFreeFunc? = {
        ensureInitialized()
        var free: xmlFreeFunc?
        var malloc: xmlMallocFunc?
        var realloc: xmlReallocFunc?
        var strdup: xmlStrdupFunc?
        guard xmlMemGet(&free, &malloc, &realloc, &strdup) == 0 else { return nil }
        return free
    }()

    /// libxml2's message without its trailing newline, on one line.
    static func clean(_ message: String) -> String {
        message.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: " ")
    }

    /// `text` in quotes, control characters escaped and cut to 200 characters: safe to put
    /// input from the network into an error message.
    static func quoted(_ text: String) -> String { UntrustedText.quoted(text) }

    /// "the XML is malformed at line 12, column 5: Opening and ending tag mismatch: …".
    static func malformedMessage(_ error: XMLErrorCollector.Captured) -> String {
        let position: String
        if error.line > 0 && error.column > 0 {
            position = " at line \(error.line), column \(error.column)"
        } else if error.line > 0 {
            position = " at line \(error.line)"
        } else {
            position = ""
        }
        return "the XML is malformed\(position): \(error.message)"
    }

    /// Runs `body` (a synchronous libxml2 call) with this thread's structured error handler
    /// pointing at `collector`, then restores the previous one.
    ///
    /// The parser context's own handler gets the parser's errors; this catches the few that
    /// libxml2 raises without a context (encoding conversion failures), which would otherwise
    /// be printed to stderr. libxml2 keeps this handler per thread, so concurrent parses on
    /// other threads are not affected.
    static func collectingThreadErrors<R>(into collector: XMLErrorCollector, _ body: () -> R) -> R {
        let handler = __xmlStructuredError()
        let context = __xmlStructuredErrorContext()
        let savedHandler = handler?.pointee
        let savedContext = context?.pointee
        handler?.pointee = { data, error in
            guard let data, let error else { return }
            Unmanaged<XMLErrorCollector>.fromOpaque(data).takeUnretainedValue().record(error)
        }
        context?.pointee = Unmanaged.passUnretained(collector).toOpaque()
        defer {
            handler?.pointee = savedHandler
            context?.pointee = savedContext
        }
        return withExtendedLifetime(collector) { body() }
    }

    // MARK: Unsafe input

    /// Checks a parsed document's DTDs: any entity declaration or external identifier is
    /// refused. The hooks stop the parser at the first one already; this is the second guard.
    static func unsafeDTDError(in doc: xmlDocPtr) -> DownloadError? {
        if let dtd = doc.pointee.intSubset, let error = unsafeDTDError(in: dtd) { return error }
        if let dtd = doc.pointee.extSubset {
            return unsafeDTDError(in: dtd)
                ?? externalDTDError(publicID: string(dtd.pointee.ExternalID), systemID: string(dtd.pointee.SystemID), line: 0)
        }
        return nil
    }

    /// Checks one DTD node for external identifiers and entity declarations.
    static func unsafeDTDError(in dtd: UnsafeMutablePointer<xmlDtd>) -> DownloadError? {
        if dtd.pointee.ExternalID != nil || dtd.pointee.SystemID != nil {
            return externalDTDError(
                publicID: string(dtd.pointee.ExternalID),
                systemID: string(dtd.pointee.SystemID),
                line: 0
            )
        }
        var child = dtd.pointee.children
        while let node = child {
            if node.pointee.type == XML_ENTITY_DECL {
                return entityDeclarationError(
                    name: string(node.pointee.name) ?? "",
                    isParameter: false,
                    publicID: nil,
                    systemID: nil,
                    line: 0
                )
            }
            child = node.pointee.next
        }
        for table in [dtd.pointee.entities, dtd.pointee.pentities] {
            if let table, xmlHashSize(OpaquePointer(table)) > 0 {
                return entityDeclarationError(name: "", isParameter: false, publicID: nil, systemID: nil, line: 0)
            }
        }
        return nil
    }

    static func entityDeclarationError(
        name: String,
        isParameter: Bool,
        publicID: String?,
        systemID: String?,
        line: Int
    ) -> DownloadError {
        var what = isParameter ? "the parameter entity" : "the entity"
        if !name.isEmpty { what += " " + quoted(name) }
        if let systemID { what += " (SYSTEM \(quoted(systemID)))" } else if let publicID { what += " (PUBLIC \(quoted(publicID)))" }
        let place = line > 0 ? " at line \(line)" : ""
        return DownloadError(
            .unsafeInput,
            "the XML declares \(what) in its DTD\(place); documents that declare entities are refused, "
                + "as they enable entity-expansion (\"billion laughs\") and external-entity (XXE) attacks"
        )
    }

    static func externalDTDError(publicID: String?, systemID: String?, line: Int) -> DownloadError {
        var identifiers: [String] = []
        if let publicID { identifiers.append("PUBLIC \(quoted(publicID))") }
        if let systemID { identifiers.append("SYSTEM \(quoted(systemID))") }
        let what = identifiers.isEmpty ? "" : " (\(identifiers.joined(separator: " ")))"
        let place = line > 0 ? " at line \(line)" : ""
        return DownloadError(
            .unsafeInput,
            "the XML refers to an external DTD or entity\(what)\(place); external DTDs and entities are "
                + "never loaded and documents that refer to them are refused"
        )
    }

    static func xincludeError(name: String, line: Int) -> DownloadError {
        DownloadError(
            .unsafeInput,
            "the XML uses XInclude (<\(name)> at line \(line)); XInclude is never processed and documents "
                + "that use it are refused"
        )
    }

    // MARK: XPath

    /// libxml2's XPath messages, indexed by `xmlXPathError`.
    private static let xpathMessages = [
        "OK", "Number encoding", "Unfinished literal", "Start of literal", "Expected $ for variable reference",
        "Undefined variable", "Invalid predicate", "Invalid expression", "Missing closing curly brace",
        "Unregistered function", "Invalid operand", "Invalid type", "Invalid number of arguments",
        "Invalid context size", "Invalid context position", "Memory allocation error", "Syntax error",
        "Resource error", "Sub resource error", "Undefined namespace prefix", "Encoding error",
        "Char out of XML range", "Invalid or incomplete context", "Stack usage error", "Forbidden variable",
        "Operation limit exceeded", "Recursion limit exceeded",
    ]

    /// The error for an XPath expression libxml2 could not compile or evaluate.
    static func xpathError(_ xpath: String, _ error: xmlError, namespaces: [String: String]) -> DownloadError {
        let index = Int(error.code) - Int(XML_XPATH_EXPRESSION_OK.rawValue)
        let reason = xpathMessages.indices.contains(index) && index > 0 ? xpathMessages[index] : "error \(error.code)"
        var message = "invalid XPath expression \(quoted(xpath))"
        if error.code != 0, error.int1 >= 0 { message += " at offset \(error.int1)" }
        message += ": \(reason)"
        if index == Int(XPATH_UNDEF_PREFIX_ERROR.rawValue) {
            let bound = namespaces.keys.sorted().joined(separator: ", ")
            message += bound.isEmpty
                ? " (no prefixes were passed in `namespaces`; bind each prefix the expression uses to its namespace URI)"
                : " (the prefixes passed in `namespaces` are: \(bound))"
        }
        return DownloadError(.manifestInvalid, message)
    }

    /// "a number", "a string", … for an XPath result type.
    static func describe(_ type: xmlXPathObjectType) -> String {
        switch type {
        case XPATH_BOOLEAN: return "a boolean"
        case XPATH_NUMBER: return "a number"
        case XPATH_STRING: return "a string"
        default: return "a result of XPath type \(type.rawValue)"
        }
    }
}
