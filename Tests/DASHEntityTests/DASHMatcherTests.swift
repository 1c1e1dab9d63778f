import Foundation
import Tessera
import Testing

@testable import DASHEntity

/// Which inputs the plugin takes, and the entity's identity.
@Suite struct DASHMatcherTests {
    @Test(arguments: [
        "https://cdn.example.com/vod/stream.mpd", "http://cdn.example.com/a/B.MPD", "https://cdn.example.com/a.mpd?token=abc&x=1",
        "https://cdn.example.com/a.Mpd#t=10", "https://demo.unified-streaming.com/video/tos.ism/.mpd",
    ])
    func mpdURLsMatch(_ text: String) {
        #expect(DASHEntity.matcher.key(for: EntityInput(text)) == URL(string: text)!.absoluteString)
    }

    @Test(arguments: [
        "https://cdn.example.com/a.mpd.html", "https://cdn.example.com/mpd", "https://cdn.example.com/a.m3u8",
        "ftp://cdn.example.com/a.mpd", "file:///tmp/a.mpd", "dash:stream.mpd", "https://cdn.example.com/a_mpd",
    ])
    func otherInputsDoNotMatch(_ text: String) {
        #expect(DASHEntity.matcher.key(for: EntityInput(text)) == nil)
    }

    @Test func theDASHContentTypeMatchesAnyHTTPURL() {
        let url = "https://cdn.example.com/manifest?id=42"
        #expect(DASHEntity.matcher.key(for: EntityInput(url, contentType: "application/dash+xml; charset=utf-8")) == url)
        #expect(DASHEntity.matcher.key(for: EntityInput(url, contentType: "Application/DASH+XML")) == url)
        #expect(DASHEntity.matcher.key(for: EntityInput(url, contentType: "application/xml")) == nil)
        #expect(DASHEntity.matcher.key(for: EntityInput(url)) == nil)
    }

    @Test func theRegistryMakesAnEntityKeyedByURLAndFormat() throws {
        let registry = EntityRegistry()
        DASHEntity.register(in: registry)
        let entity = try registry.makeEntity(for: EntityInput("https://cdn.example.com/vod/stream.mpd#t=5", destinationDirectory: "films"))
        let dash = try #require(entity as? DASHEntity)
        #expect(DASHEntity.entityType == "dash")
        #expect(dash.entityKey == "https://cdn.example.com/vod/stream.mpd")
        #expect(dash.variantKey == "best")
        #expect(dash.payload == DASHPayload(url: URL(string: "https://cdn.example.com/vod/stream.mpd")!, format: .best))
        #expect(dash.destinationDirectory == "films")
        #expect(dash.outputDirectory == "stream")
        let chosen = try registry.makeEntity(for: EntityInput("https://cdn.example.com/vod/stream.mpd", format: "v720+a128"))
        #expect(chosen.variantKey == "v720+a128")
        #expect((chosen as? DASHEntity)?.payload.format == .identifiers(["v720", "a128"]))
        #expect(try registry.makeEntity(for: EntityInput("https://cdn.example.com/vod/stream.mpd", format: "worst")).variantKey == "worst")
    }

    @Test func thePayloadSurvivesARoundTrip() throws {
        let payload = DASHPayload(url: URL(string: "https://cdn.example.com/x.mpd")!, format: .identifiers(["a", "b"]))
        let data = try JSONEncoder().encode(payload)
        #expect(try JSONDecoder().decode(DASHPayload.self, from: data) == payload)
    }
}
