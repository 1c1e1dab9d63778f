import Foundation
import HLSEntity
import Tessera
import Testing
import TesseraTestSupport

@Suite struct HLSMediaPlaylistTests {
    // MARK: Basics

    @Test func theRFCSimpleMediaPlaylist() throws {
        // RFC 8216 §8.1.
        let playlist = try media("""
            #EXTM3U
            #EXT-X-TARGETDURATION:10
            #EXT-X-VERSION:3
            #EXTINF:9.009,
            http://media.example.com/first.ts
            #EXTINF:9.009,
            http://media.example.com/second.ts
            #EXTINF:3.003,
            http://media.example.com/third.ts
            #EXT-X-ENDLIST
            """)
        #expect(playlist.segments.map(\.url.absoluteString) == [
            "http://media.example.com/first.ts", "http://media.example.com/second.ts", "http://media.example.com/third.ts",
        ])
        #expect(playlist.segments.map(\.mediaSequence) == [0, 1, 2])
        #expect(playlist.segments.map(\.duration) == [9.009, 9.009, 3.003])
        #expect(playlist.targetDuration == 10)
        #expect(playlist.hasEndList)
        #expect(abs(playlist.duration - 21.021) < 0.0001)
        #expect(!playlist.hasInitSection)
        let segments = try playlist.downloadSegments()
        #expect(segments.count == 3)
        #expect(segments.allSatisfy { $0.range == nil && $0.encryption == nil && $0.expectedSize == nil })
    }

    @Test func relativeURIsResolveAgainstThePlaylistURL() throws {
        let playlist = try media("""
            #EXTM3U
            #EXTINF:4,
            seg-1.ts
            #EXTINF:4,
            ../shared/seg-2.ts?token=abc
            #EXTINF:4,
            /root/seg-3.ts
            #EXTINF:4,
            //other.example.net/seg-4.ts
            #EXT-X-ENDLIST
            """)
        #expect(playlist.segments.map(\.url.absoluteString) == [
            "https://cdn.example.com/show/720p/seg-1.ts",
            "https://cdn.example.com/show/shared/seg-2.ts?token=abc",
            "https://cdn.example.com/root/seg-3.ts",
            "https://other.example.net/seg-4.ts",
        ])
    }

    @Test func crlfBlankLinesCommentsUnknownTagsAndABOM() throws {
        let text = "\u{FEFF}#EXTM3U\r\n\r\n# a comment\r\n#EXT-X-FUTURE-TAG:X=1\r\n#EXT-X-PROGRAM-DATE-TIME:2024-01-01T00:00:00Z\r\n"
            + "#EXTINF:5.5,The title, with a comma\r\n  a.ts  \r\n\r\n#EXT-X-DATERANGE:ID=\"x\",START-DATE=\"2024-01-01T00:00:00Z\"\r\n"
            + "#EXTINF:4\r\nb.ts\r\n#EXT-X-ENDLIST\r\n"
        let playlist = try media(text)
        #expect(playlist.segments.map(\.url.lastPathComponent) == ["a.ts", "b.ts"])
        #expect(playlist.segments[0].title == "The title, with a comma")
        #expect(playlist.segments[0].duration == 5.5)
        #expect(playlist.segments[1].title == nil)
        #expect(playlist.segments.map(\.line) == [7, 11])
    }

    @Test func mediaSequenceNumbersTheSegments() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-MEDIA-SEQUENCE:7794
            #EXTINF:2,
            a.ts
            #EXTINF:2,
            b.ts
            #EXT-X-ENDLIST
            """)
        #expect(playlist.mediaSequence == 7794)
        #expect(playlist.segments.map(\.mediaSequence) == [7794, 7795])
    }

    @Test func discontinuitiesJustContinueTheConcatenation() throws {
        let playlist = try media("""
            #EXTM3U
            #EXTINF:4,
            a.ts
            #EXT-X-DISCONTINUITY
            #EXTINF:4,
            ad.ts
            #EXT-X-DISCONTINUITY
            #EXTINF:4,
            b.ts
            #EXT-X-ENDLIST
            """)
        #expect(playlist.segments.map(\.isDiscontinuity) == [false, true, true])
        #expect(try playlist.downloadSegments().map { $0.urls[0].lastPathComponent } == ["a.ts", "ad.ts", "b.ts"])
    }

    @Test func gapSegmentsAreLeftOutButCountInTheSequence() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-MEDIA-SEQUENCE:10
            #EXTINF:4,
            a.ts
            #EXT-X-GAP
            #EXTINF:4,
            missing.ts
            #EXTINF:4,
            b.ts
            #EXT-X-ENDLIST
            """)
        #expect(playlist.segments.map(\.url.lastPathComponent) == ["a.ts", "b.ts"])
        #expect(playlist.segments.map(\.mediaSequence) == [10, 12])
    }

    @Test func aVODPlaylistWithoutEndListIsComplete() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-PLAYLIST-TYPE:VOD
            #EXTINF:4,
            a.ts
            """)
        #expect(playlist.playlistType == "VOD")
        #expect(!playlist.hasEndList)
        #expect(playlist.segments.count == 1)
    }

    // MARK: Byte ranges

    @Test func byteRangesWithAndWithoutOffsets() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-VERSION:4
            #EXTINF:4,
            #EXT-X-BYTERANGE:1000@0
            all.ts
            #EXT-X-BYTERANGE:2000
            #EXTINF:4,
            all.ts
            #EXTINF:4,
            #EXT-X-BYTERANGE:500
            all.ts
            #EXTINF:4,
            #EXT-X-BYTERANGE:700@10000
            all.ts
            #EXTINF:4,
            #EXT-X-BYTERANGE:300
            all.ts
            #EXTINF:4,
            #EXT-X-BYTERANGE:64@0
            other.ts
            #EXT-X-ENDLIST
            """)
        #expect(playlist.segments.map(\.range) == [
            ByteRange(offset: 0, length: 1000), ByteRange(offset: 1000, length: 2000), ByteRange(offset: 3000, length: 500),
            ByteRange(offset: 10000, length: 700), ByteRange(offset: 10700, length: 300), ByteRange(offset: 0, length: 64),
        ])
        let segments = try playlist.downloadSegments()
        #expect(segments.map(\.expectedSize) == [1000, 2000, 500, 700, 300, 64])
        #expect(segments.map(\.urls) == Array(repeating: [URL(string: "https://cdn.example.com/show/720p/all.ts")!], count: 5)
            + [[URL(string: "https://cdn.example.com/show/720p/other.ts")!]])
    }

    @Test func appleSingleFileFragmentedMP4WithAByteRangeMap() throws {
        // The shape of Apple's fMP4 examples: one main.mp4, the init section and every fragment byte ranges of it.
        let playlist = try media("""
            #EXTM3U
            #EXT-X-TARGETDURATION:6
            #EXT-X-VERSION:7
            #EXT-X-MEDIA-SEQUENCE:1
            #EXT-X-PLAYLIST-TYPE:VOD
            #EXT-X-INDEPENDENT-SEGMENTS
            #EXT-X-MAP:URI="main.mp4",BYTERANGE="1118@0"
            #EXTINF:6.00000,
            #EXT-X-BYTERANGE:1739761@1118
            main.mp4
            #EXTINF:6.00000,
            #EXT-X-BYTERANGE:1755874@1740879
            main.mp4
            #EXTINF:2.50000,
            #EXT-X-BYTERANGE:512345
            main.mp4
            #EXT-X-ENDLIST
            """)
        #expect(playlist.hasInitSection)
        #expect(playlist.downloadSegmentCount == 4)
        let segments = try playlist.downloadSegments()
        let main = URL(string: "https://cdn.example.com/show/720p/main.mp4")!
        #expect(segments.map(\.urls) == Array(repeating: [main], count: 4))
        #expect(segments.map(\.range) == [
            ByteRange(offset: 0, length: 1118), ByteRange(offset: 1118, length: 1_739_761),
            ByteRange(offset: 1_740_879, length: 1_755_874), ByteRange(offset: 3_496_753, length: 512_345),
        ])
        #expect(HLSEntity.fileExtension(for: playlist, kind: .video) == "mp4")
        #expect(HLSEntity.fileExtension(for: playlist, kind: .audio) == "m4a")
    }

    // MARK: Initialisation sections

    @Test func theMapComesFirstAndANewMapBeforeTheSegmentsItAppliesTo() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-VERSION:6
            #EXT-X-MAP:URI="init-a.mp4"
            #EXTINF:4,
            a1.m4s
            #EXT-X-MAP:URI="init-a.mp4"
            #EXTINF:4,
            a2.m4s
            #EXT-X-DISCONTINUITY
            #EXT-X-MAP:URI="init-b.mp4",BYTERANGE="800@200"
            #EXTINF:4,
            b1.m4s
            #EXTINF:4,
            b2.m4s
            #EXT-X-MAP:URI="init-c.mp4",BYTERANGE="600"
            #EXT-X-ENDLIST
            """)
        let segments = try playlist.downloadSegments()
        // A repeated identical map is not repeated; a map after the last segment applies to nothing.
        #expect(segments.map { $0.urls[0].lastPathComponent } == ["init-a.mp4", "a1.m4s", "a2.m4s", "init-b.mp4", "b1.m4s", "b2.m4s"])
        #expect(segments[3].range == ByteRange(offset: 200, length: 800))
        #expect(segments[3].expectedSize == 800)
        #expect(playlist.downloadSegmentCount == 6)
        #expect(playlist.segments[0].initSection?.url.lastPathComponent == "init-a.mp4")
        #expect(playlist.segments[2].initSection?.line == 10)
    }

    // MARK: Encryption

    @Test func theRFCEncryptedPlaylistUsesSequenceNumberIVsAndRotatesKeys() throws {
        // RFC 8216 §8.3, completed with #EXT-X-ENDLIST.
        let playlist = try media("""
            #EXTM3U
            #EXT-X-VERSION:3
            #EXT-X-MEDIA-SEQUENCE:7794
            #EXT-X-TARGETDURATION:15

            #EXT-X-KEY:METHOD=AES-128,URI="https://priv.example.com/key.php?r=52"

            #EXTINF:2.833,
            http://media.example.com/fileSequence52-A.ts
            #EXTINF:15.0,
            http://media.example.com/fileSequence52-B.ts
            #EXTINF:13.333,
            http://media.example.com/fileSequence52-C.ts

            #EXT-X-KEY:METHOD=AES-128,URI="https://priv.example.com/key.php?r=53"

            #EXTINF:15.0,
            http://media.example.com/fileSequence53-A.ts
            #EXT-X-ENDLIST
            """)
        let key52 = URL(string: "https://priv.example.com/key.php?r=52")!
        let key53 = URL(string: "https://priv.example.com/key.php?r=53")!
        #expect(playlist.segments.map(\.encryption) == [
            SegmentEncryption(method: .aes128, keyURL: key52, iv: AES128CBC.sequenceIV(7794)),
            SegmentEncryption(method: .aes128, keyURL: key52, iv: AES128CBC.sequenceIV(7795)),
            SegmentEncryption(method: .aes128, keyURL: key52, iv: AES128CBC.sequenceIV(7796)),
            SegmentEncryption(method: .aes128, keyURL: key53, iv: AES128CBC.sequenceIV(7797)),
        ])
        #expect(AES128CBC.sequenceIV(7794) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1E, 0x72])
        // Encrypted segments have no expected size: it is the decrypted size that lands on disk.
        #expect(try playlist.downloadSegments().allSatisfy { $0.expectedSize == nil && $0.encryption != nil })
    }

    @Test func anExplicitIVAndMethodNoneAndAnEncryptedMap() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-MEDIA-SEQUENCE:5
            #EXT-X-KEY:METHOD=AES-128,URI="keys/1.key",IV=0x00112233445566778899AABBCCDDEEFF,KEYFORMAT="identity",KEYFORMATVERSIONS="1"
            #EXT-X-MAP:URI="init.mp4"
            #EXTINF:4,
            a.m4s
            #EXT-X-BYTERANGE:4000@0
            #EXTINF:4,
            packed.m4s
            #EXT-X-KEY:METHOD=NONE
            #EXTINF:4,
            clear.m4s
            #EXT-X-KEY:METHOD=AES-128,URI="keys/2.key",IV=0x1
            #EXTINF:4,
            b.m4s
            #EXT-X-ENDLIST
            """)
        let key1 = URL(string: "https://cdn.example.com/show/720p/keys/1.key")!
        let key2 = URL(string: "https://cdn.example.com/show/720p/keys/2.key")!
        let iv: [UInt8] = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF]
        let segments = try playlist.downloadSegments()
        #expect(segments.map { $0.urls[0].lastPathComponent } == ["init.mp4", "a.m4s", "packed.m4s", "clear.m4s", "b.m4s"])
        #expect(segments.map(\.encryption) == [
            SegmentEncryption(method: .aes128, keyURL: key1, iv: iv),
            SegmentEncryption(method: .aes128, keyURL: key1, iv: iv),
            SegmentEncryption(method: .aes128, keyURL: key1, iv: iv),
            nil,
            SegmentEncryption(method: .aes128, keyURL: key2, iv: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
        ])
        // An encrypted byte range keeps its range, without an expected (decrypted) size.
        #expect(segments[2].range == ByteRange(offset: 0, length: 4000))
        #expect(segments[2].expectedSize == nil)
    }

    @Test func anIdentityKeyIsUsedWhenADRMKeyFormatIsOffered() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-KEY:METHOD=AES-128,URI="skd://not-for-us",KEYFORMAT="com.example.drm"
            #EXT-X-KEY:METHOD=AES-128,URI="k.key"
            #EXTINF:4,
            a.ts
            #EXT-X-ENDLIST
            """)
        #expect(playlist.segments[0].encryption?.keyURL == URL(string: "https://cdn.example.com/show/720p/k.key"))
    }

    @Test func aMapUnderAES128NeedsAnExplicitIV() {
        expectDownloadError(.manifestInvalid, "line 4", "#EXT-X-MAP", "IV", "line 3") {
            _ = try media("""
                #EXTM3U
                #EXT-X-MEDIA-SEQUENCE:1
                #EXT-X-KEY:METHOD=AES-128,URI="k.key"
                #EXT-X-MAP:URI="init.mp4"
                #EXTINF:4,
                a.m4s
                #EXT-X-ENDLIST
                """)
        }
    }

    @Test(arguments: ["SAMPLE-AES", "SAMPLE-AES-CTR"])
    func sampleEncryptionIsRefused(method: String) {
        expectDownloadError(.unsupportedContent, "METHOD=\(method)", "line 2") {
            _ = try media("""
                #EXTM3U
                #EXT-X-KEY:METHOD=\(method),URI="skd://key",KEYFORMAT="identity"
                #EXTINF:4,
                a.ts
                #EXT-X-ENDLIST
                """)
        }
    }

    @Test func aDRMKeyFormatAloneIsRefusedByName() {
        expectDownloadError(.unsupportedContent, "com.apple.streamingkeydelivery", "SAMPLE-AES", "identity") {
            _ = try media("""
                #EXTM3U
                #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://key",KEYFORMAT="com.apple.streamingkeydelivery",KEYFORMATVERSIONS="1"
                #EXTINF:4,
                a.ts
                #EXT-X-ENDLIST
                """)
        }
    }

    @Test func anUnknownMethodIsRefusedByName() {
        expectDownloadError(.unsupportedContent, "METHOD=AES-256") {
            _ = try media("""
                #EXTM3U
                #EXT-X-KEY:METHOD=AES-256,URI="k.key"
                #EXTINF:4,
                a.ts
                #EXT-X-ENDLIST
                """)
        }
    }

    // MARK: Live (see HLSLivePlaylistTests)

    @Test func liveAndEventPlaylistsAreReadAsTheyAreNow() throws {
        // RFC 8216 §8.2 (live, sliding window): no longer refused, read as a live window.
        let live = try media("#EXTM3U\n#EXT-X-TARGETDURATION:8\n#EXT-X-MEDIA-SEQUENCE:2680\n#EXTINF:7.975,\na.ts\n")
        #expect(live.isLive && !live.hasEndList)
        let event = try media("#EXTM3U\n#EXT-X-PLAYLIST-TYPE:EVENT\n#EXTINF:4,\na.ts\n")
        #expect(event.isLive)
        let vod = try media("#EXTM3U\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXTINF:4,\na.ts\n")
        #expect(!vod.isLive)
    }

    // MARK: Limits

    @Test func theSegmentLimitIsCheckedBeforeParsing() {
        let text = "#EXTM3U\n" + String(repeating: "#EXTINF:1,\ns.ts\n", count: 101) + "#EXT-X-ENDLIST\n"
        expectDownloadError(.manifestTooLarge, "101 segments", "limit of 100") {
            _ = try media(text, maxSegments: 100)
        }
        #expect((try? media(text, maxSegments: 101))?.segments.count == 101)
    }
}
