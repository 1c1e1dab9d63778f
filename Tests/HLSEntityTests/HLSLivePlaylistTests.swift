import Foundation
import HLSEntity
import Tessera
import TesseraTestSupport
import Testing

/// Live media playlists as a recording reads them (``HLSMediaPlaylist/liveWindow()``): media
/// sequence, discontinuity sequence, program dates, rotating keys, gaps, the end.
@Suite struct HLSLivePlaylistTests {
    @Test func aSlidingWindowIsKeyedByMediaSequence() throws {
        // RFC 8216 §8.2.
        let playlist = try media("""
            #EXTM3U
            #EXT-X-VERSION:3
            #EXT-X-TARGETDURATION:8
            #EXT-X-MEDIA-SEQUENCE:2680

            #EXTINF:7.975,
            https://priv.example.com/fileSequence2680.ts
            #EXTINF:7.941,
            https://priv.example.com/fileSequence2681.ts
            #EXTINF:7.975,
            https://priv.example.com/fileSequence2682.ts
            """)
        #expect(playlist.isLive)
        let window = playlist.liveWindow()
        #expect(window.segments.map(\.key.position) == [2680, 2681, 2682])
        #expect(window.segments.map(\.duration) == [7.975, 7.941, 7.975])
        #expect(window.segments.map { $0.segment.urls[0].lastPathComponent } == ["fileSequence2680.ts", "fileSequence2681.ts", "fileSequence2682.ts"])
        #expect(window.targetDuration == 8)
        #expect(!window.isComplete)
        #expect(window.suggestedReload == nil, "the tracker applies RFC 8216 §6.3.4")
        #expect(window.segments.allSatisfy { $0.start == nil && $0.availableAt == nil })
    }

    @Test func theEndListCompletesTheWindow() throws {
        let ended = try media("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:9\n#EXTINF:2,\na.ts\n#EXT-X-ENDLIST\n")
        #expect(!ended.isLive)
        #expect(ended.liveWindow().isComplete)
        #expect(ended.liveWindow().segments.map(\.key.position) == [9])
    }

    @Test func discontinuitiesAreNumberedFromTheDiscontinuitySequence() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-MEDIA-SEQUENCE:40
            #EXT-X-DISCONTINUITY-SEQUENCE:7
            #EXT-X-DISCONTINUITY
            #EXTINF:2,
            a.ts
            #EXTINF:2,
            b.ts
            #EXT-X-DISCONTINUITY
            #EXTINF:2,
            c.ts
            #EXTINF:2,
            d.ts
            """)
        #expect(playlist.discontinuitySequence == 7)
        let window = playlist.liveWindow()
        // Tags counted from the tag's value, the first segment's own included: once the server
        // removes it, the value is 8 and the next segment keeps its number.
        #expect(window.segments.map(\.discontinuitySequence) == [8, 8, 9, 9])
        #expect(window.segments.map(\.isDiscontinuity) == [true, false, true, false])
        expectDownloadError(.manifestInvalid, "#EXT-X-DISCONTINUITY-SEQUENCE must come before the first segment") {
            _ = try media("#EXTM3U\n#EXTINF:2,\na.ts\n#EXT-X-DISCONTINUITY-SEQUENCE:3\n#EXTINF:2,\nb.ts\n")
        }
        expectDownloadError(.manifestInvalid, "#EXT-X-DISCONTINUITY-SEQUENCE is not a decimal integer") {
            _ = try media("#EXTM3U\n#EXT-X-DISCONTINUITY-SEQUENCE:-1\n#EXTINF:2,\na.ts\n")
        }
    }

    @Test func programDatesAreKeptAndCarriedForward() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXTINF:2,
            early.ts
            #EXT-X-PROGRAM-DATE-TIME:2024-05-01T10:00:00.000Z
            #EXTINF:2,
            a.ts
            #EXTINF:1.5,
            b.ts
            #EXTINF:2,
            c.ts
            #EXT-X-PROGRAM-DATE-TIME:2024-05-01T12:00:00+02:00
            #EXTINF:2,
            d.ts
            #EXT-X-PROGRAM-DATE-TIME:not a date
            #EXTINF:2,
            e.ts
            """)
        let base = ISO8601Time.date(from: "2024-05-01T10:00:00Z")!
        let dates = playlist.liveWindow().segments.map(\.programDateTime)
        #expect(dates == [nil, base, base + 2, base + 3.5, base, base + 2])
        #expect(playlist.segments[1].programDateTime == base)
        #expect(playlist.segments[2].programDateTime == nil, "a segment's own tag only")
    }

    @Test func rotatingKeysGiveEachSegmentItsKeyAndSequenceIV() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-MEDIA-SEQUENCE:10
            #EXT-X-KEY:METHOD=AES-128,URI="key-5.bin"
            #EXTINF:2,
            a.ts
            #EXTINF:2,
            b.ts
            #EXT-X-KEY:METHOD=AES-128,URI="key-6.bin",IV=0x000102030405060708090a0b0c0d0e0f
            #EXTINF:2,
            c.ts
            #EXT-X-KEY:METHOD=NONE
            #EXTINF:2,
            d.ts
            """)
        let segments = playlist.liveWindow().segments
        #expect(segments.map { $0.segment.encryption?.keyURL.lastPathComponent } == ["key-5.bin", "key-5.bin", "key-6.bin", nil])
        #expect(segments[0].segment.encryption?.iv == AES128CBC.sequenceIV(10))
        #expect(segments[1].segment.encryption?.iv == AES128CBC.sequenceIV(11))
        #expect(segments[2].segment.encryption?.iv == Array(0...15))
        #expect(segments[0].segment.expectedSize == nil, "the decrypted size is not known before")
    }

    @Test func gapSegmentsAreLeftOutWithTheirDiscontinuityAndTime() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-MEDIA-SEQUENCE:1
            #EXT-X-PROGRAM-DATE-TIME:2024-05-01T10:00:00Z
            #EXTINF:2,
            a.ts
            #EXT-X-DISCONTINUITY
            #EXT-X-GAP
            #EXTINF:2,
            b.ts
            #EXTINF:2,
            c.ts
            """)
        let segments = playlist.liveWindow().segments
        #expect(segments.map(\.key.position) == [1, 3])
        #expect(segments[1].isDiscontinuity && segments[1].discontinuitySequence == 1 && segments[0].discontinuitySequence == 0)
        #expect(segments[1].programDateTime == ISO8601Time.date(from: "2024-05-01T10:00:04Z"))
        // Only gaps for now: still a live playlist.
        let onlyGaps = try media("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-GAP\n#EXTINF:2,\na.ts\n")
        #expect(onlyGaps.liveWindow().segments.isEmpty)
    }

    @Test func initSectionsComeWithTheirSegments() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-MAP:URI="init-1.mp4"
            #EXTINF:2,
            a.m4s
            #EXT-X-DISCONTINUITY
            #EXT-X-MAP:URI="init-2.mp4",BYTERANGE="100@0"
            #EXTINF:2,
            b.m4s
            """)
        let segments = playlist.liveWindow().segments
        #expect(segments[0].initSection?.urls[0].lastPathComponent == "init-1.mp4")
        #expect(segments[1].initSection?.urls[0].lastPathComponent == "init-2.mp4")
        #expect(segments[1].initSection?.range == ByteRange(offset: 0, length: 100))
    }

    @Test func mediaSequencesPastInt64AreRefused() {
        expectDownloadError(.manifestInvalid, "2^63") {
            _ = try media("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:9223372036854775807\n#EXTINF:2,\na.ts\n#EXTINF:2,\nb.ts\n")
        }
    }
}
