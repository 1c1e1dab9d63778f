import Foundation
import Testing

@testable import Tessera

/// `SafePath.relative`, `sanitizedFileName`, `join`.
@Suite struct SafePathTests {
    // MARK: relative

    @Test(arguments: [
        ("a", "a"),
        ("a/b/c", "a/b/c"),
        ("a//b/./c", "a/b/c"),
        ("./a", "a"),
        ("a/", "a"),
        ("a/./b/.", "a/b"),
        ("video/720p/seg-00001.m4s", "video/720p/seg-00001.m4s"),
        ("naïve file.txt", "naïve file.txt"),
        ("a~b/~c", "a~b/~c"),
        ("...", "..."),
        ("..a/b..", "..a/b.."),
        (String(repeating: "x", count: 255), String(repeating: "x", count: 255)),
    ])
    func acceptsAndNormalises(_ input: String, _ expected: String) throws {
        #expect(try SafePath.relative(input) == expected)
    }

    @Test(arguments: [
        "",
        "/abs",
        "/",
        "~/x",
        "~",
        "..",
        "../x",
        "a/../b",
        "a/..",
        "a\\b",
        "..\\x",
        "a\u{0}b",
        "a\nb",
        "a\rb",
        "a\tb",
        "a\u{7F}b",
        "a\u{9B}31mb",  // C1 CSI
        "a\u{85}b",  // C1 NEL
        "evil\u{202E}fdp.exe",  // right-to-left override
        "a\u{2066}b",  // left-to-right isolate
        ".tessera/work/x.part",
        "sub/.tessera/state",
        ".",
        "./.",
        "//",
        String(repeating: "x", count: 256),
        "ok/" + String(repeating: "é", count: 128),  // 256 bytes in UTF-8
    ])
    func refuses(_ input: String) {
        let error = #expect(throws: DownloadError.self) { try SafePath.relative(input) }
        #expect(error?.code == .unsafePath, "\(input.debugDescription) -> \(String(describing: error))")
    }

    @Test func refusalMessagesAreSafeToPrint() {
        let error = #expect(throws: DownloadError.self) { try SafePath.relative("evil\u{1B}[2J\nname") }
        #expect(error?.code == .unsafePath)
        #expect(error?.message.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F } == true)
    }

    @Test(arguments: [
        ("a.bin", true), ("A Z~!", true), (" ", true), ("", true), ("a/b", false), ("a\\b", false), ("a\u{7F}", false),
        ("\u{1F}a", false), ("é.bin", false), ("a\tb", false),
    ])
    func plainASCIINamesAreToldByTheirBytes(_ text: String, _ expected: Bool) {
        #expect(SafePath.isPlainASCII(text) == expected)
        // (The same answer for the bytes read one by one.)
        let plain: (UInt8) -> Bool = { byte in byte >= 0x20 && byte < 0x7F && byte != 0x2F && byte != 0x5C }
        let oneByOne: Bool = text.utf8.lazy.map { $0 }.allSatisfy(plain)
        #expect(oneByOne == expected)
    }

    // MARK: sanitizedFileName

    @Test(arguments: [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "_.._etc_passwd"),
        ("a/b", "a_b"),
        ("a\\b", "a_b"),
        ("a\u{0}b\nc\u{7F}d", "a_b_c_d"),
        ("a\u{9B}b\u{85}c", "a_b_c"),
        ("evil\u{202E}fdp.exe", "evil_fdp.exe"),
        (".hidden", "hidden"),
        ("...dots", "dots"),
        ("  spaced  ", "spaced"),
        ("naïve file.txt", "naïve file.txt"),
        ("", "download"),
        (".", "download"),
        ("..", "download"),
        ("   ", "download"),
    ])
    func sanitizes(_ input: String, _ expected: String) {
        let name = SafePath.sanitizedFileName(input)
        #expect(name == expected)
        #expect(isSingleSafeComponent(name), "\(name.debugDescription)")
    }

    @Test func sanitizedFallbackIsConfigurable() {
        #expect(SafePath.sanitizedFileName("", fallback: "index.html") == "index.html")
        #expect(SafePath.sanitizedFileName("..", fallback: "index.html") == "index.html")
    }

    @Test func sanitizedNamesAreCutTo255Bytes() {
        let ascii = SafePath.sanitizedFileName(String(repeating: "a", count: 1000))
        #expect(ascii.utf8.count == 255)
        let wide = SafePath.sanitizedFileName(String(repeating: "é", count: 200))  // 400 bytes
        #expect(wide.utf8.count <= 255)
        #expect(wide.utf8.count >= 253)
        #expect(wide.allSatisfy { $0 == "é" })
        #expect(isSingleSafeComponent(wide))
    }

    @Test func longNamesKeepTheirExtensionWhenCut() {
        let long = String(repeating: "a", count: 300) + ".mp4"
        let cut = SafePath.sanitizedFileName(long)
        #expect(cut.utf8.count == 255)
        #expect(cut.hasSuffix(".mp4"))
        // Room left for a suffix to come; a name that fits is left alone.
        #expect(SafePath.fitted(long, reserving: 5).utf8.count == 250)
        #expect(SafePath.fitted(long, reserving: 5).hasSuffix(".mp4"))
        #expect(SafePath.fitted("short.mp4", reserving: 5) == "short.mp4")
        // Cut on a character boundary: never half of a multi-byte character.
        let wide = String(repeating: "é", count: 200) + ".mkv"
        let fitted = SafePath.fitted(wide, reserving: 2)
        #expect(fitted.utf8.count <= 253)
        #expect(fitted.hasSuffix(".mkv"))
        #expect(fitted.dropLast(4).allSatisfy { $0 == "é" })
        // A long "extension" is not one: the end is cut.
        let odd = "x." + String(repeating: "y", count: 300)
        #expect(SafePath.fitted(odd).utf8.count == 255)
        #expect(SafePath.fitted(odd).hasPrefix("x."))
    }

    @Test func partAndNumberedNamesOfLongNamesFit() {
        let name = String(repeating: "n", count: 251) + ".bin"  // 255 bytes: legal
        let path = "/downloads/dir/" + name
        let part = FileLayout.partPath(path)
        #expect(part.hasPrefix("/downloads/dir/"))
        #expect(part.hasSuffix(".part"))
        let partName = String(part.split(separator: "/").last!)
        #expect(partName.utf8.count <= 255)
        // Two long names that differ only at the end get parts of their own.
        let other = String(repeating: "n", count: 250) + "m.bin"
        #expect(FileLayout.partPath("/downloads/dir/" + other) != part)
        #expect(FileLayout.partPath("/d/short.bin") == "/d/short.bin.part")
        let numbered = OutputClaims.numbered("dir/" + name, 12)
        #expect(numbered.hasPrefix("dir/"))
        #expect(numbered.hasSuffix(".12.bin"))
        #expect(numbered.split(separator: "/").last!.utf8.count <= 255)
        #expect(OutputClaims.numbered("a/b.c.mp4", 1) == "a/b.c.1.mp4")
        #expect(OutputClaims.numbered("noext", 2) == "noext.2")
    }

    /// Every output of `sanitizedFileName` must pass `relative` as one component and must not
    /// be a hidden file: the doc promises a single safe name.
    @Test(arguments: [
        ". .",
        ". ..",
        " .bashrc",
        " ../x",
    ])
    func sanitizedNamesNeverStartWithADotAfterTrimming(_ input: String) {
        let name = SafePath.sanitizedFileName(input)
        #expect(!name.hasPrefix("."), "\(input.debugDescription) -> \(name.debugDescription)")
        #expect(isSingleSafeComponent(name), "\(input.debugDescription) -> \(name.debugDescription)")
    }

    // MARK: join

    @Test func joins() {
        #expect(SafePath.join("/root", "a/b") == "/root/a/b")
        #expect(SafePath.join("/root/", "a") == "/root/a")
        #expect(SafePath.join("/root", "") == "/root")
        #expect(SafePath.join("", "a") == "a")
        #expect(SafePath.join("", "") == "")
    }

    func isSingleSafeComponent(_ name: String) -> Bool {
        guard let relative = try? SafePath.relative(name) else { return false }
        return relative == name && !name.contains("/")
    }
}

/// `URLSafety.check` and `URLSafety.resolve`.
@Suite struct SafePathURLSafetyTests {
    // MARK: check

    @Test(arguments: [
        "http://example.com/a.bin",
        "https://example.com/a.bin?x=1#f",
        "HTTPS://EXAMPLE.COM/A",
        "http://127.0.0.1:8080/x",
        "http://[::1]:8080/x",
        "http://user:pass@example.com/x",
    ])
    func checkAccepts(_ text: String) throws {
        try URLSafety.check(try #require(URL(string: text)))
    }

    @Test(arguments: [
        "ftp://example.com/a.bin",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "data:text/plain,hello",
        "gopher://example.com/",
        "mailto:a@example.com",
        "http:///nohost",
        "http:relative",
        "/just/a/path",
        "a.bin",
    ])
    func checkRefuses(_ text: String) throws {
        let url = try #require(URL(string: text))
        let error = #expect(throws: DownloadError.self) { try URLSafety.check(url) }
        #expect(error?.code == .unsafeInput, "\(text) -> \(String(describing: error))")
    }

    @Test(arguments: [
        ("http", true), ("https", true), ("HTTP", true), ("HtTpS", true), ("httpss", false), ("htt", false),
        ("", false), ("ftp", false), ("httpx", false), ("http\u{0}", false), ("hTtP\u{53}", true), ("h\u{54}tp", true),
        ("\u{48}ttp", true), ("http+", false), ("ht\u{D4}p", false),
    ])
    func theSchemeIsHTTPInAnyCase(_ scheme: String, _ expected: Bool) {
        #expect(URLSafety.isHTTPScheme(scheme) == expected)
        #expect(URLSafety.isHTTPScheme(scheme) == ["http", "https"].contains(scheme.lowercased()))
    }

    /// A host written with escapes is judged by what they decode to, as before: escapes that
    /// decode to nothing a host can be leave it without one.
    @Test func aHostIsJudgedByWhatItsEscapesDecodeTo() throws {
        for text in ["http://%41%42/x", "http://%FF/x", "http://%C3%28/x", "http://a%2Eb/x"] {
            guard let url = URL(string: text) else { continue }
            let decoded = url.host
            if let decoded, !decoded.isEmpty {
                try URLSafety.check(url)
            } else {
                let error = #expect(throws: DownloadError.self) { try URLSafety.check(url) }
                #expect(error?.message.contains("has no host") == true, "\(text)")
            }
        }
    }

    @Test func checkMentionsTheContext() throws {
        let error = #expect(throws: DownloadError.self) {
            try URLSafety.check(URL(string: "ftp://h/x")!, context: "segment 3 of \"a\"")
        }
        #expect(error?.message.contains("segment 3 of \"a\"") == true)
    }

    @Test func whiteSpaceAndControlCharactersNeverReachTheWire() throws {
        // This Foundation percent-encodes what URL(string:) is given, so a raw space or control
        // character cannot survive into `absoluteString`; whatever the URL is, `check` must
        // either refuse it or see it encoded.
        for text in ["http://h/a b", "http://h/a\tb", "http://h/a\u{7F}b", "http://h/a\nb", "http://h/a\u{1}b"] {
            guard let url = URL(string: text) else { continue }
            do {
                try URLSafety.check(url)
                #expect(!url.absoluteString.utf8.contains { $0 <= 0x20 || $0 == 0x7F }, "\(text.debugDescription)")
            } catch {
                #expect(error.code == .unsafeInput)
            }
        }
    }

    // MARK: resolve

    static let base = URL(string: "https://cdn.example.com/v/1/manifest.mpd?token=abc")!

    @Test(arguments: [
        ("seg/1.m4s", "https://cdn.example.com/v/1/seg/1.m4s"),
        ("../x", "https://cdn.example.com/v/x"),
        ("../../../../x", "https://cdn.example.com/x"),
        ("//cdn2.example.com/x", "https://cdn2.example.com/x"),
        ("/abs", "https://cdn.example.com/abs"),
        ("?q=1", "https://cdn.example.com/v/1/manifest.mpd?q=1"),
        ("http://other.example.com/y", "http://other.example.com/y"),
        ("  seg/2.m4s\n", "https://cdn.example.com/v/1/seg/2.m4s"),
    ])
    func resolvesRelativeReferences(_ reference: String, _ expected: String) throws {
        let url = try URLSafety.resolve(reference, against: Self.base)
        #expect(url.absoluteString == expected)
    }

    @Test func resolvesAbsoluteWithoutBase() throws {
        #expect(try URLSafety.resolve("https://h/x", against: nil).absoluteString == "https://h/x")
    }

    @Test(arguments: [
        "javascript:alert(1)",
        "file:///etc/passwd",
        "data:text/html,<script>alert(1)</script>",
        "ftp://cdn.example.com/x",
        "seg/\u{0}1.m4s",
        "seg/1\n.m4s",
        "seg/\u{7F}.m4s",
    ])
    func resolveRefusesHostileReferences(_ reference: String) {
        let error = #expect(throws: DownloadError.self) { try URLSafety.resolve(reference, against: Self.base) }
        #expect(error?.code == .unsafeInput, "\(reference.debugDescription) -> \(String(describing: error))")
    }

    @Test func resolveRefusesEmptyReferences() {
        for reference in ["", "   ", "\n"] {
            let error = #expect(throws: DownloadError.self) { try URLSafety.resolve(reference, against: Self.base) }
            #expect(error?.code == .manifestInvalid)
        }
    }

    @Test func resolveRefusesRelativeReferencesWithoutBase() {
        let error = #expect(throws: DownloadError.self) { try URLSafety.resolve("seg/1.m4s", against: nil) }
        #expect(error?.code == .unsafeInput || error?.code == .manifestInvalid)
    }

    @Test func joiningPutsOneSlashBetween() {
        #expect(SafePath.join("/a/b", "c/d.bin") == "/a/b/c/d.bin")
        #expect(SafePath.join("/a/b/", "c") == "/a/b/c")
        #expect(SafePath.join("", "c") == "c")
        #expect(SafePath.join("/a", "") == "/a")
        #expect(SafePath.join("/", "x") == "/x")
        #expect(SafePath.join("d", "é 😀.bin") == "d/é 😀.bin")
        let long = String(repeating: "ä", count: 300)
        #expect(SafePath.join(long, long) == long + "/" + long)
        // A bridged or substring-made string, not native UTF-8, joins the same.
        #expect(SafePath.join(String(Substring("dir/x").prefix(3)), "f") == "dir/f")
    }
}
