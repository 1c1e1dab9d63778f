import Foundation
import Testing
@testable import Tessera

/// The scheduler's per-host key: `host:port`, the host lowercased, the port the scheme's when
/// the URL gives none.
@Suite struct HostKeyTests {
    @Test func aHostKeyIsTheLowercasedHostAndThePort() {
        let cases: [(String, String)] = [
            ("https://example.com/a", "example.com:443"), ("http://example.com/a", "example.com:80"),
            ("HTTPS://Example.COM/a", "example.com:443"), ("http://example.com:8080/", "example.com:8080"),
            ("http://[::1]:18080/x", "\(URL(string: "http://[::1]:18080/x")!.host!):18080"), ("http://127.0.0.1/", "127.0.0.1:80"),
            ("https://xn--bcher-kva.example/", "xn--bcher-kva.example:443"), ("HtTpS://a.b:443/", "a.b:443"),
            ("ftp://example.com/", "example.com:80"),
        ]
        for (text, key) in cases {
            let url = URL(string: text)!
            #expect(TaskRun.hostKey(url) == key, "\(text)")
            // The same as the formula it replaced.
            #expect(TaskRun.hostKey(url) == "\(url.host?.lowercased() ?? ""):\(url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80))")
        }
    }
}
