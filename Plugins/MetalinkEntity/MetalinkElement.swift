import Foundation
import Tessera

/// An element of a Metalink `<file>` as ``MetalinkFileReader`` reads it: a node of a parsed tree
/// (``TreeElement``) or a part of the file captured from a stream (``CapturedElement``). Both
/// answer alike for the same document, so one reader turns either into the same ``MetalinkFile``.
protocol MetalinkElement {
    /// The line of the start tag.
    var line: Int { get }
    /// The attribute `name` in no namespace.
    subscript(attribute name: String) -> String? { get }
    /// The text of the element and all its descendants, whitespace as written
    /// (``SafeXMLElement/text``).
    var text: String { get }
    /// The child elements named `name` in the document's Metalink namespace, in document order.
    func children(named name: String) -> [Self]
    /// The first of them.
    func firstChild(named name: String) -> Self?
    /// How many there are, counted without building them.
    func count(named name: String) throws(DownloadError) -> Int
    /// The `xml:base` attributes of the element and its ancestors, outermost first.
    var xmlBases: [String] { get }
}

/// An element of a parsed tree, with the document's Metalink namespace.
struct TreeElement: MetalinkElement {
    let element: SafeXMLElement
    let namespace: String

    var line: Int { element.line }
    subscript(attribute name: String) -> String? { element[attribute: name] }
    var text: String { element.text }

    func children(named name: String) -> [TreeElement] {
        element.children(named: name, namespaceURI: namespace).map { TreeElement(element: $0, namespace: namespace) }
    }

    func firstChild(named name: String) -> TreeElement? {
        element.firstChild(named: name, namespaceURI: namespace).map { TreeElement(element: $0, namespace: namespace) }
    }

    func count(named name: String) throws(DownloadError) -> Int {
        Int(try element.evaluateString("count(m:\(name))", namespaces: ["m": namespace])) ?? 0
    }

    var xmlBases: [String] {
        var bases: [String] = []
        var current: SafeXMLElement? = element
        while let node = current {
            if let base = node.attribute("base", namespaceURI: MetalinkDocument.xmlNamespace) { bases.append(base) }
            current = node.parent
        }
        return bases.reversed()
    }
}

/// The parts of a `<file>` that a ``MetalinkFileReader`` reads, captured from a stream: its
/// attributes, the text of the elements whose text is read, and the children that are read
/// (the rest of the document is never kept).
struct CapturedElement: MetalinkElement {
    /// The local name (every captured element is in the document's Metalink namespace).
    var name: String
    var line: Int
    var attributes: [String: String]
    var text = ""
    /// The children kept, in document order.
    var children: [CapturedElement] = []
    /// How many children of each name the element has, kept or not.
    var counts: [String: Int] = [:]
    var xmlBases: [String]

    subscript(attribute name: String) -> String? { attributes[name] }

    func children(named name: String) -> [CapturedElement] { children.filter { $0.name == name } }

    func firstChild(named name: String) -> CapturedElement? { children.first { $0.name == name } }

    func count(named name: String) -> Int { counts[name] ?? 0 }
}
