import Foundation

/// Realistic manifests for the XML and JSON helper tests.
enum ManifestFixtures {
    /// Whether to assert on resident memory: off by default, because the resident size is the
    /// whole process's and other suites running in parallel move it. `TESSERA_MEMORY_TESTS=1`
    /// turns it on (run the manifest suites alone then).
    static let checksMemory = ProcessInfo.processInfo.environment["TESSERA_MEMORY_TESTS"] != nil

    static let dashNamespace = "urn:mpeg:dash:schema:mpd:2011"
    static let xlinkNamespace = "http://www.w3.org/1999/xlink"
    static let metalinkNamespace = "urn:ietf:params:xml:ns:metalink"

    /// An MPD with the DASH namespace as the default namespace.
    static let mpd = """
        <?xml version="1.0" encoding="UTF-8"?>
        <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:xlink="http://www.w3.org/1999/xlink" type="static" mediaPresentationDuration="PT634.566S" minBufferTime="PT2S" profiles="urn:mpeg:dash:profile:isoff-live:2011">
          <BaseURL>https://cdn.example.com/video/</BaseURL>
          <Period id="p0" start="PT0S">
            <AdaptationSet id="1" contentType="video" mimeType="video/mp4" segmentAlignment="true">
              <SegmentTemplate timescale="90000" duration="360000" startNumber="1" initialization="$RepresentationID$/init.mp4" media="$RepresentationID$/seg-$Number%05d$.m4s"/>
              <Representation id="v1080" bandwidth="4800000" width="1920" height="1080" codecs="avc1.640028"/>
              <Representation id="v720" bandwidth="2400000" width="1280" height="720" codecs="avc1.64001f"/>
            </AdaptationSet>
            <AdaptationSet id="2" contentType="audio" mimeType="audio/mp4" lang="en">
              <BaseURL>audio/</BaseURL>
              <!-- audio uses its own template -->
              <SegmentTemplate timescale="48000" duration="192000" media="$RepresentationID$/$Number$.m4s" initialization="$RepresentationID$/init.mp4"/>
              <Representation id="a128" bandwidth="128000" codecs="mp4a.40.2"/>
            </AdaptationSet>
            <AdaptationSet xlink:href="https://ads.example.com/period.xml" xlink:actuate="onLoad"/>
          </Period>
        </MPD>
        """

    /// The same MPD with the DASH namespace bound to the prefix `dash`.
    static let prefixedMPD = """
        <?xml version="1.0" encoding="UTF-8"?>
        <dash:MPD xmlns:dash="urn:mpeg:dash:schema:mpd:2011" type="dynamic">
          <dash:BaseURL>https://live.example.com/</dash:BaseURL>
          <dash:Period id="live">
            <dash:AdaptationSet mimeType="video/mp4">
              <dash:SegmentTemplate timescale="1000" media="chunk-$Time$.m4s" initialization="init.mp4"/>
              <dash:Representation id="hd" bandwidth="3000000"/>
              <dash:Representation id="sd" bandwidth="800000"/>
            </dash:AdaptationSet>
          </dash:Period>
        </dash:MPD>
        """

    /// A Metalink v4 file (RFC 5854).
    static let metalink = """
        <?xml version="1.0" encoding="UTF-8"?>
        <metalink xmlns="urn:ietf:params:xml:ns:metalink">
          <published>2024-01-10T12:00:00Z</published>
          <file name="example.iso">
            <size>14471447</size>
            <identity>Example</identity>
            <version>1.0</version>
            <language>en</language>
            <description>A description of the example file for download.</description>
            <hash type="sha-256">3d6fece8033d146d8611eab4f032df738c8c1283620fd02a1f2bfec6e27d590d</hash>
            <pieces length="262144" type="sha-256">
              <hash>a0c4d3b2</hash>
              <hash>b1d5e4c3</hash>
            </pieces>
            <url location="de" priority="1">ftp://ftp.example.com/example.iso</url>
            <url location="fr" priority="1">http://example.com/example.iso</url>
            <url priority="2">https://mirror.example.org/example.iso</url>
            <metaurl mediatype="torrent" priority="2">http://example.com/example.iso.torrent</metaurl>
          </file>
        </metalink>
        """

    /// The legacy playurl XML answer: URLs wrapped in CDATA.
    static let playurl = """
        <video><result>suee</result><durl><order>1</order><url><![CDATA[http://a/b?x=1&y=2]]></url><backup_url><url><![CDATA[http://m/b]]></url></backup_url></durl></video>
        """

    /// The playurl JSON answer.
    static let playurlJSON = #"{"code":0,"message":"0","data":{"quality":80,"timelength":634566,"durl":[{"order":1,"size":123,"url":"http://a","backup_url":["http://m/a"]},{"order":2,"size":456,"url":"http://b","backup_url":null}]}}"#

    /// The classic "billion laughs" entity bomb.
    static let billionLaughs = """
        <?xml version="1.0"?>
        <!DOCTYPE lolz [
         <!ENTITY lol "lol">
         <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
         <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
         <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
         <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
         <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
         <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
         <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
         <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
         <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
        ]>
        <lolz>&lol9;</lolz>
        """

    /// An XML document nested `depth` elements deep.
    static func nested(depth: Int) -> String {
        String(repeating: "<a>", count: depth) + "x" + String(repeating: "</a>", count: depth)
    }

    /// An XML document with `count` elements: the root and `count - 1` children.
    static func flat(elements count: Int) -> String {
        "<root>" + String(repeating: "<s/>", count: count - 1) + "</root>"
    }
}
