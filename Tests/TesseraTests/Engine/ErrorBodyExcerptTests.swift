import Testing
@testable import Tessera

/// What an error's message quotes of an error page: its first line of text, short.
@Suite struct ErrorBodyExcerptTests {
    static let nginx = """
        <html>\r
        <head><title>404 Not Found</title></head>\r
        <body>\r
        <center><h1>404 Not Found</h1></center>\r
        <hr><center>nginx/1.22.1</center>\r
        </body>\r
        </html>\r

        """
    static let bucket = """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>403</title></head>
        <body><h2>Forbidden</h2><div>Access to this bucket is <em>denied</em>.</div></body></html>
        """

    @Test func theFirstLineOfTextThatSaysMoreThanTheStatus() {
        #expect(ErrorBodyExcerpt.line(Array(Self.nginx.utf8), status: 404, reason: "Not Found") == "nginx/1.22.1")
        #expect(ErrorBodyExcerpt.line(Array(Self.bucket.utf8), status: 403, reason: "Forbidden") == "Access to this bucket is denied.")
        #expect(ErrorBodyExcerpt.line(Array("quota exceeded\nretry tomorrow\n".utf8), status: 429, reason: nil) == "quota exceeded")
        #expect(ErrorBodyExcerpt.line(Array("".utf8), status: 500, reason: "Internal Server Error") == "")
    }

    @Test func scriptsStylesAndInlineTags() {
        let page = "<html><head><style>body { color: red }\n.x { }</style><script>var a = '<b>';\n</script></head>"
            + "<body><p>File <b>x.bin</b> is   not here</p></body></html>"
        #expect(ErrorBodyExcerpt.line(Array(page.utf8), status: 410, reason: "Gone") == "File x.bin is not here")
    }

    @Test func shortAndPrintable() {
        let long = String(repeating: "word ", count: 100)
        let excerpt = ErrorBodyExcerpt.line(Array(long.utf8), status: 500, reason: nil)
        #expect(excerpt.count == ErrorBodyExcerpt.limit + 1 && excerpt.hasSuffix("…"))
        let hostile = ErrorBodyExcerpt.line(Array("\u{1B}[2Jgone\u{9B}1m\u{202E}x".utf8), status: 404, reason: "Not Found")
        #expect(hostile == "?[2Jgone?1m?x")
    }
}
