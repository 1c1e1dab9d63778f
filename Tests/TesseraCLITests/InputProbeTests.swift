import Foundation
import Testing
@testable import TesseraCLI

/// Which plain URLs get a probe of their Content-Type before they are downloaded: those without
/// an extension, or with one that scripts and APIs use.
@Suite struct InputProbeTests {
    @Test func aFileExtensionNeedsNoProbeAndAScriptsOrNoneDoes() {
        let probed = [
            "https://example.com/play?id=1", "https://example.com/manifest", "https://example.com/api.php?x=1",
            "https://example.com/a.JSON", "https://example.com/a.Xml", "https://example.com/.hidden", "https://example.com/a.toolong",
            "https://example.com/a.b-c", "https://example.com/", "https://example.com", "https://example.com/a.", "https://example.com/x.ASPX",
            "https://example.com/x.%6Asp", "https://example.com/x.jsp;jsessionid=1",
        ]
        let files = [
            "https://example.com/file.iso", "https://example.com/a/b.tar.gz", "https://example.com/v.MP4", "https://example.com/x.bin?y=.php",
            "https://example.com/x.m3u8", "https://example.com/x.mpd", "https://example.com/%C3%A9t%C3%A9.mkv", "https://example.com/x.ä",
            "https://example.com/x.7z",
        ]
        for text in probed { #expect(InputResolver.mayBeManifest(URL(string: text)!), "\(text)") }
        for text in files { #expect(!InputResolver.mayBeManifest(URL(string: text)!), "\(text)") }
    }
}
