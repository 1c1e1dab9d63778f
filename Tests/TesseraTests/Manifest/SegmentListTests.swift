import Foundation
import Testing

@testable import Tessera

/// `SegmentList`: the compact forms read exactly as the explicit segments they stand for,
/// survive coding, and cost bytes, not objects.
@Suite struct SegmentListTests {
    let base = URL(string: "http://cdn.example/path/show.mpd?token=1")!
    let mirror = URL(string: "http://mirror.example/other/")!

    /// What the explicit form would hold: each reference resolved as URLSafety resolves it.
    func explicit(_ references: [String], against bases: [URL]) throws -> [URL] {
        try references.map { try URLSafety.resolve($0, against: bases[0]) }
    }

    @Test func aNumberedListExpandsEachSegmentAsTheExplicitOneWould() throws {
        let pattern = SegmentURLPattern([.text("v/seg-"), .number(.init(width: 5)), .text("-"), .time(.init()), .text(".m4s")])
        let numbering = try SegmentNumbering(firstNumber: 7, count: 1000, duration: 90)
        let list = try SegmentList.numbered(pattern, against: [base], numbering: numbering, context: "a segment URL")
        #expect(list.count == 1000)
        for index in [0, 1, 500, 999] {
            let reference = "v/seg-\(String(format: "%05d", 7 + index))-\(index * 90).m4s"
            #expect(list[index].urls == [try URLSafety.resolve(reference, against: base)])
            #expect(list[index].range == nil && list[index].knownSize == nil)
        }
        #expect(list[999].urls[0].absoluteString == "http://cdn.example/path/v/seg-01006-89910.m4s")
    }

    @Test func aTimelineNumbersAcrossItsRuns() throws {
        let numbering = try SegmentNumbering(firstNumber: 1, runs: [
            .init(start: 0, duration: 10, count: 3), .init(start: 100, duration: 5, count: 2), .init(start: 200, duration: 1, count: 1),
        ])
        #expect(numbering.count == 6)
        #expect((0..<6).map(numbering.time(at:)) == [0, 10, 20, 100, 105, 200])
        #expect((0..<6).map(numbering.number(at:)) == [1, 2, 3, 4, 5, 6])
    }

    @Test func numbersAndTimesPast2To63AreRefused() {
        #expect(throws: DownloadError.self) { try SegmentNumbering(firstNumber: .max, count: 2, duration: 1) }
        #expect(throws: DownloadError.self) { try SegmentNumbering(firstNumber: 0, count: 3, duration: .max / 2 + 1) }
        #expect(throws: DownloadError.self) {
            try SegmentNumbering(firstNumber: 0, runs: [.init(start: .max, duration: 1, count: 2)])
        }
    }

    @Test func relativePatternsGiveAURLPerBaseAndAbsoluteOnesOne() throws {
        let numbering = try SegmentNumbering(firstNumber: 1, count: 3, duration: 1)
        let relative = try SegmentList.numbered(
            SegmentURLPattern([.text("a/"), .number(.init())]), against: [base, mirror], numbering: numbering, context: "x")
        #expect(relative[2].urls.map(\.absoluteString) == ["http://cdn.example/path/a/3", "http://mirror.example/other/a/3"])
        let absolute = try SegmentList.numbered(
            SegmentURLPattern([.text("https://other.example/"), .number(.init())]), against: [base, mirror], numbering: numbering,
            context: "x")
        #expect(absolute[0].urls.map(\.absoluteString) == ["https://other.example/1"])
    }

    @Test func aPatternThatIsNotASafeURLIsRefusedWhenTheListIsMade() throws {
        let numbering = try SegmentNumbering(firstNumber: 1, count: 3, duration: 1)
        #expect(throws: DownloadError.self) {
            try SegmentList.numbered(SegmentURLPattern([.text("javascript:x"), .number(.init())]), against: [base], numbering: numbering, context: "x")
        }
        #expect(throws: DownloadError.self) {
            try SegmentList.numbered(SegmentURLPattern([.text("a\u{1}b/"), .number(.init())]), against: [base], numbering: numbering, context: "x")
        }
    }

    @Test func aHoleInTheHostMakesTheHostsVary() throws {
        let numbering = try SegmentNumbering(firstNumber: 1, count: 4, duration: 1)
        let list = try SegmentList.numbered(
            SegmentURLPattern([.text("http://cdn"), .number(.init()), .text(".example/x")]), against: [base], numbering: numbering,
            context: "x")
        #expect(list.countByHost { $0.urls[0].host ?? "" } == ["cdn1.example": 1, "cdn2.example": 1, "cdn3.example": 1, "cdn4.example": 1])
        let uniform = try SegmentList.numbered(
            SegmentURLPattern([.text("v/"), .number(.init())]), against: [base], numbering: numbering, context: "x")
        #expect(uniform.countByHost { $0.urls[0].host ?? "" } == ["cdn.example": 4])
    }

    @Test func aListedRunResolvesLikeURLSafetyDoes() throws {
        let references = ["seg1.ts", "sub/seg2.ts", "../up/seg3.ts", "/root/seg4.ts", "seg%205.ts", "http://else.example/6.ts", "?q=7", "./8.ts"]
        var builder = try SegmentList.Builder(bases: [base], context: "a segment URL")
        for (index, reference) in references.enumerated() {
            try builder.append(reference: reference, range: index == 2 ? ByteRange(offset: 10, length: 20) : nil)
        }
        let list = builder.list()
        #expect(list.map { $0.urls[0] } == (try explicit(references, against: [base])))
        #expect(list[2].range == ByteRange(offset: 10, length: 20) && list[2].expectedSize == 20)
        #expect(list[0].range == nil && list.knownSize(at: 2) == 20 && list.knownSize(at: 0) == nil)
        #expect(list.countByHost { $0.urls[0].host ?? "" } == ["cdn.example": 7, "else.example": 1])
    }

    @Test func aListedReferenceThatIsNotSafeIsRefusedWhenAppended() throws {
        var builder = try SegmentList.Builder(bases: [base], context: "a segment URL")
        #expect(throws: DownloadError.self) { try builder.append(reference: "ftp://x.example/a") }
        #expect(throws: DownloadError.self) { try builder.append(reference: "a\u{1}b") }
        #expect(builder.count == 0)
    }

    @Test func encryptedSegmentsKeepTheirRangeButNoExpectedSize() throws {
        let key = SegmentEncryption(method: .aes128, keyURL: URL(string: "http://k.example/key")!, iv: Array(repeating: 1, count: 16))
        var builder = try SegmentList.Builder(bases: [base], context: "a segment URL")
        try builder.append(reference: "a.ts", range: ByteRange(offset: 0, length: 32), encryption: key)
        try builder.append(reference: "b.ts")
        let list = builder.list()
        #expect(list[0].encryption == key && list[0].expectedSize == nil && list[0].range?.length == 32)
        #expect(list.isEncrypted(at: 0) && !list.isEncrypted(at: 1) && list[1].encryption == nil)
        #expect(list.sizeSummary.knownBytes == 0 && list.sizeSummary.unknownCount == 2)
    }

    @Test func compactListsSurviveCodingAndOldArraysStillDecode() throws {
        let numbering = try SegmentNumbering(firstNumber: 1, runs: [.init(start: 0, duration: 2, count: 5), .init(start: 50, duration: 3, count: 5)])
        var list: SegmentList = [DownloadSegment(url: URL(string: "http://cdn.example/init.mp4")!)]
        list.append(contentsOf: try .numbered(SegmentURLPattern([.text("t/"), .time(.init())]), against: [base], numbering: numbering, context: "x"))
        var builder = try SegmentList.Builder(bases: [base, mirror], headers: ["X-A": "1"], context: "x")
        try builder.append(reference: "a.ts", range: ByteRange(offset: 5, length: 5))
        try builder.append(reference: nil)
        list.append(contentsOf: builder.list())
        let data = try JSONEncoder().encode(list)
        let decoded = try JSONDecoder().decode(SegmentList.self, from: data)
        #expect(decoded == list && Array(decoded) == Array(list))
        #expect(decoded.count == 13 && decoded[12].urls == [base, mirror] && decoded[11].headers == ["X-A": "1"])
        // Compact: the ten numbered segments cost no more than one.
        #expect(data.count < 1500)
        let old = try JSONEncoder().encode(Array(list))
        #expect(try JSONDecoder().decode(SegmentList.self, from: old) == list)
    }

    @Test func settingASegmentTurnsItsRunExplicitAndKeepsTheOthers() throws {
        var list = try SegmentList.numbered(
            SegmentURLPattern([.text("v/"), .number(.init())]), against: [base], numbering: SegmentNumbering(firstNumber: 1, count: 4, duration: 1),
            context: "x")
        let before = Array(list)
        list[1].expectedSize = 9
        #expect(list[1].expectedSize == 9 && list[1].urls == before[1].urls)
        #expect(list[0] == before[0] && list[3] == before[3])
        #expect(list != SegmentList(before))
    }

    @Test func sameLayoutIgnoresURLsButNotRanges() throws {
        var a = try SegmentList.Builder(bases: [base], context: "x")
        var b = try SegmentList.Builder(bases: [mirror], context: "x")
        try a.append(reference: "1.ts", range: ByteRange(offset: 0, length: 4))
        try b.append(reference: "2.ts", range: ByteRange(offset: 0, length: 4))
        #expect(a.list().hasSameLayout(as: b.list()))
        try b.append(reference: "3.ts")
        #expect(!a.list().hasSameLayout(as: b.list()))
    }

    @Test func aManifestOfAMillionNumberedSegmentsValidatesWithoutBuildingThem() throws {
        let numbering = try SegmentNumbering(firstNumber: 1, count: 999_999, duration: 1)
        let segments = try SegmentList.numbered(SegmentURLPattern([.text("v/"), .number(.init())]), against: [base], numbering: numbering, context: "x")
        var big = DownloadManifest(outputs: [DownloadOutput(name: "v.mp4", segments: [DownloadSegment(url: base)])])
        big.outputs[0].segments.append(contentsOf: segments)
        let clock = ContinuousClock()
        let elapsed = try clock.measure { try big.validate() }
        #expect(big.outputs[0].segments.count == 1_000_000)
        #expect(elapsed < .seconds(5))
        #expect(throws: DownloadError.self) {
            var over = big
            over.outputs[0].segments.append(DownloadSegment(url: base))
            try over.validate()
        }
    }
}
