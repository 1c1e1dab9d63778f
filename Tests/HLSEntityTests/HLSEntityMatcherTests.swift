import Foundation
import HLSEntity
import Tessera
import Testing
import TesseraTestSupport

@Suite struct HLSEntityMatcherTests {
    private func registry() -> EntityRegistry {
        let registry = EntityRegistry()
        HLSEntity.register(in: registry)
        return registry
    }

    private func hls(_ input: EntityInput) throws -> HLSEntity {
        let entity = try registry().makeEntity(for: input)
        return try #require(entity as? HLSEntity, "\(input.text) made a \(type(of: entity))")
    }

    @Test func m3u8URLsBecomeHLSEntities() throws {
        let entity = try hls(EntityInput("https://cdn.example.com/show/master.m3u8"))
        #expect(HLSEntity.entityType == "hls")
        #expect(entity.entityKey == "https://cdn.example.com/show/master.m3u8")
        #expect(entity.variantKey == "best")
        #expect(entity.format == .best)
        #expect(entity.title == "master")
        #expect(entity.playlistName == "master")
        #expect(entity.taskID.description == "hls:https://cdn.example.com/show/master.m3u8#best")
        for text in [
            "https://cdn.example.com/show/master.m3u8?token=abc&exp=1", "http://cdn.example.com/LIVE/INDEX.M3U8",
            "https://cdn.example.com/a.m3u8#t=10",
        ] {
            _ = try hls(EntityInput(text))
        }
    }

    @Test func theFragmentIsNotPartOfTheKey() throws {
        let entity = try hls(EntityInput("https://cdn.example.com/a.m3u8#t=10"))
        #expect(entity.entityKey == "https://cdn.example.com/a.m3u8")
        #expect(entity.payload.url.absoluteString == "https://cdn.example.com/a.m3u8")
    }

    @Test func otherURLsAreNotHLS() throws {
        for text in ["https://cdn.example.com/a.m3u8.bak", "https://cdn.example.com/m3u8/video.mp4", "https://cdn.example.com/a.m3u"] {
            #expect(try registry().makeEntity(for: EntityInput(text)) is DirectEntity, "\(text)")
        }
        expectDownloadError(.noMatchingEntity) { _ = try registry().makeEntity(for: EntityInput("hls:something")) }
    }

    @Test(arguments: [
        "application/vnd.apple.mpegurl", "application/x-mpegURL", "audio/mpegurl", "audio/x-mpegurl",
        "application/vnd.apple.mpegurl; charset=utf-8",
    ])
    func probedContentTypesBecomeHLSEntities(contentType: String) throws {
        let entity = try hls(EntityInput("https://api.example.com/play?id=42", contentType: contentType))
        #expect(entity.entityKey == "https://api.example.com/play?id=42")
    }

    @Test func otherContentTypesAreNot() throws {
        #expect(try registry().makeEntity(for: EntityInput("https://api.example.com/play?id=42", contentType: "video/mp4")) is DirectEntity)
    }

    @Test func theFormatIsTheVariantKey() throws {
        #expect(try hls(EntityInput("https://x.example/a.m3u8", format: "worst")).variantKey == "worst")
        #expect(try hls(EntityInput("https://x.example/a.m3u8", format: "ALL")).variantKey == "all")
        let named = try hls(EntityInput("https://x.example/a.m3u8", format: "720p, English"))
        #expect(named.variantKey == "720p+English")
        #expect(named.format == .identifiers(["720p", "English"]))
        expectDownloadError(.invalidRequest) { _ = try registry().makeEntity(for: EntityInput("https://x.example/a.m3u8", format: "+")) }
    }

    @Test func theDestinationDirectoryIsKept() throws {
        #expect(try hls(EntityInput("https://x.example/a.m3u8", destinationDirectory: "tv/shows")).destinationDirectory == "tv/shows")
    }

    @Test func theStoredRecordRebuildsTheEntity() throws {
        let registry = registry()
        let entity = try hls(EntityInput("https://x.example/show/a.m3u8?sig=1", format: "720p+English", destinationDirectory: "d"))
        let rebuilt = try #require(try registry.rebuild(try entity.record()) as? HLSEntity)
        #expect(rebuilt.payload == entity.payload)
        #expect(rebuilt.taskID == entity.taskID)
        #expect(rebuilt.destinationDirectory == "d")
        #expect(rebuilt.format == .identifiers(["720p", "English"]))
    }

    @Test func theMatcherDescribesThePlugin() {
        #expect(HLSEntity.matchers.count == 1)
        #expect(HLSEntity.matchers[0].plugin == "hls")
        #expect(HLSEntity.matchers[0].rules.contains(.pathExtensions(["m3u8"])))
        #expect(HLSEntity.matchers[0].rules.contains(.contentType(HLSEntity.contentTypes)))
        #expect(registry().entityTypeNames.contains("hls"))
    }
}
