import Foundation
import HLSEntity
import Tessera
import TesseraTesting
import Testing
import TesseraTestSupport

@Suite(.timeLimit(.minutes(2))) struct HLSBadInputTests {
    // MARK: Not a playlist

    @Test func documentsThatAreNotPlaylists() {
        expectDownloadError(.manifestInvalid, "empty") { _ = try HLSPlaylist.parse(text: "", url: playlistURL) }
        expectDownloadError(.manifestInvalid, "not an HLS playlist", "<!DOCTYPE html>", "#EXTM3U") {
            _ = try HLSPlaylist.parse(text: "<!DOCTYPE html>\n<html><body>Not found</body></html>", url: playlistURL)
        }
        // An MPD (the wrong "root") or a JSON answer.
        expectDownloadError(.manifestInvalid, "not an HLS playlist") {
            _ = try HLSPlaylist.parse(text: #"<?xml version="1.0"?><MPD xmlns="urn:mpeg:dash:schema:mpd:2011"/>"#, url: playlistURL)
        }
        expectDownloadError(.manifestInvalid, "not an HLS playlist") {
            _ = try HLSPlaylist.parse(text: #"{"code": -404, "message": "not found"}"#, url: playlistURL)
        }
        // The header must be the first line.
        expectDownloadError(.manifestInvalid, "line 1") {
            _ = try HLSPlaylist.parse(text: "\n#EXTM3U\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n", url: playlistURL)
        }
        expectDownloadError(.manifestInvalid, "not an HLS playlist") {
            _ = try HLSPlaylist.parse(text: "#EXTM3UX\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n", url: playlistURL)
        }
    }

    @Test func xmlEntityBombsAndExternalEntitiesAreNeverExpanded() {
        // M3U8 has no entities: an XML document with a "billion laughs" or an external entity is
        // refused on its first line, without being parsed as XML at all.
        let bomb = """
            <?xml version="1.0"?>
            <!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
            <MPD>&lol2;</MPD>
            """
        let external = """
            <?xml version="1.0"?>
            <!DOCTYPE MPD [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
            <MPD>&xxe;</MPD>
            """
        for document in [bomb, external] {
            expectDownloadError(.manifestInvalid, "not an HLS playlist") { _ = try HLSPlaylist.parse(text: document, url: playlistURL) }
        }
    }

    @Test func masterAndMediaTagsTogether() {
        expectDownloadError(.manifestInvalid, "#EXT-X-STREAM-INF on line 2", "#EXTINF on line 4") {
            _ = try HLSPlaylist.parse(text: "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n#EXTINF:1,\na.ts\n", url: playlistURL)
        }
    }

    // MARK: Truncated

    @Test func truncatedPlaylists() {
        expectDownloadError(.manifestInvalid, "line 4", "#EXTINF is not followed by a segment URI") {
            _ = try media("#EXTM3U\n#EXTINF:4,\na.ts\n#EXTINF:4,")
        }
        expectDownloadError(.manifestInvalid, "line 4", "#EXT-X-STREAM-INF is not followed") {
            _ = try master("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\na.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=2\n")
        }
        expectDownloadError(.manifestInvalid, "line 2", "#EXT-X-STREAM-INF is not followed") {
            _ = try master("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n#EXT-X-STREAM-INF:BANDWIDTH=2\nb.m3u8\n")
        }
        expectDownloadError(.manifestInvalid, "line 2", "unterminated") {
            _ = try master("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,CODECS=\"avc1\na.m3u8\n")
        }
        expectDownloadError(.manifestInvalid, "no segments") { _ = try media("#EXTM3U\n#EXT-X-ENDLIST\n") }
        expectDownloadError(.manifestInvalid, "no segments") { _ = try media("#EXTM3U\n") }
        expectDownloadError(.manifestInvalid, "no variant") {
            _ = try master("#EXTM3U\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1,URI=\"i.m3u8\"\n")
        }
    }

    // MARK: Missing or invalid attributes

    @Test func missingRequiredAttributes() {
        expectDownloadError(.manifestInvalid, "line 2", "BANDWIDTH") { _ = try master("#EXTM3U\n#EXT-X-STREAM-INF:RESOLUTION=1x1\na.m3u8\n") }
        for (attributes, missing) in [
            (#"GROUP-ID="a",NAME="x""#, "TYPE"), (#"TYPE=AUDIO,NAME="x""#, "GROUP-ID"), (#"TYPE=AUDIO,GROUP-ID="a""#, "NAME"),
        ] {
            expectDownloadError(.manifestInvalid, "line 2", "#EXT-X-MEDIA has no \(missing)") {
                _ = try master("#EXTM3U\n#EXT-X-MEDIA:\(attributes)\n#EXT-X-STREAM-INF:BANDWIDTH=1\na.m3u8\n")
            }
        }
        expectDownloadError(.manifestInvalid, "line 2", "#EXT-X-KEY has no METHOD") {
            _ = try media("#EXTM3U\n#EXT-X-KEY:URI=\"k\"\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n")
        }
        expectDownloadError(.manifestInvalid, "line 2", "#EXT-X-KEY has no URI") {
            _ = try media("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n")
        }
        expectDownloadError(.manifestInvalid, "line 2", "#EXT-X-MAP has no URI") {
            _ = try media("#EXTM3U\n#EXT-X-MAP:BYTERANGE=\"1@0\"\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n")
        }
        expectDownloadError(.manifestInvalid, "line 2", "has no #EXTINF") { _ = try media("#EXTM3U\na.ts\n#EXT-X-ENDLIST\n") }
        expectDownloadError(.manifestInvalid, "line 2", "does not follow an #EXT-X-STREAM-INF") {
            _ = try master("#EXTM3U\nstray.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=1\na.m3u8\n")
        }
    }

    @Test func invalidValues() {
        expectDownloadError(.manifestInvalid, "line 2", "#EXTINF duration", "\"ten\"") { _ = try media("#EXTM3U\n#EXTINF:ten,\na.ts\n#EXT-X-ENDLIST\n") }
        expectDownloadError(.manifestInvalid, "line 2", "RESOLUTION") {
            _ = try master("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,RESOLUTION=wide\na.m3u8\n")
        }
        expectDownloadError(.manifestInvalid, "line 2", "IV") {
            _ = try media("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=0xnothex\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n")
        }
        expectDownloadError(.manifestInvalid, "line 2", "MEDIA-SEQUENCE") { _ = try media("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:-1\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n") }
        expectDownloadError(.manifestInvalid, "line 4", "before the first segment") {
            _ = try media("#EXTM3U\n#EXTINF:1,\na.ts\n#EXT-X-MEDIA-SEQUENCE:3\n#EXT-X-ENDLIST\n")
        }
        for range in ["abc", "10@", "@5", "1@2@3", "-5", "0@0"] {
            expectDownloadError(.manifestInvalid, "line 2", "#EXT-X-BYTERANGE") {
                _ = try media("#EXTM3U\n#EXT-X-BYTERANGE:\(range)\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n")
            }
        }
        expectDownloadError(.manifestInvalid, "largest possible offset") {
            _ = try media("#EXTM3U\n#EXT-X-BYTERANGE:10@9223372036854775800\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n")
        }
    }

    @Test func aByteRangeWithoutOffsetNeedsTheSameResourceBefore() {
        // First segment: nothing to continue from.
        expectDownloadError(.manifestInvalid, "line 2", "#EXT-X-BYTERANGE has no offset") {
            _ = try media("#EXTM3U\n#EXT-X-BYTERANGE:100\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n")
        }
        // Another resource before it.
        expectDownloadError(.manifestInvalid, "line 5", "same resource") {
            _ = try media("#EXTM3U\n#EXT-X-BYTERANGE:100@0\n#EXTINF:1,\na.ts\n#EXT-X-BYTERANGE:100\n#EXTINF:1,\nb.ts\n#EXT-X-ENDLIST\n")
        }
        // The same resource, but whole: not a sub-range.
        expectDownloadError(.manifestInvalid, "line 4", "sub-range") {
            _ = try media("#EXTM3U\n#EXTINF:1,\na.ts\n#EXT-X-BYTERANGE:100\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n")
        }
    }

    @Test func unknownTagsAndAttributesAreIgnored() throws {
        let playlist = try media("""
            #EXTM3U
            #EXT-X-SOMETHING-NEW:FOO=BAR
            #EXT-X-MAP:URI="init.mp4",BYTERANGE="10@0",NEW=YES
            #EXT-X-KEY:METHOD=AES-128,URI="k.key",FUTURE-ATTR="x",OTHER=1
            #EXT-X-BITRATE:5000
            #EXT-X-CUE-OUT:30
            #EXTINF:4,
            a.ts
            #EXT-X-ENDLIST
            """)
        #expect(playlist.segments.count == 1)
    }

    // MARK: Hostile URLs

    @Test(arguments: [
        "file:///etc/passwd", "ftp://example.com/a.ts", "javascript:alert(1)", "data:video/mp2t;base64,AAAA", "gopher://x/a.ts",
    ])
    func schemesOtherThanHTTPAreRefusedEverywhere(uri: String) {
        expectDownloadError(.unsafeInput, "line 3", "scheme") { _ = try media("#EXTM3U\n#EXTINF:1,\n\(uri)\n#EXT-X-ENDLIST\n") }
        expectDownloadError(.unsafeInput, "line 2", "#EXT-X-KEY URI") {
            _ = try media("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"\(uri)\"\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n")
        }
        expectDownloadError(.unsafeInput, "line 2", "#EXT-X-MAP URI") {
            _ = try media("#EXTM3U\n#EXT-X-MAP:URI=\"\(uri)\"\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n")
        }
        expectDownloadError(.unsafeInput, "line 3", "variant URI") { _ = try master("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n\(uri)\n") }
        expectDownloadError(.unsafeInput, "line 2", "#EXT-X-MEDIA URI") {
            _ = try master("#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"x\",URI=\"\(uri)\"\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n")
        }
    }

    @Test func controlCharactersInURIsAreRefused() {
        expectDownloadError(.unsafeInput, "line 3", "control character") { _ = try media("#EXTM3U\n#EXTINF:1,\na\u{0}b.ts\n#EXT-X-ENDLIST\n") }
        expectDownloadError(.unsafeInput, "line 3", "control character") { _ = try media("#EXTM3U\n#EXTINF:1,\na\u{1B}b.ts\n#EXT-X-ENDLIST\n") }
        expectDownloadError(.unsafeInput, "line 2") {
            _ = try media("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\u{7}.key\"\n#EXTINF:1,\na.ts\n#EXT-X-ENDLIST\n")
        }
    }

    // MARK: Hostile names

    @Test(arguments: ["../x", "../../etc/cron.d/x", "/etc/passwd", "a\u{0}b", "~root", "a\\b", "sub/../../x", ""])
    func hostileOutputNamesAreRefused(name: String) {
        expectDownloadError(.unsafePath) { _ = try HLSEntity.outputName(directory: "show", identifier: name, fileExtension: "aac") }
    }

    @Test func safeOutputNames() throws {
        #expect(try HLSEntity.outputName(directory: "show", identifier: "720p", fileExtension: "mp4") == "show/720p.mp4")
        #expect(try HLSEntity.outputName(directory: "show", identifier: "English (US)", fileExtension: "aac") == "show/English (US).aac")
        #expect(try HLSEntity.outputName(directory: "show", identifier: "en/US", fileExtension: "aac") == "show/en/US.aac")
        #expect(HLSEntity.playlistName(of: URL(string: "https://x.example/a/..%2F..%2Fetc.m3u8")!) == "_.._etc")
        #expect(HLSEntity.playlistName(of: URL(string: "https://x.example/")!) == "playlist")
        #expect(HLSEntity.playlistName(of: URL(string: "https://x.example/live/master.m3u8?token=1")!) == "master")
    }

    @Test func aHostileRenditionNameFailsTheResolve() async throws {
        for name in ["../../evil", "/abs/olute", "nul\u{0}byte"] {
            try await withLoopbackOrigin { origin in
                origin.serve("/h/master.m3u8", .text("""
                    #EXTM3U
                    #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="a",NAME="\(name)",DEFAULT=NO,URI="a.m3u8"
                    #EXT-X-STREAM-INF:BANDWIDTH=1000,AUDIO="a"
                    v.m3u8
                    """))
                let engine = try CurlEngine(configuration: CurlEngine.Configuration.forTests())
                let entity = HLSEntity(url: origin.url("/h/master.m3u8"))
                do {
                    _ = try await entity.resolve(in: ResolveContext(engine: engine))
                    Issue.record("\(name): resolved")
                } catch let error as DownloadError {
                    #expect(error.code == .unsafePath, "\(error)")
                }
                // Refused before any media playlist was asked for.
                #expect(origin.requestCount(for: "/h/v.m3u8") == 0)
                #expect(origin.requestCount(for: "/h/a.m3u8") == 0)
                await engine.shutdown()
            }
        }
    }
}
