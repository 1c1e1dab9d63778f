import CLibXML2

/// One element of a ``SafeXMLDocument``: its name, namespace, attributes, text and children.
///
/// An element is a small value that refers into the parsed tree and keeps that tree alive:
/// it stays valid after the ``SafeXMLDocument`` it came from is gone. Two elements are equal when
/// they are the same node of the same document. Reading an element never changes the tree, so
/// elements can be used from any thread.
public struct SafeXMLElement: Sendable, Hashable, CustomStringConvertible {
    /// The tree this element belongs to; holding it keeps the tree alive.
    let storage: XMLDocumentStorage
    /// The node itself.
    let ref: XMLNodeReference

    var node: xmlNodePtr { ref.pointer }

    init(storage: XMLDocumentStorage, node: xmlNodePtr) {
        self.storage = storage
        self.ref = XMLNodeReference(pointer: node)
    }

    /// The element's local name, without a prefix: `"MPD"` for `<mpd:MPD>`.
    public var name: String {
        LibXML2.string(node.pointee.name) ?? ""
    }

    /// The element's namespace URI, or `nil` when it is in no namespace.
    public var namespaceURI: String? {
        LibXML2.string(node.pointee.ns?.pointee.href)
    }

    /// The prefix the document uses for the element's namespace (`"mpd"` for `<mpd:MPD>`), or
    /// `nil` for an unprefixed name. Match on ``namespaceURI``, not on the prefix.
    public var prefix: String? {
        LibXML2.string(node.pointee.ns?.pointee.prefix)
    }

    /// The line of the element's start tag in the source, for error messages.
    ///
    /// libxml2 stores element lines in 16 bits: past line 65535 the line is taken from nearby
    /// text and may be reported as 65535.
    public var line: Int {
        Int(xmlGetLineNo(node))
    }

    /// The value of the attribute `name` that is in no namespace (attributes without a prefix
    /// are in no namespace, whatever the default namespace), or `nil` when there is none.
    public subscript(attribute name: String) -> String? {
        attribute(name, namespaceURI: nil)
    }

    /// The value of the attribute with local name `name` in the namespace `namespaceURI`
    /// (`nil`: in no namespace), or `nil` when there is none.
    ///
    /// `attribute("href", namespaceURI: "http://www.w3.org/1999/xlink")` reads `xlink:href`
    /// whatever prefix the document binds to that namespace.
    public func attribute(_ name: String, namespaceURI: String?) -> String? {
        var current = node.pointee.properties
        while let attribute = current {
            if LibXML2.string(attribute.pointee.name) == name,
                LibXML2.string(attribute.pointee.ns?.pointee.href) == namespaceURI
            {
                return value(of: attribute)
            }
            current = attribute.pointee.next
        }
        return nil
    }

    /// All attributes of the element (namespace declarations are not attributes).
    ///
    /// An attribute in no namespace is keyed by its name; an attribute in a namespace by its
    /// qualified name as written in the document (`"xlink:href"`, `"xml:lang"`). Use
    /// ``attribute(_:namespaceURI:)`` to read a namespaced attribute whatever its prefix.
    public var attributes: [String: String] {
        var result: [String: String] = [:]
        var current = node.pointee.properties
        while let attribute = current {
            var key = LibXML2.string(attribute.pointee.name) ?? ""
            if let prefix = LibXML2.string(attribute.pointee.ns?.pointee.prefix) {
                key = prefix + ":" + key
            }
            result[key] = value(of: attribute)
            current = attribute.pointee.next
        }
        return result
    }

    /// The text of the element and all its descendants, concatenated in document order: text
    /// and CDATA sections alike, whitespace as written (as libxml2's `xmlNodeGetContent`).
    ///
    /// For `<url><![CDATA[http://a/b?x=1&y=2]]></url>` it is `http://a/b?x=1&y=2`.
    public var text: String {
        LibXML2.takeString(xmlNodeGetContent(node)) ?? ""
    }

    /// The element's child elements, in document order (text, comments and other nodes are
    /// skipped).
    public var children: [SafeXMLElement] {
        var result: [SafeXMLElement] = []
        var current = node.pointee.children
        while let child = current {
            if child.pointee.type == XML_ELEMENT_NODE {
                result.append(SafeXMLElement(storage: storage, node: child))
            }
            current = child.pointee.next
        }
        return result
    }

    /// The child elements with local name `name`, in document order.
    ///
    /// - Parameters:
    ///   - name: The local name (without a prefix).
    ///   - namespaceURI: The namespace the children must be in; `nil` accepts any namespace
    ///     (and none).
    public func children(named name: String, namespaceURI: String? = nil) -> [SafeXMLElement] {
        children.filter { $0.matches(name, namespaceURI: namespaceURI) }
    }

    /// The first child element with local name `name`, or `nil`.
    ///
    /// - Parameters:
    ///   - name: The local name (without a prefix).
    ///   - namespaceURI: The namespace the child must be in; `nil` accepts any namespace
    ///     (and none).
    public func firstChild(named name: String, namespaceURI: String? = nil) -> SafeXMLElement? {
        var current = node.pointee.children
        while let child = current {
            if child.pointee.type == XML_ELEMENT_NODE {
                let element = SafeXMLElement(storage: storage, node: child)
                if element.matches(name, namespaceURI: namespaceURI) { return element }
            }
            current = child.pointee.next
        }
        return nil
    }

    /// The parent element, or `nil` for the root element.
    public var parent: SafeXMLElement? {
        guard let parent = node.pointee.parent, parent.pointee.type == XML_ELEMENT_NODE else { return nil }
        return SafeXMLElement(storage: storage, node: parent)
    }

    /// Evaluates an XPath 1.0 expression with this element as the context node and returns
    /// the elements it selects, in document order: `select("mpd:SegmentTemplate", …)` finds
    /// child elements, `select("ancestor::mpd:Period", …)` the enclosing period.
    ///
    /// See ``SafeXMLDocument/select(_:namespaces:)`` for namespaces and errors.
    public func select(_ xpath: String, namespaces: [String: String] = [:]) throws(DownloadError) -> [SafeXMLElement] {
        try storage.select(xpath, namespaces: namespaces, contextNode: node)
    }

    /// Evaluates an XPath 1.0 expression with this element as the context node and returns its
    /// value as text (`count(mpd:Representation)`, `string(@id)`).
    ///
    /// See ``SafeXMLDocument/evaluateString(_:namespaces:)``.
    public func evaluateString(_ xpath: String, namespaces: [String: String] = [:]) throws(DownloadError) -> String {
        try storage.evaluateString(xpath, namespaces: namespaces, contextNode: node)
    }

    /// `<name>` and the line it starts on, for logs and messages.
    public var description: String {
        let qualified = prefix.map { "\($0):\(name)" } ?? name
        return "<\(qualified)> at line \(line)"
    }

    /// Whether two elements are the same node of the same document.
    public static func == (lhs: SafeXMLElement, rhs: SafeXMLElement) -> Bool {
        lhs.ref == rhs.ref
    }

    /// Hashes the node's identity.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ref)
    }

    private func matches(_ name: String, namespaceURI: String?) -> Bool {
        guard self.name == name else { return false }
        guard let namespaceURI else { return true }
        return self.namespaceURI == namespaceURI
    }

    private func value(of attribute: UnsafeMutablePointer<xmlAttr>) -> String {
        LibXML2.takeString(xmlNodeListGetString(storage.doc, attribute.pointee.children, 1)) ?? ""
    }
}

/// A node pointer that may cross threads: the tree it points into is immutable and kept alive
/// by the ``XMLDocumentStorage`` stored next to it. Two elements with the same pointer are the
/// same node, as both keep their documents alive.
struct XMLNodeReference: @unchecked Sendable, Hashable {
    let pointer: xmlNodePtr
}
