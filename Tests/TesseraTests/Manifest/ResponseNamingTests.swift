import Foundation
import Testing
@testable import Tessera

/// `ResponseNaming.lastPathComponent(of:)` reads plain paths itself: it must say what
/// Foundation's `lastPathComponent` says, for every URL.
@Suite struct ResponseNamingTests {
    static let urls = [
        "https://example.com/dir/file.bin", "https://example.com/dir/file.bin?x=/y#z/w", "https://example.com/file",
        "https://example.com/", "https://example.com", "https://example.com/dir/", "https://example.com/dir//",
        "https://example.com/a%20b.bin", "https://example.com/%2F", "https://example.com/a;p=1", "https://example.com/a/b;c/d",
        "https://example.com/ä/ö.bin", "https://example.com/..", "https://example.com/a/.", "https://example.com//x",
        "http://[::1]:8080/a/b.ts", "https://user:pw@example.com/x.bin", "ftp://example.com/pub/x.tar.gz", "file:///tmp/a b",
        "https://example.com/a%2Fb/c", "https://example.com/~user/x+y.bin", "https://example.com/a:b", "mailto:x@example.com",
        "data:text/plain,abc", "urn:isbn:123", "https://example.com/a?", "https://example.com/a#", "https://example.com/é%C3%A9",
    ]

    @Test func theLastPathComponentIsFoundations() throws {
        for text in Self.urls {
            let url = try #require(URL(string: text), "\(text)")
            #expect(ResponseNaming.lastPathComponent(of: url) == url.lastPathComponent, "\(text)")
        }
        let relative = URL(string: "b/c.bin", relativeTo: URL(string: "https://example.com/a/"))!
        #expect(ResponseNaming.lastPathComponent(of: relative) == relative.lastPathComponent)
        let file = URL(fileURLWithPath: "/tmp/dir name/x.bin")
        #expect(ResponseNaming.lastPathComponent(of: file) == file.lastPathComponent)
    }

    @Test func aNameComesFromTheURLsLastComponent() {
        #expect(ResponseNaming.fileName(url: URL(string: "https://example.com/d/a%20b.bin?x=1")!) == "a b.bin")
        #expect(ResponseNaming.fileName(url: URL(string: "https://example.com/d/x.iso")!) == "x.iso")
        #expect(ResponseNaming.fileName(url: URL(string: "https://example.com/d/")!) == "index.html")
        #expect(ResponseNaming.fileName(url: URL(string: "https://example.com")!) == "index.html")
    }
}
