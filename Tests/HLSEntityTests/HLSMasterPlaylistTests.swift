import Foundation
import HLSEntity
import Tessera
import Testing
import TesseraTestSupport

@Suite struct HLSMasterPlaylistTests {
    /// RFC 8216 §8.4 and §8.5: variants without resolution, an audio-only one, I-frame playlists.
    static let rfcMaster = """
        #EXTM3U
        #EXT-X-STREAM-INF:BANDWIDTH=1280000,AVERAGE-BANDWIDTH=1000000
        http://example.com/low.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=2560000,AVERAGE-BANDWIDTH=2000000
        http://example.com/mid.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=7680000,AVERAGE-BANDWIDTH=6000000
        http://example.com/hi.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=65000,CODECS="mp4a.40.5"
        http://example.com/audio-only.m3u8
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=86000,URI="low/iframe.m3u8"
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=150000,URI="mid/iframe.m3u8"
        """

    /// RFC 8216 §8.6: an audio group whose default rendition is in the variants themselves.
    static let rfcAudioGroups = """
        #EXTM3U
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",LANGUAGE="en",NAME="English",AUTOSELECT=YES,DEFAULT=YES
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",LANGUAGE="de",NAME="Deutsch",AUTOSELECT=NO,DEFAULT=NO,URI="main/german-audio.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",LANGUAGE="en",NAME="Commentary",AUTOSELECT=NO,DEFAULT=NO,URI="commentary/audio-only.m3u8"
        #EXT-X-STREAM-INF:BANDWIDTH=1280000,CODECS="avc1.4d401e,mp4a.40.2",AUDIO="aac"
        low/video-only.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=2560000,CODECS="avc1.4d401f,mp4a.40.2",AUDIO="aac"
        mid/video-only.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=7680000,CODECS="avc1.640028,mp4a.40.2",AUDIO="aac"
        hi/video-only.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=65000,CODECS="mp4a.40.5",AUDIO="aac"
        main/english-audio.m3u8
        """

    /// The shape of Apple's "advanced" example stream: the same video playlist under several
    /// audio groups, the same NAME in several groups, captions and subtitles.
    static let appleAdvanced = """
        #EXTM3U
        #EXT-X-VERSION:6
        #EXT-X-INDEPENDENT-SEGMENTS

        #EXT-X-STREAM-INF:AVERAGE-BANDWIDTH=2168183,BANDWIDTH=2177116,CODECS="avc1.640020,mp4a.40.2",RESOLUTION=960x540,FRAME-RATE=60.000,CLOSED-CAPTIONS="cc1",AUDIO="aud1",SUBTITLES="sub1"
        v5/prog_index.m3u8
        #EXT-X-STREAM-INF:AVERAGE-BANDWIDTH=7968416,BANDWIDTH=8001098,CODECS="avc1.64002a,mp4a.40.2",RESOLUTION=1920x1080,FRAME-RATE=60.000,CLOSED-CAPTIONS="cc1",AUDIO="aud1",SUBTITLES="sub1"
        v9/prog_index.m3u8
        #EXT-X-STREAM-INF:AVERAGE-BANDWIDTH=2390686,BANDWIDTH=2399619,CODECS="avc1.640020,ac-3",RESOLUTION=960x540,FRAME-RATE=60.000,CLOSED-CAPTIONS="cc1",AUDIO="aud2",SUBTITLES="sub1"
        v5/prog_index.m3u8
        #EXT-X-STREAM-INF:AVERAGE-BANDWIDTH=582029,BANDWIDTH=593626,CODECS="avc1.64001e,mp4a.40.2",RESOLUTION=480x270,FRAME-RATE=30.000,CLOSED-CAPTIONS="cc1",AUDIO="aud1",SUBTITLES="sub1"
        v2/prog_index.m3u8

        #EXT-X-I-FRAME-STREAM-INF:AVERAGE-BANDWIDTH=186522,BANDWIDTH=252482,CODECS="avc1.64002a",RESOLUTION=1920x1080,URI="v9/iframe_index.m3u8"

        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud1",LANGUAGE="en",NAME="English",AUTOSELECT=YES,DEFAULT=YES,CHANNELS="2",URI="a1/prog_index.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud2",LANGUAGE="en",NAME="English",AUTOSELECT=YES,DEFAULT=YES,CHANNELS="6",URI="a2/prog_index.m3u8"
        #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc1",LANGUAGE="en",NAME="English",AUTOSELECT=YES,DEFAULT=YES,INSTREAM-ID="CC1"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="sub1",LANGUAGE="en",NAME="English",AUTOSELECT=YES,DEFAULT=YES,FORCED=NO,URI="s1/en/prog_index.m3u8"
        """

    @Test func theRFCMasterPlaylist() throws {
        let playlist = try master(Self.rfcMaster)
        #expect(playlist.variants.map(\.url.absoluteString) == [
            "http://example.com/low.m3u8", "http://example.com/mid.m3u8", "http://example.com/hi.m3u8",
            "http://example.com/audio-only.m3u8",
        ])
        #expect(playlist.variants.map(\.bandwidth) == [1_280_000, 2_560_000, 7_680_000, 65_000])
        #expect(playlist.variants.map(\.averageBandwidth) == [1_000_000, 2_000_000, 6_000_000, nil])
        // No RESOLUTION: v<n>-<bandwidth>.
        #expect(playlist.variants.map(\.identifier) == ["v1-1280000", "v2-2560000", "v3-7680000", "v4-65000"])
        #expect(playlist.variants.map(\.kind) == [.muxed, .muxed, .muxed, .audio])
        #expect(playlist.renditions.isEmpty)  // I-frame playlists are ignored
        #expect(try playlist.select(.best) == selection(variants: [2]))
        // The worst that is not audio-only.
        #expect(try playlist.select(.worst) == selection(variants: [0]))
        #expect(try playlist.select(.identifiers(["v4-65000"])) == selection(variants: [3]))
    }

    @Test func variantAttributes() throws {
        let playlist = try master("""
            #EXTM3U
            #EXT-X-STREAM-INF:BANDWIDTH=5000000,AVERAGE-BANDWIDTH=4500000,RESOLUTION=1920x1080,CODECS="avc1.640028,mp4a.40.2",FRAME-RATE=29.970,AUDIO="aud",VIDEO="cams",SUBTITLES="subs",HDCP-LEVEL=NONE,UNKNOWN-ATTR="x,y"
            hd/index.m3u8
            """)
        let variant = try #require(playlist.variants.first)
        #expect(variant.url.absoluteString == "https://cdn.example.com/show/hd/index.m3u8")
        #expect(variant.bandwidth == 5_000_000)
        #expect(variant.averageBandwidth == 4_500_000)
        #expect(variant.width == 1920 && variant.height == 1080)
        #expect(variant.codecs == "avc1.640028,mp4a.40.2")
        #expect(variant.frameRate == 29.97)
        #expect(variant.audioGroup == "aud" && variant.videoGroup == "cams" && variant.subtitlesGroup == "subs")
        #expect(variant.identifier == "1080p")
        #expect(variant.line == 2)
        // The group it names does not exist: its audio is its own.
        #expect(variant.kind == .muxed)
    }

    @Test func audioRenditionsWithoutURIAreInTheVariant() throws {
        let playlist = try master(Self.rfcAudioGroups)
        #expect(playlist.renditions.map(\.name) == ["English", "Deutsch", "Commentary"])
        #expect(playlist.renditions.map(\.url?.absoluteString) == [
            nil, "https://cdn.example.com/show/main/german-audio.m3u8", "https://cdn.example.com/show/commentary/audio-only.m3u8",
        ])
        #expect(playlist.renditions.map(\.isDefault) == [true, false, false])
        #expect(playlist.renditions.map(\.autoselect) == [true, false, false])
        #expect(playlist.renditions.map(\.language) == ["en", "de", "en"])
        #expect(playlist.renditions.map(\.type) == [.audio, .audio, .audio])
        #expect(playlist.renditions.map(\.groupID) == ["aac", "aac", "aac"])
        // The default (English) has no URI: the best variant comes alone.
        #expect(playlist.audioRendition(for: playlist.variants[2]) == nil)
        #expect(playlist.variants.map(\.kind) == [.muxed, .muxed, .muxed, .audio])
        #expect(try playlist.select(.best) == selection(variants: [2]))
        #expect(try playlist.select(.all) == selection(variants: [0, 1, 2, 3], renditions: [1, 2]))
        #expect(try playlist.select(.identifiers(["Deutsch", "v1-1280000"])) == selection(variants: [0], renditions: [1]))
        #expect(playlist.identifiers == ["v1-1280000", "v2-2560000", "v3-7680000", "v4-65000", "Deutsch", "Commentary"])
    }

    @Test func theBestVariantBringsItsDefaultAudioRendition() throws {
        let playlist = try master("""
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="lo",NAME="Stereo",URI="audio/lo.m3u8"
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="hi",NAME="Commentary",DEFAULT=NO,URI="audio/commentary.m3u8"
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="hi",NAME="Surround",DEFAULT=YES,LANGUAGE="en",URI="audio/51.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=900000,RESOLUTION=640x360,AUDIO="lo"
            v360.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=3000000,RESOLUTION=1280x720,AUDIO="hi"
            v720.m3u8
            """)
        #expect(playlist.variants.map(\.identifier) == ["360p", "720p"])
        #expect(playlist.variants.map(\.kind) == [.video, .video])
        #expect(playlist.renditions.map(\.identifier) == ["Stereo", "Commentary", "Surround"])
        #expect(try playlist.select(.best) == selection(variants: [1], renditions: [2]))
        // The "lo" group has no DEFAULT=YES: its first rendition.
        #expect(try playlist.select(.worst) == selection(variants: [0], renditions: [0]))
        #expect(try playlist.select(FormatSelector("720p+Commentary")) == selection(variants: [1], renditions: [1]))
        // Case-insensitive when nothing matches exactly.
        #expect(try playlist.select(FormatSelector("720P,surround")) == selection(variants: [1], renditions: [2]))
    }

    @Test func appleAdvancedNamesAreUnique() throws {
        let playlist = try master(Self.appleAdvanced)
        // Two 540p variants: their bandwidth tells them apart.
        #expect(playlist.variants.map(\.identifier) == ["540p-2177116", "1080p", "540p-2399619", "270p"])
        #expect(playlist.variants[0].url == playlist.variants[2].url)
        // "English" four times: the ones with a URI get their group in front; captions have no URI.
        #expect(playlist.renditions.map(\.type) == [.audio, .audio, .closedCaptions, .subtitles])
        #expect(playlist.renditions.map(\.identifier) == ["aud1-English", "aud2-English", "English", "sub1-English"])
        #expect(playlist.renditions[2].url == nil)
        #expect(playlist.identifiers == ["540p-2177116", "1080p", "540p-2399619", "270p", "aud1-English", "aud2-English", "sub1-English"])
        #expect(try playlist.select(.best) == selection(variants: [1], renditions: [0]))
        #expect(try playlist.select(.worst) == selection(variants: [3], renditions: [0]))
        #expect(try playlist.select(.all) == selection(variants: [0, 1, 2, 3], renditions: [0, 1, 3]))
        #expect(playlist.variants.map(\.kind) == [.video, .video, .video, .video])
    }

    @Test func renditionNamesThatRepeatAVariantsOrEachOther() throws {
        let playlist = try master("""
            #EXTM3U
            #EXT-X-MEDIA:TYPE=VIDEO,GROUP-ID="cam",NAME="720p",URI="angle.m3u8"
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="Main",URI="a1.m3u8"
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="Main",URI="a2.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=1000,RESOLUTION=1280x720
            v1.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=1000,RESOLUTION=1280x720
            v2.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=500
            v3.m3u8
            """)
        #expect(playlist.variants.map(\.identifier) == ["720p-1000", "720p-1000-2", "v3-500"])
        #expect(playlist.renditions.map(\.identifier) == ["720p", "a-Main", "a-Main-3"])
        #expect(playlist.renditions[0].type == .video)
    }

    @Test func unknownIdentifiersListWhatThereIs() throws {
        let playlist = try master(Self.appleAdvanced)
        expectDownloadError(.invalidRequest, "\"4k\"", "540p-2177116, 1080p", "aud1-English", "sub1-English") {
            _ = try playlist.select(FormatSelector("1080p+4k"))
        }
    }

    @Test func unknownRenditionTypesAndUnknownTagsAreIgnored() throws {
        let playlist = try master("""
            #EXTM3U
            #EXT-X-SESSION-DATA:DATA-ID="com.example.title",VALUE="Example"
            #EXT-X-SESSION-KEY:METHOD=AES-128,URI="k.key"
            #EXT-X-CONTENT-STEERING:SERVER-URI="/steering"
            #EXT-X-MEDIA:TYPE=HOLOGRAM,GROUP-ID="h",NAME="Future",URI="holo.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=1000,SCORE=2.0,PATHWAY-ID="CDN-A"
            a.m3u8
            """)
        #expect(playlist.renditions.isEmpty)
        #expect(playlist.variants.count == 1)
    }

    @Test func theTitleIsTheSessionDataTitlePreferringNoLanguage() throws {
        let variant = "#EXT-X-STREAM-INF:BANDWIDTH=1000\na.m3u8"
        #expect(try master("#EXTM3U\n\(variant)").title == nil)
        let titled = try master("""
            #EXTM3U
            #EXT-X-SESSION-DATA:DATA-ID="com.apple.hls.title",VALUE="Le film",LANGUAGE="fr"
            #EXT-X-SESSION-DATA:DATA-ID="com.apple.hls.description",VALUE="not a title"
            #EXT-X-SESSION-DATA:DATA-ID="com.apple.hls.title",VALUE="The Film"
            \(variant)
            """)
        #expect(titled.title == "The Film")
        #expect(try master("#EXTM3U\n#EXT-X-SESSION-DATA:DATA-ID=\"com.example.title\",VALUE=\"Only French\",LANGUAGE=\"fr\"\n\(variant)").title == "Only French")
        // A title from a URI (no VALUE), a blank one, a malformed tag: no title, and no error.
        for tag in [
            #"#EXT-X-SESSION-DATA:DATA-ID="com.apple.hls.title",URI="title.json""#,
            #"#EXT-X-SESSION-DATA:DATA-ID="com.apple.hls.title",VALUE="  ""#,
            #"#EXT-X-SESSION-DATA:DATA-ID="com.apple.hls.title",VALUE="unterminated"#,
        ] {
            #expect(try master("#EXTM3U\n\(tag)\n\(variant)").title == nil, "\(tag)")
        }
    }

    private func selection(variants: Set<Int>, renditions: Set<Int> = []) -> HLSSelection {
        var selection = HLSSelection()
        selection.variants = variants
        selection.renditions = renditions
        return selection
    }
}
