import CLibXML2

/// Limits applied while parsing an XML manifest with ``SafeXMLDocument`` or ``XMLStreamReader``.
///
/// The parser itself is always configured for hostile input and that part is not
/// configurable: no network access, no entity substitution, no DTD loading or validation,
/// no XInclude, and libxml2's built-in limits stay on (no `XML_PARSE_HUGE`). Documents whose
/// DTD declares entities or points to an external DTD are refused with
/// ``DownloadError/Code/unsafeInput``.
public struct XMLParseOptions: Sendable, Hashable {
    /// The largest document accepted, in bytes. A larger input fails with
    /// ``DownloadError/Code/manifestTooLarge`` before any byte is parsed. Default: 32 MiB.
    public var maxDocumentSize: Int = 32 << 20

    /// The deepest element nesting accepted; the root element is at depth 1. Deeper documents
    /// fail with ``DownloadError/Code/manifestTooLarge`` as soon as the parser reaches the
    /// offending element. Default: 256.
    ///
    /// libxml2 has its own hard limit of 256 levels (it is only lifted by `XML_PARSE_HUGE`,
    /// which Tessera never sets), so values above 256 behave like 256.
    public var maxDepth: Int = 256

    /// The largest number of elements accepted, or `nil` for no limit. More elements fail with
    /// ``DownloadError/Code/manifestTooLarge`` as soon as the parser reaches the first one over
    /// the limit. Default: 5,000,000.
    public var maxElementCount: Int? = 5_000_000

    /// Creates the default limits: 32 MiB, 256 levels, 5,000,000 elements.
    public init() {}

    /// Creates limits with the given values.
    public init(maxDocumentSize: Int = 32 << 20, maxDepth: Int = 256, maxElementCount: Int? = 5_000_000) {
        self.maxDocumentSize = maxDocumentSize
        self.maxDepth = maxDepth
        self.maxElementCount = maxElementCount
    }
}

extension XMLParseOptions {
    /// The libxml2 parser flags Tessera always uses.
    ///
    /// - `XML_PARSE_NONET`: never fetch anything over the network.
    /// - `XML_PARSE_NOERROR`, `XML_PARSE_NOWARNING`: nothing is printed to stderr; errors are
    ///   captured per parse through the context's structured error handler.
    /// - `XML_PARSE_NOCDATA`: CDATA sections become text nodes, so text and CDATA read alike.
    /// - `XML_PARSE_BIG_LINES`: line numbers above 65535 stay correct for text nodes.
    ///
    /// Never set: `XML_PARSE_NOENT` (entity substitution), `XML_PARSE_DTDLOAD`,
    /// `XML_PARSE_DTDATTR`, `XML_PARSE_DTDVALID`, `XML_PARSE_XINCLUDE`, `XML_PARSE_HUGE`,
    /// `XML_PARSE_RECOVER`.
    static let libxml2Flags: Int32 = Int32(
        XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue
            | XML_PARSE_NOCDATA.rawValue | XML_PARSE_BIG_LINES.rawValue
    )

    /// Flags that must never be part of ``libxml2Flags``; checked by the tests.
    static let forbiddenLibxml2Flags: Int32 = Int32(
        XML_PARSE_NOENT.rawValue | XML_PARSE_DTDLOAD.rawValue | XML_PARSE_DTDATTR.rawValue
            | XML_PARSE_DTDVALID.rawValue | XML_PARSE_XINCLUDE.rawValue | XML_PARSE_HUGE.rawValue
            | XML_PARSE_RECOVER.rawValue
    )

    /// The maximum depth libxml2 allows without `XML_PARSE_HUGE`.
    static let libxml2MaxDepth = 256

    /// Checks the size limit before anything is parsed.
    func checkSize(_ count: Int) throws(DownloadError) {
        if count > maxDocumentSize {
            throw DownloadError(
                .manifestTooLarge,
                "the XML document is \(count) bytes, over the limit of \(maxDocumentSize) bytes "
                    + "(XMLParseOptions.maxDocumentSize)"
            )
        }
        if count > Int(Int32.max) {
            throw DownloadError(.manifestTooLarge, "the XML document is \(count) bytes, over libxml2's limit of 2 GiB")
        }
    }

    /// The error for an element nested deeper than ``maxDepth``.
    func depthError(depth: Int, name: String, line: Int) -> DownloadError {
        DownloadError(
            .manifestTooLarge,
            "the XML nests elements \(depth) deep at line \(line) (<\(name)>), over the limit of \(maxDepth) "
                + "(XMLParseOptions.maxDepth)"
        )
    }

    /// The error for more elements than ``maxElementCount``.
    func elementCountError(limit: Int, line: Int, streaming: Bool) -> DownloadError {
        DownloadError(
            .manifestTooLarge,
            "the XML has more than \(limit) elements (the first one over the limit is at line \(line)); "
                + (streaming
                    ? "raise XMLParseOptions.maxElementCount or set it to nil"
                    : "raise XMLParseOptions.maxElementCount, or read the document with XMLStreamReader")
        )
    }
}
