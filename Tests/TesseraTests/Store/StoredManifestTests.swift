import Foundation
import Testing
@testable import Tessera

/// The store's two forms of a manifest: a plain download's few fields, anything else as JSON.
@Suite struct StoredManifestTests {
    static let url = URL(string: "https://example.com/dir/file%20name.bin?x=1&y=\"2\"")!

    static func plain(name: String = "file name.bin", named: Bool = true, title: String? = "file name.bin", metadata: [String: String] = [:]) -> DownloadManifest {
        DownloadManifest(
            title: title, outputs: [DownloadOutput(name: name, segments: [DownloadSegment(url: url)], isNamedByResponse: named)],
            sourceURL: url, metadata: metadata)
    }

    @Test func aPlainDownloadIsWrittenAsItsFieldsAndReadBackEqual() throws {
        for manifest in [
            Self.plain(), Self.plain(named: false, title: nil), Self.plain(metadata: ["tessera.originalName.0": "a\"b\\c\n\u{1}é/"]),
            Self.plain(name: "sub/ä \u{7f}.bin", title: "Tab\there"),
        ] {
            let text = try StoredManifest.encode(manifest)
            #expect(text.hasPrefix(#"{"plain":"#), "\(text)")
            #expect(try StoredManifest.decode(Data(text.utf8)) == manifest)
            // The text is JSON any parser reads.
            #expect((try? JSONSerialization.jsonObject(with: Data(text.utf8))) != nil, "\(text)")
        }
    }

    @Test func anythingElseIsWrittenAsItsCodableJSON() throws {
        var mirrors = Self.plain()
        mirrors.outputs[0].segments = [DownloadSegment(urls: [Self.url, URL(string: "https://mirror/x")!])]
        var sized = Self.plain()
        sized.outputs[0].segments = [DownloadSegment(url: Self.url, expectedSize: 10)]
        var expiring = Self.plain()
        expiring.expiresAt = Date(timeIntervalSinceReferenceDate: 1000)
        var two = Self.plain()
        two.outputs.append(DownloadOutput(name: "b", segments: [DownloadSegment(url: Self.url)]))
        var checked = Self.plain()
        checked.outputs[0].checksum = try Checksum(.sha256, hex: String(repeating: "ab", count: 32))
        for manifest in [sized, expiring, two, checked] {
            let text = try StoredManifest.encode(manifest)
            #expect(!text.hasPrefix(#"{"plain":"#), "\(text)")
            #expect(try StoredManifest.decode(Data(text.utf8)) == manifest)
        }
        // Every field the plain form leaves out, set to other than its default, is kept.
        var segmentChanges: [(inout DownloadSegment) throws -> Void] = [
            { $0.range = ByteRange(offset: 0, length: 5) }, { $0.checksum = try Checksum(.sha256, hex: String(repeating: "cd", count: 32)) },
            { $0.headers = ["Referer": "https://example.com/"] }, { $0.offset = 0 }, { $0.name = "part" },
            { $0.encryption = SegmentEncryption(method: .aes128, keyURL: URL(string: "https://example.com/key")!, iv: Array(repeating: 1, count: 16)) },
        ]
        segmentChanges.append { $0.expectedSize = 3 }
        var others: [DownloadManifest] = []
        for change in segmentChanges {
            var manifest = Self.plain()
            var segment = manifest.outputs[0].segments[0]
            try change(&segment)
            manifest.outputs[0].segments = [segment]
            others.append(manifest)
        }
        let outputChanges: [(inout DownloadOutput) -> Void] = [
            { $0.assembly = .pieces }, { $0.expectedSize = 9 }, { $0.isSelected = false },
            { $0.media = MediaInfo(kind: .video) }, { $0.segments = SegmentList([DownloadSegment(url: Self.url), DownloadSegment(url: Self.url)]) },
        ]
        for change in outputChanges {
            var manifest = Self.plain()
            change(&manifest.outputs[0])
            others.append(manifest)
        }
        var live = Self.plain()
        live.live = LiveManifestInfo(kind: "hls", targetDuration: 4, windowSegments: 5)
        others.append(live)
        for manifest in others {
            let text = try StoredManifest.encode(manifest)
            #expect(!text.hasPrefix(#"{"plain":"#), "\(text)")
            #expect(try StoredManifest.decode(Data(text.utf8)) == manifest)
        }
        // Mirrors are URLs too: still plain.
        #expect(try StoredManifest.decode(Data(StoredManifest.encode(mirrors).utf8)) == mirrors)
    }

    /// The plain form checks each field it leaves out: a field added to one of these types
    /// must be added to that check (`StoredManifest.Plain.init?`), to the compact form's
    /// (`CompactManifest.init?`, `CompactManifestTests`) and to the list here.
    @Test func thePlainFormKnowsEveryFieldOfAManifest() {
        let manifest = Self.plain()
        #expect(Mirror(reflecting: manifest).children.map(\.label) == ["title", "outputs", "expiresAt", "sourceURL", "metadata", "live"])
        #expect(Mirror(reflecting: manifest.outputs[0]).children.map(\.label) == [
            "name", "assembly", "segments", "expectedSize", "checksum", "isSelected", "media", "isNamedByResponse",
        ])
        #expect(Mirror(reflecting: manifest.outputs[0].segments[0]).children.map(\.label) == [
            "urls", "range", "expectedSize", "checksum", "headers", "offset", "name", "encryption",
        ])
    }

    @Test func jsonTextEscapesWhatJSONNeedsAndNothingElse() throws {
        var json = JSONText()
        json.string("a\"b\\c\u{0}\u{1f}\n\r\t/é😀")
        let text = json.text
        #expect(text == #""a\"b\\c\u0000\u001f\n\r\t/é😀""#)
        let decoded = try JSONDecoder().decode(String.self, from: Data(text.utf8))
        #expect(decoded == "a\"b\\c\u{0}\u{1f}\n\r\t/é😀")
        // Values with nothing to escape (most: names, URLs) and with one thing to escape, at
        // either end, read back as they were.
        for value in ["", "https://example.com/a b/é😀?x=1&y=%22", "\"", "x\\", "\u{7f}\u{1f}x"] {
            var json = JSONText(capacity: 0)
            json.string(value)
            #expect(try JSONDecoder().decode(String.self, from: Data(json.bytes)) == value, "\(json.text)")
        }
    }

    @Test func aDirectEntitysPayloadReadsBack() throws {
        for entity in [DirectEntity(url: Self.url), DirectEntity(url: Self.url, fileName: "na\"me.bin", destinationDirectory: "d")] {
            let record = try entity.record()
            let rebuilt = try DirectEntity(record: record)
            #expect(rebuilt.payload == entity.payload)
            #expect(try JSONDecoder().decode(DirectEntityPayload.self, from: record.payload) == entity.payload)
        }
    }
}
