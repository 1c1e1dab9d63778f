import Foundation
import Testing

@testable import Tessera

/// `DownloadManifest.validate(maxSegments:)`, with `DownloadOutput.validate()` and
/// `DownloadSegment.validate(in:index:)` behind it: one test per refusal, and one valid
/// manifest of each assembly kind.
@Suite struct ManifestValidationTests {
    static let url = URL(string: "https://cdn.example.com/file.bin")!
    static let mirror = URL(string: "http://mirror.example.com/file.bin")!

    func segment(
        _ url: URL = url, range: ByteRange? = nil, size: Int64? = nil, headers: HTTPHeaders = HTTPHeaders(),
        offset: Int64? = nil, name: String? = nil
    ) -> DownloadSegment {
        DownloadSegment(urls: [url], range: range, expectedSize: size, headers: headers, offset: offset, name: name)
    }

    func manifest(_ outputs: DownloadOutput...) -> DownloadManifest {
        DownloadManifest(title: "t", outputs: outputs)
    }

    @discardableResult
    func refusal(
        _ manifest: DownloadManifest, maxSegments: Int = 1_000_000, _ code: DownloadError.Code, mentioning: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> DownloadError? {
        let error = #expect(throws: DownloadError.self, sourceLocation: sourceLocation) {
            try manifest.validate(maxSegments: maxSegments)
        }
        #expect(error?.code == code, "\(String(describing: error))", sourceLocation: sourceLocation)
        if let mentioning {
            #expect(error?.message.contains(mentioning) == true, "\(String(describing: error))", sourceLocation: sourceLocation)
        }
        return error
    }

    // MARK: Manifest

    @Test func hugeSizesAreRefusedNotAddedUp() {
        let huge: Int64 = 1 << 62
        // Two parts of 2^62 bytes (a playurl answer): the sum does not fit in an Int64.
        refusal(manifest(
            DownloadOutput(name: "p1.flv", segments: [segment(size: huge)]),
            DownloadOutput(name: "p2.flv", segments: [segment(size: huge)])), .manifestInvalid, mentioning: "1 EiB")
        // Two ranges of 2^62 bytes in one output (SegmentList mediaRange, HLS BYTERANGE).
        refusal(manifest(DownloadOutput(name: "t.mp4", segments: [
            segment(range: ByteRange(offset: 0, length: huge)), segment(range: ByteRange(offset: huge, length: huge)),
        ])), .manifestInvalid, mentioning: "1 EiB")
        // A range whose end does not fit.
        refusal(manifest(DownloadOutput(name: "t.mp4", segments: [
            segment(range: ByteRange(offset: .max - 10, length: 100)),
        ])), .manifestInvalid, mentioning: "1 EiB")
        // Pieces placed past the limit.
        refusal(manifest(DownloadOutput(name: "f.iso", assembly: .pieces, segments: [
            segment(size: 10, offset: .max - 5),
        ])), .manifestInvalid, mentioning: "1 EiB")
        // Sizes that add up within the limit pass.
        #expect(throws: Never.self) {
            try manifest(
                DownloadOutput(name: "a", segments: [segment(size: 1 << 59)]),
                DownloadOutput(name: "b", segments: [segment(size: 1 << 59)])
            ).validate()
        }
        // And the unvalidated sum of an output holds at the bound instead of trapping.
        let output = DownloadOutput(name: "t", segments: [segment(size: .max), segment(size: .max)])
        #expect(output.knownSize == .max)
    }

    @Test func saturatingArithmeticHoldsAtTheBounds() {
        #expect(Int64.max.saturatingAdding(1) == .max)
        #expect(Int64.min.saturatingAdding(-1) == .min)
        #expect(Int64(2).saturatingAdding(3) == 5)
        #expect(Int64.max.saturatingMultiplying(2) == .max)
        #expect(Int64.max.saturatingMultiplying(-2) == .min)
        #expect([Int64.max, 1, 1].saturatingSum() == .max)
        #expect(ByteRange(offset: .max - 1, length: 10).last == .max)
    }

    @Test func anETAFromHugeSizesOrCrawlingSpeedsNeitherTrapsNorLies() {
        #expect(Duration.estimate(remaining: 1000, bytesPerSecond: 100) == .seconds(10))
        #expect(Duration.estimate(remaining: .max, bytesPerSecond: 1.5) == .seconds(100 * 365 * 86_400))
        #expect(Duration.estimate(remaining: .max, bytesPerSecond: 0.001) == nil)
        #expect(Duration.estimate(remaining: 10, bytesPerSecond: .infinity) == nil)
        #expect(Duration.estimate(remaining: -5, bytesPerSecond: 100) == .zero)
        // A group of two children of 2^62 bytes each, crawling: a roll-up, not a trap.
        let huge: Int64 = 1 << 62
        let children = (0..<2).map { index in
            DownloadTaskInfo(
                id: DownloadTaskID(entityType: "t", entityKey: "\(index)"), title: "t", groupKey: "g", state: .downloading,
                mode: .download, bytesDone: 0, bytesTotal: huge, segmentsDone: 0, segmentsTotal: 1, bytesPerSecond: 0.5,
                eta: nil, outputs: [], error: nil, resolveCount: 1, weight: 0)
        }
        let rollUp = DownloadTaskGroup(key: "g").rollUp(children: children)
        #expect(rollUp.bytesTotal == .max)
        #expect(rollUp.eta == nil)
    }

    @Test func refusesAManifestWithoutOutputs() {
        refusal(DownloadManifest(outputs: []), .manifestInvalid, mentioning: "no output")
    }

    @Test func refusesAManifestWithoutSelectedOutputs() {
        let output = DownloadOutput(name: "a.bin", segments: [segment()], isSelected: false)
        refusal(manifest(output), .manifestInvalid, mentioning: "no output")
    }

    @Test func refusesMoreSegmentsThanTheLimit() {
        let output = DownloadOutput(name: "a.bin", segments: (0..<3).map { _ in segment() })
        refusal(manifest(output), maxSegments: 2, .manifestTooLarge, mentioning: "3 segments")
    }

    @Test func exactlyTheSegmentLimitIsAccepted() throws {
        let output = DownloadOutput(name: "a.bin", segments: (0..<3).map { _ in segment() })
        try manifest(output).validate(maxSegments: 3)
    }

    @Test func unselectedOutputsCountTowardTheSegmentLimit() {
        let selected = DownloadOutput(name: "a.bin", segments: [segment()])
        let alternative = DownloadOutput(name: "b.bin", segments: [segment(), segment()], isSelected: false)
        refusal(manifest(selected, alternative), maxSegments: 2, .manifestTooLarge)
    }

    @Test(arguments: ["", "/etc/passwd", "../x", "a/../../x", "~/x", "a\\b", "a\u{0}b", "a\nb"])
    func refusesUnsafeOutputNames(_ name: String) {
        let output = DownloadOutput(name: name, segments: [segment()])
        refusal(manifest(output), .unsafePath)
    }

    @Test func refusesDuplicateOutputNames() {
        let a = DownloadOutput(name: "video.mp4", segments: [segment()])
        let b = DownloadOutput(name: "video.mp4", segments: [segment()])
        refusal(manifest(a, b), .manifestInvalid, mentioning: "video.mp4")
    }

    @Test func refusesOutputNamesThatAreTheSameAfterNormalising() {
        let a = DownloadOutput(name: "dir/a.bin", segments: [segment()])
        let b = DownloadOutput(name: "./dir//a.bin", segments: [segment()])
        refusal(manifest(a, b), .manifestInvalid, mentioning: "two outputs")
    }

    // MARK: Output

    @Test func refusesAnOutputWithoutSegments() {
        refusal(manifest(DownloadOutput(name: "a.bin", segments: [])), .manifestInvalid, mentioning: "no segments")
    }

    @Test func refusesANegativeOutputSize() {
        refusal(manifest(DownloadOutput(name: "a.bin", segments: [segment()], expectedSize: -1)), .manifestInvalid, mentioning: "negative")
    }

    // MARK: Segments

    @Test func refusesASegmentWithoutURLs() {
        let output = DownloadOutput(name: "a.bin", segments: [DownloadSegment(urls: [])])
        refusal(manifest(output), .manifestInvalid, mentioning: "no URL")
    }

    @Test(arguments: [
        "ftp://cdn.example.com/a.bin",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "data:application/octet-stream,AAAA",
        "http:///nohost",
    ])
    func refusesNonHTTPURLs(_ text: String) throws {
        let bad = try #require(URL(string: text))
        let output = DownloadOutput(name: "a.bin", segments: [DownloadSegment(urls: [Self.url, bad])])
        refusal(manifest(output), .unsafeInput, mentioning: "segment 1 of \"a.bin\"")
    }

    @Test func refusesANegativeSegmentSize() {
        refusal(manifest(DownloadOutput(name: "a.bin", segments: [segment(size: -5)])), .manifestInvalid, mentioning: "negative")
    }

    @Test func refusesARangeWhoseLengthIsNotTheSize() {
        let output = DownloadOutput(name: "a.bin", segments: [segment(), segment(range: ByteRange(offset: 0, length: 100), size: 99)])
        refusal(manifest(output), .manifestInvalid, mentioning: "segment 2")
    }

    @Test func anEncryptedSegmentMayBeSmallerThanItsRange() throws {
        // Decryption removes the padding, so the size after it is not the range's length.
        var encrypted = segment(range: ByteRange(offset: 0, length: 112), size: 100)
        encrypted.encryption = SegmentEncryption(method: .aes128, keyURL: URL(string: "https://h/key")!, iv: Array(repeating: 0, count: 16))
        try manifest(DownloadOutput(name: "a.ts", segments: [encrypted])).validate()
    }

    @Test(arguments: [
        ("X-Token", "abc\r\nX-Injected: 1"),
        ("X-Token", "abc\nmore"),
        ("X-Token", "a\u{0}b"),
        ("X Token", "abc"),
        ("X-Token:", "abc"),
        ("", "abc"),
    ])
    func refusesHeaderFieldsThatCannotBeSent(_ name: String, _ value: String) {
        var headers = HTTPHeaders()
        headers.add(name: name, value: value)
        refusal(manifest(DownloadOutput(name: "a.bin", segments: [segment(headers: headers)])), .unsafeInput, mentioning: "header")
    }

    @Test func acceptsATabInAHeaderValue() throws {
        try manifest(DownloadOutput(name: "a.bin", segments: [segment(headers: ["X-Token": "a\tb"])])).validate()
    }

    // MARK: Pieces

    @Test func refusesAPieceWithoutOffset() {
        let output = DownloadOutput(name: "a.bin", assembly: .pieces, segments: [segment(size: 10)])
        refusal(manifest(output), .manifestInvalid, mentioning: "without an offset")
    }

    @Test func refusesAPieceWithoutSize() {
        let output = DownloadOutput(name: "a.bin", assembly: .pieces, segments: [segment(offset: 0)])
        refusal(manifest(output), .manifestInvalid, mentioning: "without a size")
        // An open-ended range has no size either.
        let open = DownloadOutput(name: "a.bin", assembly: .pieces, segments: [segment(range: ByteRange(offset: 10))])
        refusal(manifest(open), .manifestInvalid, mentioning: "without a size")
    }

    @Test func refusesOverlappingPieces() {
        let output = DownloadOutput(name: "a.bin", assembly: .pieces, segments: [
            segment(range: ByteRange(offset: 0, length: 100), size: 100),
            segment(range: ByteRange(offset: 99, length: 100), size: 100),
        ], expectedSize: 199)
        refusal(manifest(output), .manifestInvalid, mentioning: "overlap at byte 99")
    }

    @Test func refusesOverlappingPiecesListedOutOfOrder() {
        let output = DownloadOutput(name: "a.bin", assembly: .pieces, segments: [
            segment(size: 50, offset: 200),
            segment(size: 100, offset: 0),
            segment(size: 120, offset: 90),
        ])
        refusal(manifest(output), .manifestInvalid, mentioning: "overlap")
    }

    @Test func refusesTheSamePieceTwice() {
        let piece = segment(range: ByteRange(offset: 0, length: 10), size: 10)
        refusal(manifest(DownloadOutput(name: "a.bin", assembly: .pieces, segments: [piece, piece])), .manifestInvalid, mentioning: "overlap")
    }

    @Test func refusesAPiecePastTheExpectedSize() {
        let output = DownloadOutput(name: "a.bin", assembly: .pieces, segments: [
            segment(range: ByteRange(offset: 0, length: 100), size: 100),
            segment(range: ByteRange(offset: 100, length: 100), size: 100),
        ], expectedSize: 150)
        refusal(manifest(output), .manifestInvalid, mentioning: "150")
    }

    @Test func theOffsetOverridesTheRangeOffsetForPlacement() throws {
        // Bytes 1000-1099 of the resource written at 0 and bytes 0-99 at 100: no overlap.
        let output = DownloadOutput(name: "a.bin", assembly: .pieces, segments: [
            segment(range: ByteRange(offset: 1000, length: 100), size: 100, offset: 0),
            segment(range: ByteRange(offset: 0, length: 100), size: 100, offset: 100),
        ], expectedSize: 200)
        try manifest(output).validate()
    }

    // MARK: Separate files

    @Test func refusesSeparateFilesWithoutNames() {
        let output = DownloadOutput(name: "dir", assembly: .separateFiles, segments: [segment(name: "a"), segment()])
        refusal(manifest(output), .unsafePath)
    }

    @Test(arguments: ["../escape", "/abs", "a\\b", ".", "x/../../y"])
    func refusesSeparateFilesWithUnsafeNames(_ name: String) {
        let output = DownloadOutput(name: "dir", assembly: .separateFiles, segments: [segment(name: "ok"), segment(name: name)])
        refusal(manifest(output), .unsafePath)
    }

    @Test func refusesSeparateFilesWithDuplicateNames() {
        let output = DownloadOutput(name: "dir", assembly: .separateFiles, segments: [segment(name: "sub/a.vtt"), segment(name: "sub//./a.vtt")])
        refusal(manifest(output), .manifestInvalid, mentioning: "sub/a.vtt")
    }

    @Test func segmentNamesAreIgnoredOutsideSeparateFiles() throws {
        let output = DownloadOutput(name: "a.bin", segments: [segment(name: "../x"), segment(name: "../x")])
        try manifest(output).validate()
    }

    // MARK: Valid manifests

    @Test func acceptsAConcatenatedManifest() throws {
        let output = DownloadOutput(name: "video/720p.mp4", segments: [
            DownloadSegment(urls: [Self.url, Self.mirror], expectedSize: 1000,
                            checksum: Checksum(.sha256, digest: Array(repeating: 0, count: 32))),
            segment(range: ByteRange(offset: 0, length: 500), size: 500),
            segment(range: ByteRange(offset: 500)),
            segment(headers: ["Referer": "https://example.com/"]),
        ], expectedSize: nil)
        let audio = DownloadOutput(name: "video/audio.m4a", segments: [segment()], isSelected: true)
        let alternative = DownloadOutput(name: "video/1080p.mp4", segments: [segment()], isSelected: false)
        try manifest(output, audio, alternative).validate()
    }

    @Test func acceptsSeparateFiles() throws {
        let output = DownloadOutput(name: "subtitles", assembly: .separateFiles, segments: [
            segment(name: "en.vtt"), segment(name: "fr/fr.vtt"), segment(name: "./de.vtt"),
        ])
        try manifest(output).validate()
    }

    @Test func acceptsPiecesThatTileTheFile() throws {
        let size: Int64 = 2_500
        let pieces = stride(from: Int64(0), to: size, by: 1_000).map { offset in
            let length = min(1_000, size - offset)
            return segment(range: ByteRange(offset: offset, length: length), size: length, headers: ["If-Match": "\"v1\""], offset: offset)
        }
        try manifest(DownloadOutput(name: "big.iso", assembly: .pieces, segments: pieces, expectedSize: size)).validate()
    }

    @Test func acceptsPiecesWithGapsAndNoDeclaredSize() throws {
        // Validation requires pieces not to overlap and to fit the declared size; it does not
        // require them to cover the file (assembly checks the final size).
        let output = DownloadOutput(name: "a.bin", assembly: .pieces, segments: [
            segment(size: 10, offset: 0), segment(size: 10, offset: 20),
        ])
        try manifest(output).validate()
    }
}
