import Foundation
import PlayurlEntity
import Tessera
import Testing
import TesseraTestSupport

/// `playurl:<cid>` and `playurl:<aid>/<cid>` inputs, plugin arguments, and the stored payload.
@Suite struct PlayurlInputTests {
    let registry: EntityRegistry = {
        let registry = EntityRegistry()
        PlayurlEntity.register(in: registry)
        return registry
    }()

    func entity(_ text: String, _ arguments: [String] = ["playurl:api=\(exampleAPI)"], format: String? = nil, directory: String = "")
        throws -> PlayurlEntity
    {
        let made = try registry.makeEntity(for: EntityInput(text, arguments: try pluginArguments(arguments), format: format, destinationDirectory: directory))
        return try #require(made as? PlayurlEntity)
    }

    @Test func registrationNamesTheTypeAndTheScheme() {
        #expect(PlayurlEntity.entityType == "playurl")
        #expect(registry.entityTypeNames.contains("playurl"))
        #expect(registry.entityType(named: "playurl") == PlayurlEntity.self)
        #expect(PlayurlEntity.matchers.map(\.plugin) == ["playurl"])
        #expect(registry.match(EntityInput("playurl:1001"))?.key == "1001")
        // http(s) URLs are not the plugin's: they go to DirectEntity.
        #expect(registry.match(EntityInput("https://www.example.com/playurl:1001"))?.matcher.plugin == "direct")
        #expect(registry.match(EntityInput("other:1001")) == nil)
    }

    @Test func aCidIsTheKeyAndTheQualityTheVariant() throws {
        let cid = try entity("playurl:1001")
        #expect(cid.entityKey == "cid:1001")
        #expect(cid.variantKey == "80")
        #expect(cid.aggregationKey == nil)
        #expect(cid.title == "cid 1001")
        #expect(cid.taskID.description == "playurl:cid:1001#80")
        #expect(cid.payload == PlayurlPayload(cid: 1001, aid: nil, quality: 80, api: exampleAPI))
        let grouped = try entity("playurl:170001/1001", directory: "videos")
        #expect(grouped.entityKey == "cid:1001")
        #expect(grouped.aggregationKey == "aid:170001")
        #expect(grouped.title == "aid 170001 cid 1001")
        #expect(grouped.destinationDirectory == "videos")
        #expect(grouped.payload.aid == 170_001)
        // Leading zeros name the same cid, so the same task.
        #expect(try entity("playurl:000170001/001001").taskID == grouped.taskID)
        #expect(try entity("PLAYURL:1001").entityKey == "cid:1001")
    }

    @Test func theQualityComesFromTheFormatThenThePluginArgumentThenEighty() throws {
        let api = "playurl:api=\(exampleAPI)"
        #expect(try entity("playurl:1001", [api, "playurl:quality=64"]).variantKey == "64")
        #expect(try entity("playurl:1001", [api, "playurl:quality=64"], format: "32").variantKey == "32")
        #expect(try entity("playurl:1001", [api, "playurl:quality=64"], format: "best").variantKey == "64")
        #expect(try entity("playurl:1001", [api], format: "best").variantKey == "80")
        #expect(try entity("playurl:1001", [api], format: "116").payload.quality == 116)
        for (format, argument) in [("worst", nil), ("all", nil), ("80+64", nil), ("720p", nil), (nil, "high"), (nil, "-1"), ("99999999999", nil)] as [(String?, String?)] {
            let arguments = [api] + (argument.map { ["playurl:quality=\($0)"] } ?? [])
            let error = downloadError { _ = try entity("playurl:1001", arguments, format: format) }
            #expect(error?.code == .invalidRequest, "\(String(describing: format)) \(String(describing: argument))")
            #expect(error?.message.contains("quality") == true)
        }
    }

    @Test func keysThatAreNotDecimalNumbersAreRefusedClearly() {
        for key in ["abc", "12a", "-1", "+5", "0", "0/1001", "1001/0", "1/2/3", "/1001", "1001/", "av170001/1001", "1001.5",
                    "99999999999999999999", "１００１", "1001 1002", "../1001", "1001/../../x", "1\u{0}"] {
            let error = downloadError { _ = try entity("playurl:\(key)") }
            #expect(error?.code == .invalidRequest, "\(key)")
            #expect(error?.message.contains("playurl:<cid> or playurl:<aid>/<cid>") == true, "\(key): \(error?.message ?? "")")
        }
    }

    @Test func withoutTheAPIArgumentTheErrorSaysWhatToPass() {
        let error = downloadError { _ = try entity("playurl:1001", []) }
        #expect(error?.code == .invalidRequest)
        #expect(error?.message.contains("--plugin-arg playurl:api=URL") == true)
        let empty = downloadError { _ = try entity("playurl:1001", ["playurl:api="]) }
        #expect(empty?.code == .invalidRequest)
        // Another plugin's api does not count.
        let other = downloadError { _ = try entity("playurl:1001", ["video:api=\(exampleAPI)"]) }
        #expect(other?.message.contains("--plugin-arg playurl:api=URL") == true)
    }

    @Test func theTemplateIsFilledAndChecked() throws {
        #expect(try entity("playurl:170001/1001").apiURL().absoluteString
            == "https://api.example.com/x/player/playurl?cid=1001&qn=80&avid=170001&fnval=0")
        #expect(try entity("playurl:1001", ["playurl:api=\(exampleAPI)", "playurl:quality=16"]).apiURL().absoluteString
            == "https://api.example.com/x/player/playurl?cid=1001&qn=16&avid=&fnval=0")
        #expect(try entity("playurl:1001", ["playurl:api=http://127.0.0.1:8080/api/{cid}.json"]).apiURL().absoluteString
            == "http://127.0.0.1:8080/api/1001.json")
        let noCid = downloadError { _ = try entity("playurl:1001", ["playurl:api=https://api.example.com/playurl?qn={quality}"]) }
        #expect(noCid?.code == .invalidRequest)
        #expect(noCid?.message.contains("{cid}") == true)
        let unknown = downloadError { _ = try entity("playurl:1001", ["playurl:api=https://api.example.com/{cid}?bvid={bvid}"]) }
        #expect(unknown?.code == .invalidRequest)
        #expect(unknown?.message.contains("{bvid}") == true)
        for scheme in ["file:///srv/{cid}.json", "ftp://example.com/{cid}", "javascript:{cid}"] {
            let error = downloadError { _ = try entity("playurl:1001", ["playurl:api=\(scheme)"]) }
            #expect(error?.code == .unsafeInput, "\(scheme): \(error?.message ?? "")")
        }
        let referer = downloadError { _ = try entity("playurl:1001", ["playurl:api=\(exampleAPI)", "playurl:referer=https://a\r\nX-Evil: 1"]) }
        #expect(referer?.code == .invalidRequest)
        #expect(try entity("playurl:1001", ["playurl:api=\(exampleAPI)", "playurl:referer=https://www.bilibili.com"]).payload.referer
            == "https://www.bilibili.com")
    }

    @Test func aStoredEntityComesBackWithItsTemplate() throws {
        let original = try entity("playurl:170001/1001", ["playurl:api=\(exampleAPI)", "playurl:quality=64", "playurl:referer=https://r.example.com"])
        let record = try original.record()
        #expect(record.entityType == "playurl")
        let rebuilt = try #require(try registry.rebuild(record) as? PlayurlEntity)
        #expect(rebuilt.taskID == original.taskID)
        #expect(rebuilt.payload == original.payload)
        #expect(rebuilt.aggregationKey == "aid:170001")
        #expect(rebuilt.title == original.title)
        #expect(try rebuilt.apiURL() == original.apiURL())
    }
}
