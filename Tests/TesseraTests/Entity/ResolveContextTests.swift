import Foundation
import Testing
import TesseraTesting

@testable import Tessera

/// `ResolveContext.fetch`: the deadline for a whole document.
@Suite(.timeLimit(.minutes(1))) struct ResolveContextTests {
    @Test func aTricklingManifestFailsAtItsDeadline() async throws {
        try await withLoopbackOrigin { origin in
            let engine = try CurlEngine(configuration: .forTests())
            defer { Task { await engine.shutdown() } }
            // 200 bytes a second: fast enough for any low-speed limit, 100 s for the document.
            origin.serve("/slow.mpd", .text(String(repeating: "x", count: 20_000), contentType: "application/dash+xml"))
            origin.inject(.throttle(bytesPerSecond: 200), at: "/slow.mpd")
            let context = ResolveContext(engine: engine, documentTimeout: .seconds(1))
            let started = ContinuousClock.now
            let error = await #expect(throws: DownloadError.self) { try await context.fetch(origin.url("/slow.mpd")) }
            let elapsed = ContinuousClock.now - started
            #expect(error?.code == .timeout)
            #expect(error?.message.contains("did not arrive within") == true, "\(String(describing: error))")
            #expect(elapsed >= .milliseconds(900) && elapsed < .seconds(10), "\(elapsed)")
            // A document in time is fetched as before.
            origin.serve("/fast.mpd", .text("<MPD/>", contentType: "application/dash+xml"))
            let document = try await context.fetch(origin.url("/fast.mpd"))
            #expect(document.data == Data("<MPD/>".utf8))
        }
    }
}
