import Foundation
import Tessera
import Testing
import TesseraTestSupport

@testable import DASHEntity

/// Malformed, hostile and unsupported MPDs: each refused with a precise ``DownloadError``.
@Suite struct DASHBadInputTests {
    static let simpleSet = """
        <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" media="$Number$.m4s"/><Representation id="v" bandwidth="1"/></AdaptationSet>
        """

    // MARK: Not XML, not an MPD

    @Test func malformedAndTruncatedXMLIsInvalid() throws {
        expectDownloadError(.manifestInvalid) { _ = try manifest("<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\"><Period></MPD>") }
        let whole = mpd(Self.simpleSet)
        expectDownloadError(.manifestInvalid) { _ = try manifest(String(whole.prefix(whole.count / 2))) }
        expectDownloadError(.manifestInvalid) { _ = try manifest("") }
        expectDownloadError(.manifestInvalid) { _ = try manifest("#EXTM3U\n#EXT-X-VERSION:3\n") }
    }

    @Test func aWrongRootIsRefused() {
        expectDownloadError(.manifestInvalid, "not an MPEG-DASH MPD", "<html>") {
            _ = try manifest("<html><body>Not found</body></html>")
        }
        expectDownloadError(.manifestInvalid, "not an MPEG-DASH MPD", "<metalink>") {
            _ = try manifest(#"<metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="a"/></metalink>"#)
        }
    }

    @Test func anotherOrNoNamespaceIsRefused() {
        let other = mpd(Self.simpleSet).replacingOccurrences(of: "urn:mpeg:dash:schema:mpd:2011", with: "urn:mpeg:dash:schema:mpd:2099")
        expectDownloadError(.manifestInvalid, "in the namespace \"urn:mpeg:dash:schema:mpd:2099\"", "urn:mpeg:dash:schema:mpd:2011") {
            _ = try manifest(other)
        }
        let none = mpd(Self.simpleSet).replacingOccurrences(of: #" xmlns="urn:mpeg:dash:schema:mpd:2011""#, with: "")
        expectDownloadError(.manifestInvalid, "in no namespace") { _ = try manifest(none) }
        // Children in another namespace do not count as DASH elements.
        let foreignChildren = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:x="urn:other" type="static" mediaPresentationDuration="PT2S">
              <x:Period><x:AdaptationSet><x:Representation id="v" bandwidth="1"/></x:AdaptationSet></x:Period>
            </MPD>
            """
        expectDownloadError(.manifestInvalid, "has no <Period>") { _ = try manifest(foreignChildren) }
    }

    // MARK: Missing or wrong attributes

    @Test func missingRequiredAttributesNameTheElementAndLine() {
        let noID = mpd("""
            <AdaptationSet mimeType="video/mp4">
              <SegmentTemplate duration="2" media="$Number$.m4s"/>
              <Representation bandwidth="1"/>
            </AdaptationSet>
            """)
        expectDownloadError(.manifestInvalid, "<Representation> at line 7", "has no @id") { _ = try manifest(noID) }
        let noD = mpd("""
            <AdaptationSet mimeType="video/mp4">
              <SegmentTemplate media="$Time$.m4s"><SegmentTimeline><S t="0" d="1" r="1"/><S t="9"/></SegmentTimeline></SegmentTemplate>
              <Representation id="v" bandwidth="1"/>
            </AdaptationSet>
            """)
        expectDownloadError(.manifestInvalid, "<S> at line 6", "has no @d") { _ = try manifest(noD) }
        let noMedia = mpd("""
            <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" initialization="i.mp4"/><Representation id="v" bandwidth="1"/></AdaptationSet>
            """)
        expectDownloadError(.manifestInvalid, "<SegmentTemplate>", "has no @media") { _ = try manifest(noMedia) }
        let noCount = mpd(Self.simpleSet.replacingOccurrences(of: "duration=\"2\" ", with: ""))
        expectDownloadError(.manifestInvalid, "neither @duration nor a <SegmentTimeline>") { _ = try manifest(noCount) }
        let noRepresentations = mpd("<AdaptationSet mimeType=\"video/mp4\"/>")
        expectDownloadError(.manifestInvalid, "lists no <Representation>") { _ = try manifest(noRepresentations) }
        let noLength = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static"><Period>\(Self.simpleSet)</Period></MPD>
            """
        expectDownloadError(.manifestInvalid, "@duration=2", "cannot be counted") { _ = try manifest(noLength) }
        let emptyList = mpd("""
            <AdaptationSet mimeType="video/mp4"><Representation id="v" bandwidth="1"><SegmentList duration="1"/></Representation></AdaptationSet>
            """)
        expectDownloadError(.manifestInvalid, "has no <SegmentURL>") { _ = try manifest(emptyList) }
    }

    @Test func badValuesAreRefusedWithTheValue() {
        expectDownloadError(.manifestInvalid, "<MPD> at line", "PT1X", "ISO 8601 duration") {
            _ = try manifest(mpd(duration: "PT1X", Self.simpleSet))
        }
        expectDownloadError(.manifestInvalid, "@bandwidth=\"fast\"") {
            _ = try manifest(mpd(Self.simpleSet.replacingOccurrences(of: "bandwidth=\"1\"", with: "bandwidth=\"fast\"")))
        }
        expectDownloadError(.manifestInvalid, "@timescale=\"0\"") {
            _ = try manifest(mpd(Self.simpleSet.replacingOccurrences(of: "duration=\"2\"", with: "duration=\"2\" timescale=\"0\"")))
        }
        expectDownloadError(.manifestInvalid, "@r=\"-2\"") {
            _ = try manifest(mpd("""
                <AdaptationSet mimeType="video/mp4"><SegmentTemplate media="$Time$"><SegmentTimeline><S d="1" r="-2"/></SegmentTimeline></SegmentTemplate><Representation id="v" bandwidth="1"/></AdaptationSet>
                """))
        }
        expectDownloadError(.manifestInvalid, "@mediaRange=\"9-3\"") {
            _ = try manifest(mpd("""
                <AdaptationSet mimeType="video/mp4"><Representation id="v" bandwidth="1"><SegmentList><SegmentURL mediaRange="9-3"/></SegmentList></Representation></AdaptationSet>
                """))
        }
        expectDownloadError(.manifestInvalid, "$Frame$") {
            _ = try manifest(mpd(Self.simpleSet.replacingOccurrences(of: "$Number$", with: "$Frame$")))
        }
        expectDownloadError(.manifestInvalid, "has the unknown type \"pending\"") {
            _ = try manifest(mpd(Self.simpleSet).replacingOccurrences(of: "type=\"static\"", with: "type=\"pending\""))
        }
        expectDownloadError(.manifestInvalid, "ids must be unique") {
            _ = try manifest(mpd(Self.simpleSet + Self.simpleSet))
        }
        expectDownloadError(.manifestInvalid, "$Bandwidth$") {
            _ = try manifest(mpd(Self.simpleSet.replacingOccurrences(of: "$Number$", with: "$Bandwidth$-$Number$")
                .replacingOccurrences(of: " bandwidth=\"1\"", with: "")))
        }
    }

    @Test func representationsThatWouldShareAFileAreRefused() {
        let set = """
            <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" media="$RepresentationID$/$Number$.m4s"/>
              <Representation id="a" bandwidth="1"/><Representation id="./a" bandwidth="2"/></AdaptationSet>
            """
        expectDownloadError(.manifestInvalid, "would both be saved as stream/a.mp4") { _ = try manifest(mpd(set)) }
    }

    // MARK: Unsafe XML

    @Test func entityBombsAndExternalEntitiesAreRefused() {
        let bomb = """
            <?xml version="1.0"?>
            <!DOCTYPE MPD [
              <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
              <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
              <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
            ]>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static"><ProgramInformation><Title>&c;</Title></ProgramInformation></MPD>
            """
        expectDownloadError(.unsafeInput) { _ = try manifest(bomb) }
        let external = """
            <?xml version="1.0"?>
            <!DOCTYPE MPD [<!ENTITY x SYSTEM "file:///etc/passwd">]>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static"><BaseURL>&x;</BaseURL></MPD>
            """
        expectDownloadError(.unsafeInput) { _ = try manifest(external) }
        let dtd = """
            <?xml version="1.0"?>
            <!DOCTYPE MPD SYSTEM "http://127.0.0.1:9/evil.dtd">
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static"/>
            """
        expectDownloadError(.unsafeInput) { _ = try manifest(dtd) }
        let parameter = """
            <?xml version="1.0"?>
            <!DOCTYPE MPD [<!ENTITY % p SYSTEM "http://127.0.0.1:9/p.dtd"> %p;]>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static"/>
            """
        expectDownloadError(.unsafeInput) { _ = try manifest(parameter) }
    }

    // MARK: Hostile names and URLs

    @Test(arguments: ["../x", "../../etc/cron.d/x", "/etc/passwd", "a/../../b", "~root", "tab&#9;name", "back\\slash", ".", "a/.."])
    func hostileRepresentationIdsAreRefused(_ id: String) {
        let set = """
            <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" media="seg-$Number$.m4s"/><Representation id="\(id)" bandwidth="1"/></AdaptationSet>
            """
        expectDownloadError(.unsafePath, "cannot be a file name") { _ = try manifest(mpd(set)) }
    }

    @Test func aNULInAnIdIsNotEvenXML() {
        let set = """
            <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" media="s.m4s"/><Representation id="a&#0;b" bandwidth="1"/></AdaptationSet>
            """
        expectDownloadError(.manifestInvalid) { _ = try manifest(mpd(set)) }
    }

    @Test(arguments: [
        "file:///etc/", "ftp://files.example.com/dash/", "javascript:alert(1)//", "data:text/plain,hello/", "gopher://x.example/",
    ])
    func hostileBaseURLSchemesAreRefused(_ base: String) {
        let set = """
            <AdaptationSet mimeType="video/mp4"><BaseURL>\(base)</BaseURL><SegmentTemplate duration="2" media="s-$Number$.m4s"/><Representation id="v" bandwidth="1"/></AdaptationSet>
            """
        expectDownloadError(.unsafeInput, "http or https") { _ = try manifest(mpd(set)) }
    }

    @Test(arguments: ["file:///etc/passwd#$Number$", "ftp://evil.example/seg-$Number$.m4s", "javascript:alert($Number$)"])
    func hostileTemplateSchemesAreRefused(_ media: String) {
        let set = """
            <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" media="\(media)"/><Representation id="v" bandwidth="1"/></AdaptationSet>
            """
        expectDownloadError(.unsafeInput, "representation \"v\"") { _ = try manifest(mpd(set)) }
    }

    @Test func hostileSegmentURLsAndControlCharactersAreRefused() {
        let list = """
            <AdaptationSet mimeType="video/mp4"><Representation id="v" bandwidth="1"><SegmentList>
              <SegmentURL media="ok.m4s"/><SegmentURL media="javascript:alert(1)"/></SegmentList></Representation></AdaptationSet>
            """
        expectDownloadError(.unsafeInput) { _ = try manifest(mpd(list)) }
        let initialization = """
            <AdaptationSet mimeType="video/mp4"><Representation id="v" bandwidth="1"><SegmentList>
              <Initialization sourceURL="file:///dev/zero"/><SegmentURL media="ok.m4s"/></SegmentList></Representation></AdaptationSet>
            """
        expectDownloadError(.unsafeInput) { _ = try manifest(mpd(initialization)) }
        let control = """
            <AdaptationSet mimeType="video/mp4"><Representation id="v" bandwidth="1"><SegmentList>
              <SegmentURL media="a&#1;b.m4s"/></SegmentList></Representation></AdaptationSet>
            """
        // XML 1.0 forbids &#1; itself; either way, refused.
        #expect(throws: DownloadError.self) { _ = try manifest(mpd(control)) }
        let newline = """
            <AdaptationSet mimeType="video/mp4"><Representation id="v" bandwidth="1"><SegmentList>
              <SegmentURL media="a&#10;b.m4s"/></SegmentList></Representation></AdaptationSet>
            """
        expectDownloadError(.unsafeInput, "control character") { _ = try manifest(mpd(newline)) }
        expectDownloadError(.unsafeInput) {
            _ = try manifest(mpd(Self.simpleSet), url: URL(string: "file:///tmp/stream.mpd")!)
        }
    }

    // MARK: Unsupported content

    @Test func aLiveMPDWithoutAnAvailabilityStartTimeIsRefused() {
        // Live MPDs are read (DASHLiveTests); one whose segments cannot be placed in time is not.
        let live = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="dynamic" minimumUpdatePeriod="PT2S">
              <Period start="PT0S">\(Self.simpleSet)</Period>
            </MPD>
            """
        expectDownloadError(.manifestInvalid, "no @availabilityStartTime") { _ = try manifest(live) }
        let badDate = live.replacingOccurrences(of: "type=\"dynamic\"", with: "type=\"dynamic\" availabilityStartTime=\"yesterday\"")
        expectDownloadError(.manifestInvalid, "@availabilityStartTime=\"yesterday\"") { _ = try manifest(badDate) }
    }

    @Test func drmOnASelectedRepresentationIsRefusedNamingTheScheme() throws {
        let set = """
            <AdaptationSet contentType="video" mimeType="video/mp4">
              <ContentProtection schemeIdUri="urn:mpeg:dash:mp4protection:2011" value="cenc" xmlns:cenc="urn:mpeg:cenc:2013" cenc:default_KID="10000000-1000-1000-1000-100000000001"/>
              <ContentProtection schemeIdUri="urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed"/>
              <SegmentTemplate duration="2" media="$RepresentationID$-$Number$.m4s"/>
              <Representation id="v" bandwidth="1"/>
            </AdaptationSet>
            <AdaptationSet contentType="audio" mimeType="audio/mp4">
              <SegmentTemplate duration="2" media="$RepresentationID$-$Number$.m4s"/>
              <Representation id="a" bandwidth="1"/>
              <Representation id="a-drm" bandwidth="2">
                <ContentProtection schemeIdUri="urn:uuid:9A04F079-9840-4286-AB92-E65BE0885F95" value="MSPR 2.0"/>
              </Representation>
            </AdaptationSet>
            """
        expectDownloadError(.unsupportedContent, "\"v\" is DRM-protected", "urn:mpeg:dash:mp4protection:2011 (MPEG Common Encryption) value=\"cenc\"", "line 6") {
            _ = try manifest(mpd(set), format: "v")
        }
        expectDownloadError(.unsupportedContent, "\"a-drm\"", "PlayReady") { _ = try manifest(mpd(set), format: "a-drm") }
        expectDownloadError(.unsupportedContent, "DRM-protected") { _ = try manifest(mpd(set)) }
        // Unprotected representations alone are fine; the protected ones are still listed.
        let clear = try manifest(mpd(set), format: "a")
        #expect(clear.selectedOutputs.map(\.name) == ["stream/a.m4a"])
        #expect(clear.outputs.count == 3)
    }

    @Test func remoteElementsAreRefused() {
        let remote = """
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:xlink="http://www.w3.org/1999/xlink" type="static" mediaPresentationDuration="PT2S">
              <Period xlink:href="https://ads.example.com/period.xml" xlink:actuate="onLoad"/>
            </MPD>
            """
        expectDownloadError(.unsupportedContent, "remote element", "https://ads.example.com/period.xml") { _ = try manifest(remote) }
    }

    // MARK: Limits

    @Test func aHugeRepeatIsRefusedBeforeAllocating() {
        let clock = ContinuousClock()
        let start = clock.now
        let huge = mpd(duration: "P1000Y", """
            <AdaptationSet mimeType="video/mp4">
              <SegmentTemplate media="$Time$.m4s"><SegmentTimeline><S t="0" d="1" r="1000000000"/></SegmentTimeline></SegmentTemplate>
              <Representation id="v" bandwidth="1"/>
            </AdaptationSet>
            """)
        expectDownloadError(.manifestTooLarge, "<S> at line 6", "1000000 segments") { _ = try manifest(huge) }
        let endless = mpd(duration: "P1000Y", """
            <AdaptationSet mimeType="video/mp4">
              <SegmentTemplate media="$Time$.m4s"><SegmentTimeline><S t="0" d="1" r="-1"/></SegmentTimeline></SegmentTemplate>
              <Representation id="v" bandwidth="1"/>
            </AdaptationSet>
            """)
        expectDownloadError(.manifestTooLarge) { _ = try manifest(endless) }
        let byDuration = mpd(duration: "P1000000000Y", """
            <AdaptationSet mimeType="video/mp4"><SegmentTemplate timescale="1000000" duration="1" media="$Number$.m4s"/><Representation id="v" bandwidth="1"/></AdaptationSet>
            """)
        expectDownloadError(.manifestTooLarge) { _ = try manifest(byDuration) }
        #expect(clock.now - start < .seconds(2))
    }

    @Test func theLimitCountsEveryRepresentationAndTheInitSegments() throws {
        // Two representations of 1 init + 5 media segments each: 12.
        let set = """
            <AdaptationSet mimeType="video/mp4"><SegmentTemplate duration="2" media="$RepresentationID$-$Number$.m4s" initialization="$RepresentationID$.mp4"/>
              <Representation id="a" bandwidth="1"/><Representation id="b" bandwidth="2"/></AdaptationSet>
            """
        let text = mpd(set)
        #expect(try manifest(text, maxSegments: 12).outputs.map(\.segments.count) == [6, 6])
        expectDownloadError(.manifestTooLarge, "more than 11 segments", "representation \"b\" alone has 6") { _ = try manifest(text, maxSegments: 11) }
        expectDownloadError(.manifestTooLarge, "at most 4 segments") { _ = try manifest(text, maxSegments: 4) }
    }
}

extension DASHBadInputTests {
    @Test func aSegmentListOverTheLimitIsRefused() throws {
        let entries = (1...20).map { "<SegmentURL media=\"s\($0).m4s\"/>" }.joined()
        let set = """
            <AdaptationSet mimeType="video/mp4"><Representation id="v" bandwidth="1"><SegmentList>\(entries)</SegmentList></Representation></AdaptationSet>
            """
        expectDownloadError(.manifestTooLarge, "<SegmentList>", "at most 19 segments") { _ = try manifest(mpd(set), maxSegments: 19) }
        #expect(try manifest(mpd(set), maxSegments: 20).outputs[0].segments.count == 20)
    }
}
