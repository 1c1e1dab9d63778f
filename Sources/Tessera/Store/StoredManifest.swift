import Foundation

/// Manifests as the store keeps them. A plain download's manifest (one output made of one
/// segment that has nothing but its URLs: what ``DirectEntity`` resolves to) is written as its
/// few fields directly, `{"plain":{…}}`; any other as the JSON of its `Codable` form. Both read
/// back to the manifest that was written: the plain form is used only when building the
/// manifest again from its fields gives an equal one.
///
/// A list of thousands of plain URLs then costs no `JSONEncoder` run per task.
enum StoredManifest {
    /// The JSON text of `manifest`.
    static func encode(_ manifest: DownloadManifest) throws -> String {
        if let plain = Plain(manifest) { return plain.json }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(manifest), as: UTF8.self)
    }

    /// The manifest in `data`, in either form.
    static func decode(_ data: Data) throws -> DownloadManifest {
        let decoder = JSONDecoder()
        if data.starts(with: Array(#"{"plain":"#.utf8)) {
            return try decoder.decode(PlainDocument.self, from: data).plain.manifest
        }
        return try decoder.decode(DownloadManifest.self, from: data)
    }

    /// The fields of a plain download's manifest.
    struct Plain: Codable, Equatable {
        var name: String
        var urls: [URL]
        var named: Bool
        var title: String?
        var source: URL?
        var metadata: [String: String]?

        /// The manifest these fields stand for.
        var manifest: DownloadManifest {
            DownloadManifest(
                title: title, outputs: [DownloadOutput(name: name, segments: [DownloadSegment(urls: urls)], isNamedByResponse: named)],
                sourceURL: source, metadata: metadata ?? [:])
        }

        /// The fields of `manifest`, when it is a plain download's (built again from them, it is
        /// equal); `nil` otherwise.
        init?(_ manifest: DownloadManifest) {
            guard manifest.outputs.count == 1, manifest.expiresAt == nil, manifest.outputs[0].segments.count == 1 else { return nil }
            let output = manifest.outputs[0]
            self.init(
                name: output.name, urls: output.segments[0].urls, named: output.isNamedByResponse, title: manifest.title,
                source: manifest.sourceURL, metadata: manifest.metadata.isEmpty ? nil : manifest.metadata)
            guard self.manifest == manifest else { return nil }
        }

        init(name: String, urls: [URL], named: Bool, title: String?, source: URL?, metadata: [String: String]?) {
            self.name = name
            self.urls = urls
            self.named = named
            self.title = title
            self.source = source
            self.metadata = metadata
        }

        /// `{"plain":{…}}`, written directly (keys in a fixed order).
        var json: String {
            var text = #"{"plain":{"name":"#
            JSONText.append(name, to: &text)
            text += #","named":"#
            text += named ? "true" : "false"
            text += #","urls":["#
            for (index, url) in urls.enumerated() {
                if index > 0 { text += "," }
                JSONText.append(url.absoluteString, to: &text)
            }
            text += "]"
            if let title {
                text += #","title":"#
                JSONText.append(title, to: &text)
            }
            if let source {
                text += #","source":"#
                JSONText.append(source.absoluteString, to: &text)
            }
            if let metadata {
                text += #","metadata":{"#
                for (index, key) in metadata.keys.sorted().enumerated() {
                    if index > 0 { text += "," }
                    JSONText.append(key, to: &text)
                    text += ":"
                    JSONText.append(metadata[key]!, to: &text)
                }
                text += "}"
            }
            text += "}}"
            return text
        }
    }

    private struct PlainDocument: Decodable {
        var plain: Plain
    }
}

/// JSON text written by hand, where a `JSONEncoder` run would cost more than the value.
enum JSONText {
    /// Appends `value` as a JSON string: quotes, backslashes and control characters escaped
    /// (RFC 8259 §7), everything else as it is.
    static func append(_ value: String, to text: inout String) {
        text += "\""
        // Most values (names, URLs) have nothing to escape: they go in whole (looked at as one
        // run of bytes, not byte by byte through the string's view).
        var whole = value
        if whole.withUTF8({ bytes in !bytes.contains { $0 == 0x22 || $0 == 0x5C || $0 < 0x20 } }) {
            text += whole
            text += "\""
            return
        }
        var start = value.utf8.startIndex
        let utf8 = value.utf8
        var index = start
        while index != utf8.endIndex {
            let byte = utf8[index]
            if byte == 0x22 || byte == 0x5C || byte < 0x20 {
                text += String(value[start..<index])
                switch byte {
                case 0x22: text += "\\\""
                case 0x5C: text += "\\\\"
                case 0x0A: text += "\\n"
                case 0x0D: text += "\\r"
                case 0x09: text += "\\t"
                default:
                    let hex = String(byte, radix: 16)
                    text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                }
                start = utf8.index(after: index)
            }
            index = utf8.index(after: index)
        }
        text += String(value[start..<utf8.endIndex])
        text += "\""
    }
}
