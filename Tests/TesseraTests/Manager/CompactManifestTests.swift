import Foundation
import Testing
@testable import Tessera

/// What a completed task keeps of a one-file manifest: the compact form must build an equal
/// manifest again, or not be made. It checks the fields it leaves out one by one (no rebuild
/// to compare), so these cases are what stands between a new field and a lost one.
@Suite struct CompactManifestTests {
    static let urls = [
        "https://example.com/dir/file%20name.bin?x=1&y=%222%22", "http://[::1]:8080/a/b", "https://xn--bcher-kva.example/ä",
        "https://user:pass@example.com/", "http://example.com", "https://example.com/a;p=1/b.bin#frag", "ftp://example.com/x",
        "file:///tmp/a%20b",
    ]

    static func manifest(_ url: URL, size: Int64? = nil) throws -> DownloadManifest {
        DownloadManifest(
            title: "t",
            outputs: [DownloadOutput(
                name: "n.bin", segments: [DownloadSegment(urls: [url, URL(string: "https://mirror.example/n.bin")!], expectedSize: size)],
                expectedSize: size, checksum: try Checksum(.sha256, hex: String(repeating: "ab", count: 32)), isNamedByResponse: true)],
            sourceURL: url, metadata: ["k": "v"])
    }

    @Test func aOneFileManifestIsKeptCompactAndBuiltAgainEqual() throws {
        var made = 0
        for text in Self.urls {
            for url in [URL(string: text)!, URL(fileURLWithPath: "/tmp/dir name/x.bin")] {
                let manifest = try Self.manifest(url, size: 5)
                let compact = try #require(CompactManifest(manifest), "\(url)")
                #expect(compact.manifest == manifest, "\(url)")
                made += 1
            }
        }
        #expect(made == Self.urls.count * 2)
    }

    @Test func aURLWithABaseIsNotMadeCompact() throws {
        let relative = URL(string: "b/c.bin", relativeTo: URL(string: "https://example.com/a/"))!
        #expect(CompactManifest(try Self.manifest(relative)) == nil)
    }

    @Test func everyFieldTheCompactFormLeavesOutKeepsTheManifestWhole() throws {
        let url = URL(string: Self.urls[0])!
        var others: [DownloadManifest] = []
        let segmentChanges: [(inout DownloadSegment) -> Void] = [
            { $0.range = ByteRange(offset: 0, length: 5) }, { $0.headers = ["Referer": "https://example.com/"] }, { $0.offset = 0 },
            { $0.name = "part" },
            { $0.encryption = SegmentEncryption(method: .aes128, keyURL: URL(string: "https://example.com/key")!, iv: Array(repeating: 1, count: 16)) },
        ]
        for change in segmentChanges {
            var manifest = try Self.manifest(url)
            var segment = manifest.outputs[0].segments[0]
            change(&segment)
            manifest.outputs[0].segments = [segment]
            others.append(manifest)
        }
        let outputChanges: [(inout DownloadOutput) -> Void] = [
            { $0.assembly = .pieces }, { $0.isSelected = false }, { $0.media = MediaInfo(kind: .video) },
            { $0.segments = SegmentList([DownloadSegment(url: url), DownloadSegment(url: url)]) },
        ]
        for change in outputChanges {
            var manifest = try Self.manifest(url)
            change(&manifest.outputs[0])
            others.append(manifest)
        }
        var live = try Self.manifest(url)
        live.live = LiveManifestInfo(kind: "hls", targetDuration: 4, windowSegments: 5)
        var expiring = try Self.manifest(url)
        expiring.expiresAt = Date(timeIntervalSinceReferenceDate: 1000)
        var two = try Self.manifest(url)
        two.outputs.append(DownloadOutput(name: "b", segments: [DownloadSegment(url: url)]))
        others += [live, expiring, two]
        for manifest in others {
            #expect(CompactManifest(manifest) == nil, "\(manifest)")
        }
    }
}
