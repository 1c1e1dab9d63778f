import Foundation
import Tessera

/// Reads the details of one `<file>` element, from a parsed tree (``MetalinkDocument``) or
/// from a stream (``MetalinkStreamReader``): the one home of what a Metalink file means.
struct MetalinkFileReader<Element: MetalinkElement> {
    let element: Element
    let entry: MetalinkDocument.Entry
    let version: MetalinkDocument.Version
    /// The document's URL, after redirects.
    let url: URL
    let maxPieces: Int
    var notes: [String] = []

    init(element: Element, entry: MetalinkDocument.Entry, version: MetalinkDocument.Version, url: URL, maxPieces: Int) {
        self.element = element
        self.entry = entry
        self.version = version
        self.url = url
        self.maxPieces = maxPieces
    }

    /// How much of the children of one name a stream keeps for this reader.
    enum Keep {
        /// The first one (the reader reads only the first `<size>`, the first `<version>`).
        case first
        /// Every one (all piece hashes of a `<pieces>`, up to the piece limit).
        case all
        /// None, only how many there are.
        case count
    }

    /// What this reader reads of the children named `name` of a `parent` element of a file
    /// (`file`, `verification`, `resources` or `pieces`), or `nil` for nothing: what a stream
    /// keeps of a file, so that it reads the same ``MetalinkFile`` as the tree.
    static func keep(_ name: String, in parent: String, version: MetalinkDocument.Version) -> Keep? {
        switch (parent, name) {
        case ("file", "size"): .first
        case ("file", _) where metadataKeys.contains(name): .first
        case ("file", "hash"), ("file", "pieces"), ("file", "url"): version == .v4 ? .all : nil
        case ("file", "metaurl"): version == .v4 ? .count : nil
        case ("file", "verification"), ("file", "resources"): version == .v3 ? .all : nil
        case ("verification", "hash"), ("verification", "pieces"), ("resources", "url"), ("pieces", "hash"): .all
        default: nil
        }
    }

    /// Whether this reader reads the text of the elements named `name`: `<size>`, `<hash>` (a
    /// file's or a piece's), `<url>` and the metadata.
    static func readsText(of name: String) -> Bool {
        name == "size" || name == "hash" || name == "url" || metadataKeys.contains(name)
    }

    /// The metadata elements kept in ``MetalinkFile/metadata``.
    static var metadataKeys: [String] { ["identity", "version", "description", "language", "os"] }

    private var isV4: Bool { version == .v4 }
    private var label: String { "the file \"\(MetalinkDocument.printable(entry.name))\" (line \(entry.line))" }

    private func invalid(_ message: String) -> DownloadError {
        DownloadError(.manifestInvalid, "\(label): \(message)", url: url.absoluteString)
    }

    mutating func read() throws(DownloadError) -> MetalinkFile {
        let size = try readSize()
        // Metalink 3 keeps hashes in <verification> and URLs in <resources>.
        let verification = isV4 ? [element] : element.children(named: "verification")
        let hashes = try readHashes(in: verification)
        let pieces = try readPieces(in: verification, size: size)
        if pieces != nil, size == nil {
            notes.append("\(label): <pieces> ignored, as the file has no <size> (downloaded whole, checked with its file hash)")
        }
        let resources = isV4 ? [element] : element.children(named: "resources")
        let (mirrors, skipped) = readMirrors(in: resources)
        if isV4 {
            let torrents = try element.count(named: "metaurl")
            if torrents > 0 { notes.append("\(label): \(torrents) <metaurl> (torrent, metalink) ignored") }
        }
        var metadata: [String: String] = [:]
        for key in Self.metadataKeys {
            if let value = element.firstChild(named: key).map({ Trimming.whitespacesAndNewlines($0.text) }), !value.isEmpty {
                metadata[key] = value
            }
        }
        return MetalinkFile(
            name: entry.name, line: entry.line, size: size, hashes: hashes, pieces: pieces, mirrors: mirrors,
            skippedMirrors: skipped, notes: notes, metadata: metadata)
    }

    private func readSize() throws(DownloadError) -> Int64? {
        guard let sizeElement = element.firstChild(named: "size") else { return nil }
        let text = Trimming.whitespacesAndNewlines(sizeElement.text)
        guard let size = Int64(text), size >= 0 else {
            throw invalid("the <size> at line \(sizeElement.line) is not a number of bytes: \"\(MetalinkDocument.printable(text))\"")
        }
        return size
    }

    private mutating func readHashes(in parents: [Element]) throws(DownloadError) -> [Checksum] {
        var hashes: [Checksum] = []
        for parent in parents {
            for hash in parent.children(named: "hash") {
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

    private func checksum(_ algorithm: Checksum.Algorithm, _ hash: Element, what: String) throws(DownloadError) -> Checksum {
        do {
            return try Checksum(algorithm, hex: Trimming.whitespacesAndNewlines(hash.text))
        } catch {
            throw invalid("\(what) at line \(hash.line) is not a valid digest: \(error.message)")
        }
    }

    /// The `<pieces>` of the strongest known type (the first of several equally strong ones).
    private mutating func readPieces(in parents: [Element], size: Int64?) throws(DownloadError) -> MetalinkPieces? {
        var best: (element: Element, algorithm: Checksum.Algorithm, length: Int64)?
        for parent in parents {
            for pieces in parent.children(named: "pieces") {
                guard let type = pieces[attribute: "type"] else {
                    throw invalid("the <pieces> at line \(pieces.line) has no type attribute")
                }
                guard let lengthText = pieces[attribute: "length"] else {
                    throw invalid("the <pieces> at line \(pieces.line) has no length attribute")
                }
                guard let length = Int64(Trimming.whitespaces(lengthText)), length > 0 else {
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
                    url: url.absoluteString)
            }
        }
        let count = try element.count(named: "hash")
        guard count <= maxPieces else {
            throw DownloadError(
                .manifestTooLarge, "\(label): \(subject) lists \(count) hashes, more than the limit of \(maxPieces)",
                url: url.absoluteString)
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
        for hash in element.children(named: "hash") {
            hashes.append(try checksum(best.algorithm, hash, what: "piece hash \(hashes.count + 1) of \(subject)"))
            // Metalink 3 numbers its pieces (`piece="0"`); Metalink 4 lists them in order.
            if !isV4 { indices.append(hash[attribute: "piece"].flatMap { Int(Trimming.whitespaces($0)) }) }
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
    private mutating func readMirrors(in parents: [Element]) -> ([MetalinkMirror], [String]) {
        var candidates: [(element: Element, rank: Int, priority: Int?, preference: Int?)] = []
        var skipped: [String] = []
        for parent in parents {
            for url in parent.children(named: "url") {
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
                        if let number = Int(Trimming.whitespaces(value)), (1...999_999).contains(number) {
                            priority = number
                        } else {
                            notes.append("\(label): the priority \"\(MetalinkDocument.printable(value))\" of the <url> at line \(url.line) is not 1 to 999999; taken as 999999")
                        }
                    }
                    rank = priority ?? 999_999
                } else {
                    if let value = url[attribute: "preference"] {
                        if let number = Int(Trimming.whitespaces(value)), (0...100).contains(number) {
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
                    Trimming.whitespacesAndNewlines(url.text), against: base(of: url), context: "the mirror")
            } catch {
                skipped.append("\(shown(url)): \(error.message)")
                continue
            }
            let location = url[attribute: "location"].map { Trimming.whitespaces($0).lowercased() }
            mirrors.append(MetalinkMirror(
                url: resolved, priority: candidate.priority, preference: candidate.preference,
                location: location?.isEmpty == false ? location : nil, line: url.line))
        }
        return (mirrors, skipped)
    }

    /// A `<url>` for messages: its text and line.
    private func shown(_ url: Element) -> String {
        "\"\(MetalinkDocument.printable(Trimming.whitespacesAndNewlines(url.text)))\" (line \(url.line))"
    }

    /// The base URL of an element's relative references: the document's URL, refined by any
    /// `xml:base` on the element and its ancestors (outermost first).
    private func base(of element: Element) -> URL {
        var url = self.url
        for base in element.xmlBases {
            let trimmed = Trimming.whitespacesAndNewlines(base)
            if let next = URL(string: trimmed, relativeTo: url)?.absoluteURL { url = next }
        }
        return url
    }
}
