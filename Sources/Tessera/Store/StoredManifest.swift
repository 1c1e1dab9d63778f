import Foundation

/// Manifests as the store keeps them. A plain download's manifest (one output made of one
/// segment that has nothing but its URLs: what ``DirectEntity`` resolves to) is written as its
/// few fields directly, `{"plain":{…}}`; any other as the JSON of its `Codable` form. Both read
/// back to the manifest that was written: the plain form is used only when every other field
/// has its default, so that building the manifest again from its fields gives an equal one.
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
        /// equal); `nil` otherwise. Every field the plain form leaves out is checked for its
        /// default here, one by one (rebuilding the manifest to compare cost more than writing
        /// it); `StoredManifestTests` fails when one of the three types gains a field.
        init?(_ manifest: DownloadManifest) {
            guard manifest.outputs.count == 1, manifest.expiresAt == nil, manifest.live == nil else { return nil }
            let output = manifest.outputs[0]
            guard output.assembly == .concatenated, output.expectedSize == nil, output.checksum == nil, output.isSelected,
                output.media == nil, output.segments.count == 1
            else { return nil }
            let segment = output.segments[0]
            guard segment.range == nil, segment.expectedSize == nil, segment.checksum == nil, segment.headers.isEmpty,
                segment.offset == nil, segment.name == nil, segment.encryption == nil
            else { return nil }
            self.init(
                name: output.name, urls: segment.urls, named: output.isNamedByResponse, title: manifest.title,
                source: manifest.sourceURL, metadata: manifest.metadata.isEmpty ? nil : manifest.metadata)
            assert(self.manifest == manifest, "a field of DownloadManifest the plain form does not know")
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
            var json = JSONText(capacity: 96 + name.utf8.count + (title?.utf8.count ?? 0) + (urls.count + 1) * 160)
            json.raw(#"{"plain":{"name":"#)
            json.string(name)
            json.raw(#","named":"#)
            json.raw(named ? "true" : "false")
            json.raw(#","urls":["#)
            for (index, url) in urls.enumerated() {
                if index > 0 { json.raw(",") }
                json.string(url.absoluteString)
            }
            json.raw("]")
            if let title {
                json.raw(#","title":"#)
                json.string(title)
            }
            if let source {
                json.raw(#","source":"#)
                json.string(source.absoluteString)
            }
            if let metadata {
                json.raw(#","metadata":{"#)
                for (index, key) in metadata.keys.sorted().enumerated() {
                    if index > 0 { json.raw(",") }
                    json.string(key)
                    json.raw(":")
                    json.string(metadata[key]!)
                }
                json.raw("}")
            }
            json.raw("}}")
            return json.text
        }
    }

    private struct PlainDocument: Decodable {
        var plain: Plain
    }
}

/// JSON text written by hand, where a `JSONEncoder` run would cost more than the value: bytes
/// appended to one buffer (a `String` grown piece by piece cost more than the values it holds).
struct JSONText {
    /// The text's UTF-8 bytes.
    private(set) var bytes: [UInt8] = []

    /// An empty text with room for `capacity` bytes.
    init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// The text.
    var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Appends `text` as it is (punctuation, keys, literals).
    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends `value` as a JSON string: quotes, backslashes and control characters escaped
    /// (RFC 8259 §7), everything else as it is.
    mutating func string(_ value: String) {
        bytes.append(0x22)
        var value = value
        value.withUTF8 { utf8 in
            // Most values (names, URLs) have nothing to escape: they go in as one run.
            var start = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte == 0x22 || byte == 0x5C || byte < 0x20 else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                switch byte {
                case 0x22: bytes.append(contentsOf: [0x5C, 0x22])
                case 0x5C: bytes.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: bytes.append(contentsOf: [0x5C, 0x6E])
                case 0x0D: bytes.append(contentsOf: [0x5C, 0x72])
                case 0x09: bytes.append(contentsOf: [0x5C, 0x74])
                default:
                    // \u00XX, lowercase hex as JSONEncoder writes it.
                    let hex: StaticString = "0123456789abcdef"
                    let digits = hex.utf8Start
                    bytes.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
                }
                start = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(0x22)
    }
}
