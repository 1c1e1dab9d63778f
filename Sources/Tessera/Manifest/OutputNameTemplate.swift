import Foundation

/// A name template for a task's outputs, as yt-dlp's `-o`: `%(title)s.%(ext)s`,
/// `%(title)s/%(format_id)s.%(ext)s`, `%(id)s-%(part)d.%(ext)s`. The result is a path relative
/// to the download root; `/` in the template makes folders.
///
/// Fields: `title` (the manifest's title, else the entity's), `id` (the entity's key), `format_id`
/// (the output's media identifier, else its number), `ext` (the extension of the name the plugin
/// gave), `name` (that name's last component without its extension), `part` (the output's
/// number, from 1), `type` (the entity type: `dash`, `hls` …). `%%` is a percent sign. Each value
/// is made a safe file name (no `/`, no control characters) before it is put in; the whole name
/// must then pass ``SafePath/relative(_:)``.
public struct OutputNameTemplate: Sendable, Hashable, CustomStringConvertible {
    /// A field of the template (see ``Values`` for what each holds).
    public enum Field: String, Sendable, Hashable, CaseIterable {
        /// `%(title)s`.
        case title
        /// `%(id)s`.
        case id
        /// `%(format_id)s`.
        case formatID = "format_id"
        /// `%(ext)s`.
        case ext
        /// `%(name)s`.
        case name
        /// `%(part)d` (or `%(part)s`).
        case part
        /// `%(type)s`.
        case type
    }

    /// The values of the fields for one output.
    public struct Values: Sendable, Hashable {
        /// `%(title)s`: the manifest's title, else the entity's.
        public var title: String
        /// `%(id)s`: the entity's key.
        public var id: String
        /// `%(format_id)s`: the output's media identifier, else its number.
        public var formatID: String
        /// `%(ext)s`: the extension of the plugin's name for the output.
        public var ext: String
        /// `%(name)s`: the plugin's file name without its extension.
        public var name: String
        /// `%(part)d`: the output's number, from 1.
        public var part: Int
        /// `%(type)s`: the entity type.
        public var type: String

        /// The values for the output at `index` of `manifest`, of an entity of `type` with `key`
        /// and `title`.
        public init(manifest: DownloadManifest, index: Int, type: String, key: String, title: String) {
            let output = manifest.outputs[index]
            let last = output.name.split(separator: "/").last.map(String.init) ?? output.name
            let dot = last.lastIndex(of: ".").flatMap { $0 == last.startIndex ? nil : $0 }
            self.title = manifest.title ?? title
            id = key
            formatID = output.media?.identifier ?? String(index + 1)
            ext = dot.map { String(last[last.index(after: $0)...]) } ?? ""
            name = dot.map { String(last[..<$0]) } ?? last
            part = index + 1
            self.type = type
        }

        func value(of field: Field) -> String {
            switch field {
            case .title: title
            case .id: id
            case .formatID: formatID
            case .ext: ext
            case .name: name
            case .part: String(part)
            case .type: type
            }
        }
    }

    private enum Piece: Sendable, Hashable {
        case text(String)
        case field(Field)
    }

    /// The template as written.
    public let description: String
    private let pieces: [Piece]

    /// Parses `text`; an unknown field or conversion is refused with a message that lists the
    /// fields.
    public init(_ text: String) throws(DownloadError) {
        var pieces: [Piece] = []
        var literal = ""
        var rest = Substring(text)
        let fields = Field.allCases.map { "%(\($0.rawValue))s" }.joined(separator: ", ")
        while let percent = rest.firstIndex(of: "%") {
            literal += rest[..<percent]
            let after = rest[rest.index(after: percent)...]
            if after.first == "%" {
                literal += "%"
                rest = after.dropFirst()
                continue
            }
            guard after.first == "(", let close = after.firstIndex(of: ")"),
                let conversion = after[after.index(after: close)...].first
            else {
                throw DownloadError(.invalidRequest, "the output template \"\(UntrustedText.printable(text))\" has a % that is not %(field)s or %%; the fields are \(fields)")
            }
            let name = String(after[after.index(after: after.startIndex)..<close])
            guard let field = Field(rawValue: name) else {
                throw DownloadError(.invalidRequest, "the output template has the unknown field %(\(UntrustedText.printable(name)))\(conversion); the fields are \(fields)")
            }
            guard conversion == "s" || (conversion == "d" && field == .part) else {
                throw DownloadError(.invalidRequest, "the output template writes %(\(name))\(conversion); only s (and d for part) are supported")
            }
            if !literal.isEmpty {
                pieces.append(.text(literal))
                literal = ""
            }
            pieces.append(.field(field))
            rest = after[after.index(after: after.index(after: close))...]
        }
        literal += rest
        if !literal.isEmpty { pieces.append(.text(literal)) }
        guard !pieces.isEmpty else { throw DownloadError(.invalidRequest, "the output template is empty") }
        description = text
        self.pieces = pieces
    }

    /// Checks that the template makes a safe relative path at all (not `../…`, not `/…`): the
    /// fields filled with plain values.
    public func check() throws(DownloadError) {
        let sample = DownloadManifest(
            title: "title", outputs: [DownloadOutput(name: "name.ext", segments: [DownloadSegment(url: URL(string: "http://127.0.0.1/")!)])])
        do {
            _ = try name(Values(manifest: sample, index: 0, type: "type", key: "id", title: "title"))
        } catch {
            throw DownloadError(.invalidRequest, "the output template \"\(UntrustedText.printable(description))\" does not make a name inside the download directory: \(error.message)")
        }
    }

    /// The relative path for an output with `values`; an empty field next to a dot leaves no
    /// stray dot (`%(title)s.%(ext)s` of a file without extension is `title`).
    public func name(_ values: Values) throws(DownloadError) -> String {
        var result = ""
        for piece in pieces {
            switch piece {
            case .text(let text): result += text
            case .field(let field):
                let value = values.value(of: field)
                result += value.isEmpty ? "" : SafePath.sanitizedFileName(value, fallback: "_")
            }
        }
        while result.hasSuffix(".") { result.removeLast() }
        return try SafePath.relative(result)
    }
}
