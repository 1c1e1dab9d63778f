import Foundation
import Testing

@testable import Tessera

// MARK: - Test plugins

struct RegistryTestPlayurlPayload: Codable, Sendable, Hashable {
    var cid: Int
    var api: String?
    var qualities: [String]
    var nested: [String: Int]?
}

final class RegistryTestPlayurlGroup: DownloadTaskGroup, @unchecked Sendable {
    override class var groupType: String { "registry-test-playurl-group" }
}

/// A plugin entity with a payload, a variant, an aggregation key and its own group class.
final class RegistryTestPlayurlEntity: PayloadEntity<RegistryTestPlayurlPayload>, @unchecked Sendable {
    override class var entityType: String { "playurl" }
    override class var groupType: DownloadTaskGroup.Type { RegistryTestPlayurlGroup.self }

    static let matcher = EntityMatcher(plugin: "playurl", summary: "a cid", rules: [.scheme("playurl")]) { input, key in
        guard let cid = Int(key) else { throw DownloadError(.invalidRequest, "\(key) is not a cid") }
        return RegistryTestPlayurlEntity(
            payload: RegistryTestPlayurlPayload(cid: cid, api: input.arguments["playurl"]["api"], qualities: [input.format ?? "best"]),
            entityKey: key, variantKey: input.format ?? "", title: "cid \(key)", aggregationKey: "bv-\(key)",
            destinationDirectory: input.destinationDirectory)
    }
}

/// A plugin that accepts MPD URLs by pattern or by probed content type.
final class RegistryTestMPDEntity: DownloadBaseEntity, @unchecked Sendable {
    override class var entityType: String { "registry-test-mpd" }

    static func matcher(rules: [EntityMatcher.Rule], priority: Int = 100, plugin: String = "mpd") -> EntityMatcher {
        EntityMatcher(plugin: plugin, summary: "DASH manifests", priority: priority, rules: rules) { _, key in
            RegistryTestMPDEntity(entityKey: key, title: plugin)
        }
    }
}

struct RegistryTestPlainError: Error {}

/// Groups that do not name their type (``DownloadTaskGroup/groupType`` by default).
enum RegistryTestUnnamed {
    final class Group: DownloadTaskGroup, @unchecked Sendable {}
    final class Generic<Value>: DownloadTaskGroup, @unchecked Sendable {}
}

@Suite struct EntityRegistryTests {
    /// A type that does not name itself is named as `String(describing:)` names its class: the
    /// names are in stored task identities, so they never change.
    @Test func unnamedTypesAreNamedAsTheirClassesPrint() {
        #expect(RegistryTestUnnamed.Group.groupType == "Group")
        #expect(RegistryTestUnnamed.Generic<[Int?]>.groupType == "Generic<Array<Optional<Int>>>")
        for type in [RegistryTestUnnamed.Group.self, RegistryTestUnnamed.Generic<String>.self] as [DownloadTaskGroup.Type] {
            #expect(type.groupType == String(describing: type))
        }
    }

    // MARK: Builtins

    @Test(arguments: ["http://example.com/a.bin", "https://example.com/dir/file.iso?x=1", "HTTPS://EXAMPLE.COM/A"])
    func directEntityAcceptsHTTPAndHTTPS(_ text: String) throws {
        let registry = EntityRegistry()
        let entity = try registry.makeEntity(for: EntityInput(text, destinationDirectory: "sub"))
        let direct = try #require(entity as? DirectEntity)
        #expect(direct.payload.url.absoluteString == URL(string: text)!.absoluteString)
        #expect(direct.payload.fileName == nil)
        #expect(direct.entityKey == URL(string: text)!.absoluteString)
        #expect(direct.destinationDirectory == "sub")
        #expect(type(of: direct).entityType == "direct")
        let match = try #require(registry.match(EntityInput(text)))
        #expect(match.matcher.plugin == "direct")
        #expect(match.key == URL(string: text)!.absoluteString)
    }

    @Test(arguments: ["ftp://example.com/a.bin", "foo", "file:///etc/passwd", "http:nohost", "example.com/a.bin", ""])
    func directEntityRefusesOtherInputs(_ text: String) {
        let registry = EntityRegistry()
        #expect(registry.match(EntityInput(text)) == nil)
        let error = #expect(throws: DownloadError.self) { try registry.makeEntity(for: EntityInput(text)) }
        #expect(error?.code == .noMatchingEntity)
    }

    @Test func inputsAreTrimmedAsFoundationTrimsThem() {
        for text in [
            "", " ", "a", " a ", "\t\r\nhttps://x/a b\r\n", "\u{00A0}x\u{2028}", "\u{3000}x y\u{2029}\u{0085}", "é", "\r\n",
            " \u{200B}x\u{200B} ", "x\u{1680}", "https://example.com/a.bin", "~x~", "x\u{7f}", "\u{7f}x", "https://x/ \u{00A0}",
        ] {
            #expect(EntityInput.trimmed(text) == text.trimmingCharacters(in: .whitespacesAndNewlines), "\(Array(text.unicodeScalars))")
        }
    }

    @Test func aURLsExtensionIsReadFromItsEncodedPath() {
        let cases: [(String, String?)] = [
            ("https://example.com/a/b.m3u8?x=.mpd", "m3u8"), ("https://example.com/a.b/c", nil), ("https://example.com/a", nil),
            ("https://example.com/v.MPD", "MPD"), ("https://example.com/%C3%A9.mpd", "mpd"), ("https://example.com/x.%C3%A9", "%C3%A9"),
            ("https://example.com/a.", ""), ("https://example.com/", nil), ("https://example.com", nil), ("https://example.com/.hidden", "hidden"),
        ]
        for (text, expected) in cases {
            #expect(EntityMatcher.pathExtension(of: URL(string: text)!).map(String.init) == expected, "\(text)")
        }
    }

    @Test func withoutBuiltinsNothingMatches() {
        let registry = EntityRegistry(builtins: false)
        #expect(registry.entityTypeNames.isEmpty)
        #expect(registry.matchers.isEmpty)
        let error = #expect(throws: DownloadError.self) { try registry.makeEntity(for: EntityInput("https://x/a")) }
        #expect(error?.code == .noMatchingEntity)
    }

    @Test func builtinsAreListed() {
        let registry = EntityRegistry()
        #expect(registry.entityTypeNames == ["direct"])
        #expect(registry.entityType(named: "direct") == DirectEntity.self)
        #expect(registry.matchers.map(\.plugin) == ["direct"])
        #expect(registry.matchers.first?.priority == 0)
    }

    // MARK: Scheme plugins

    @Test func schemePluginGetsItsKey() throws {
        let registry = EntityRegistry()
        registry.register(RegistryTestPlayurlEntity.self, matchers: [RegistryTestPlayurlEntity.matcher])
        let match = try #require(registry.match(EntityInput("playurl:1001")))
        #expect(match.matcher.plugin == "playurl")
        #expect(match.key == "1001")
        let entity = try #require(try registry.makeEntity(for: EntityInput(" playurl:1001\n", format: "80")) as? RegistryTestPlayurlEntity)
        #expect(entity.entityKey == "1001")
        #expect(entity.variantKey == "80")
        #expect(entity.payload.cid == 1001)
        #expect(entity.taskID == DownloadTaskID(entityType: "playurl", entityKey: "1001", variantKey: "80"))
        #expect(registry.entityTypeNames == ["direct", "playurl"])
    }

    @Test func schemeMatchingIsCaseInsensitiveAndKeepsTheRestOfTheInput() throws {
        let registry = EntityRegistry()
        registry.register(RegistryTestPlayurlEntity.self, matchers: [RegistryTestPlayurlEntity.matcher])
        #expect(registry.match(EntityInput("PlayURL:1001"))?.key == "1001")
        // Everything after the first colon is the key.
        #expect(registry.match(EntityInput("playurl:a:b"))?.key == "a:b")
    }

    @Test func aSchemeWithoutKeyIsNoMatch() {
        let registry = EntityRegistry()
        registry.register(RegistryTestPlayurlEntity.self, matchers: [RegistryTestPlayurlEntity.matcher])
        #expect(registry.match(EntityInput("playurl:")) == nil)
        let error = #expect(throws: DownloadError.self) { try registry.makeEntity(for: EntityInput("playurl:")) }
        #expect(error?.code == .noMatchingEntity)
    }

    @Test func anUnknownSchemeIsNamedInTheError() {
        let registry = EntityRegistry()
        registry.register(RegistryTestPlayurlEntity.self, matchers: [RegistryTestPlayurlEntity.matcher])
        let error = #expect(throws: DownloadError.self) { try registry.makeEntity(for: EntityInput("nope:1")) }
        #expect(error?.code == .noMatchingEntity)
        #expect(error?.message.contains("\"nope\"") == true, "\(String(describing: error))")
    }

    @Test func pluginSchemeIsOnlyForNonURLInputs() {
        #expect(EntityInput("playurl:1001").pluginScheme == "playurl")
        #expect(EntityInput("my-plugin_2:x").pluginScheme == "my-plugin_2")
        #expect(EntityInput("https://x/a").pluginScheme == nil)
        #expect(EntityInput("no colon").pluginScheme == nil)
        #expect(EntityInput(":x").pluginScheme == nil)
        #expect(EntityInput("a b:x").pluginScheme == nil)
        #expect(EntityInput("a.b:x").pluginScheme == nil)
    }

    @Test func entityInputRecognisesOnlyHTTPURLsWithHosts() {
        #expect(EntityInput("  https://x/a  ").url?.absoluteString == "https://x/a")
        #expect(EntityInput("  https://x/a  ").text == "https://x/a")
        #expect(EntityInput("http:nohost").url == nil)
        #expect(EntityInput("ftp://x/a").url == nil)
        #expect(EntityInput("playurl:1").url == nil)
    }

    @Test func aPluginErrorIsPassedOnOrWrapped() {
        let registry = EntityRegistry()
        registry.register(RegistryTestPlayurlEntity.self, matchers: [RegistryTestPlayurlEntity.matcher])
        // The matcher's own DownloadError goes through unchanged.
        let own = #expect(throws: DownloadError.self) { try registry.makeEntity(for: EntityInput("playurl:abc")) }
        #expect(own?.code == .invalidRequest)
        // Any other error becomes noMatchingEntity naming the plugin.
        registry.register(RegistryTestMPDEntity.self, matchers: [
            EntityMatcher(plugin: "grumpy", summary: "always refuses", rules: [.scheme("grumpy")]) { _, _ in throw RegistryTestPlainError() },
        ])
        let wrapped = #expect(throws: DownloadError.self) { try registry.makeEntity(for: EntityInput("grumpy:1")) }
        #expect(wrapped?.code == .noMatchingEntity)
        #expect(wrapped?.message.contains("grumpy") == true)
    }

    // MARK: Priorities and rules

    @Test func aPatternMatcherOutranksDirectEntity() throws {
        let registry = EntityRegistry()
        registry.register(RegistryTestMPDEntity.self, matchers: [RegistryTestMPDEntity.matcher(rules: [.urlPattern(#"\.mpd(\?|$)"#)])])
        #expect(registry.matchers.map(\.plugin) == ["mpd", "direct"])
        #expect(registry.match(EntityInput("https://x/a.mpd?t=1"))?.matcher.plugin == "mpd")
        #expect(registry.match(EntityInput("https://x/a.mpd?t=1"))?.key == "https://x/a.mpd?t=1")
        #expect(registry.match(EntityInput("https://x/a.mpd"))?.matcher.plugin == "mpd")
        #expect(registry.match(EntityInput("https://x/A.MPD"))?.matcher.plugin == "mpd")
        #expect(registry.match(EntityInput("https://x/a.mp4"))?.matcher.plugin == "direct")
        #expect(registry.match(EntityInput("https://x/a.mpdx"))?.matcher.plugin == "direct")
        #expect(try registry.makeEntity(for: EntityInput("https://x/a.mpd?t=1")) is RegistryTestMPDEntity)
        #expect(try registry.makeEntity(for: EntityInput("https://x/a.mp4")) is DirectEntity)
        // A pattern never matches a plugin input.
        #expect(registry.match(EntityInput("mpd:a.mpd")) == nil)
    }

    @Test func aPathExtensionRuleMatchesAsThePatternDid() throws {
        let registry = EntityRegistry()
        registry.register(RegistryTestMPDEntity.self, matchers: [RegistryTestMPDEntity.matcher(rules: [.pathExtensions(["mpd", "MPD2"])])])
        let pattern = EntityMatcher(plugin: "p", summary: "", rules: [.urlPattern(#"\.(mpd|mpd2)(\?|#|$)"#)]) { _, _ in
            DirectEntity(url: URL(string: "https://x/")!)
        }
        let urls = [
            "https://x/a.mpd", "https://x/a.mpd?t=1", "https://x/a.mpd#f", "https://x/A.MPD", "https://x/a.mpd2", "https://x/dir/a.Mpd2?x=.mp4",
            "https://x/a.mp4", "https://x/a.mpdx", "https://x/a.mpd/", "https://x/a.mpd/b", "https://x/mpd",
            "https://x/", "https://x", "https://x/a%2Empd",
        ]
        for url in urls {
            let input = EntityInput(url)
            let byRule = registry.match(input)?.matcher.plugin == "mpd"
            #expect(byRule == (pattern.key(for: input) != nil), "\(url)")
            if byRule { #expect(registry.match(input)?.key == url) }
        }
        #expect(registry.match(EntityInput("mpd:a.mpd")) == nil, "never a plugin input")
        // Where the pattern erred: a query that ends in `.mpd` does not make an MPD.
        #expect(pattern.key(for: EntityInput("https://x/a.mp4?f=.mpd")) != nil)
        #expect(registry.match(EntityInput("https://x/a.mp4?f=.mpd"))?.matcher.plugin == "direct")
    }

    @Test func aLowerPriorityThanDirectNeverWinsForURLs() {
        let registry = EntityRegistry()
        registry.register(RegistryTestMPDEntity.self, matchers: [RegistryTestMPDEntity.matcher(rules: [.anyURL], priority: -1, plugin: "last")])
        #expect(registry.matchers.map(\.plugin) == ["direct", "last"])
        #expect(registry.match(EntityInput("https://x/a.mpd"))?.matcher.plugin == "direct")
    }

    @Test func equalPrioritiesKeepRegistrationOrder() {
        let registry = EntityRegistry()
        registry.register(RegistryTestMPDEntity.self, matchers: [
            RegistryTestMPDEntity.matcher(rules: [.urlPattern("example")], priority: 50, plugin: "first"),
            RegistryTestMPDEntity.matcher(rules: [.anyURL], priority: 50, plugin: "second"),
        ])
        registry.register(RegistryTestPlayurlEntity.self, matchers: [
            RegistryTestMPDEntity.matcher(rules: [.anyURL], priority: 50, plugin: "third"),
            RegistryTestMPDEntity.matcher(rules: [.anyURL], priority: 70, plugin: "high"),
        ])
        #expect(registry.matchers.map(\.plugin) == ["high", "first", "second", "third", "direct"])
    }

    @Test func aContentTypeRuleNeedsTheProbedContentType() {
        let registry = EntityRegistry()
        registry.register(RegistryTestMPDEntity.self, matchers: [
            RegistryTestMPDEntity.matcher(rules: [.contentType(["application/dash+xml", "video/vnd.mpeg.dash.mpd"])], plugin: "mpd-type"),
        ])
        let url = "https://x/manifest"
        #expect(registry.match(EntityInput(url))?.matcher.plugin == "direct")
        #expect(registry.match(EntityInput(url, contentType: "application/dash+xml"))?.matcher.plugin == "mpd-type")
        #expect(registry.match(EntityInput(url, contentType: "application/dash+xml; charset=utf-8"))?.matcher.plugin == "mpd-type")
        #expect(registry.match(EntityInput(url, contentType: "  Application/DASH+XML ;charset=utf-8"))?.matcher.plugin == "mpd-type")
        #expect(registry.match(EntityInput(url, contentType: "video/vnd.mpeg.dash.mpd"))?.matcher.plugin == "mpd-type")
        #expect(registry.match(EntityInput(url, contentType: "text/html"))?.matcher.plugin == "direct")
        #expect(registry.match(EntityInput(url, contentType: "application/dash+xml-ish"))?.matcher.plugin == "direct")
        #expect(registry.match(EntityInput(url, contentType: "application/dash+xml"))?.key == url)
        // Not for plugin inputs, even with a content type.
        #expect(registry.match(EntityInput("mpd:1", contentType: "application/dash+xml")) == nil)
    }

    @Test func aMatcherWithSeveralRulesAcceptsAnyOfThem() {
        let registry = EntityRegistry()
        registry.register(RegistryTestMPDEntity.self, matchers: [
            RegistryTestMPDEntity.matcher(rules: [.scheme("dash"), .urlPattern(#"\.mpd$"#)], plugin: "dash"),
        ])
        #expect(registry.match(EntityInput("dash:abc"))?.key == "abc")
        #expect(registry.match(EntityInput("https://x/a.mpd"))?.matcher.plugin == "dash")
        #expect(registry.match(EntityInput("https://x/a.bin"))?.matcher.plugin == "direct")
    }

    // MARK: Plugin arguments

    @Test func pluginArgumentsKeepEverythingAfterTheFirstEquals() throws {
        var arguments = PluginArguments()
        try arguments.add("playurl:api=http://h/{cid}?q=1")
        try arguments.add("playurl:token=a=b==")
        try arguments.add("other:empty=")
        try arguments.add("playurl:api=http://h2/{cid}")  // the last one wins
        #expect(arguments["playurl"] == ["api": "http://h2/{cid}", "token": "a=b=="])
        #expect(arguments["other"] == ["empty": ""])
        #expect(arguments["missing"] == [:])
        #expect(arguments.values.keys.sorted() == ["other", "playurl"])
    }

    @Test func pluginArgumentsReachTheMatcher() throws {
        let registry = EntityRegistry()
        registry.register(RegistryTestPlayurlEntity.self, matchers: [RegistryTestPlayurlEntity.matcher])
        var arguments = PluginArguments()
        try arguments.add("playurl:api=http://h/{cid}?q=1")
        let entity = try #require(try registry.makeEntity(for: EntityInput("playurl:7", arguments: arguments)) as? RegistryTestPlayurlEntity)
        #expect(entity.payload.api == "http://h/{cid}?q=1")
    }

    @Test(arguments: ["playurl", "playurl:api", "api=x", ":api=x", "playurl:=x", "", "=:", "playurl:"])
    func malformedPluginArgumentsThrow(_ text: String) {
        var arguments = PluginArguments()
        let error = #expect(throws: DownloadError.self) { try arguments.add(text) }
        #expect(error?.code == .invalidRequest)
        #expect(arguments.values.isEmpty)
    }

    @Test func pluginArgumentsAreCodable() throws {
        var arguments = PluginArguments()
        try arguments.add("playurl:api=http://h/?a=b")
        let decoded = try JSONDecoder().decode(PluginArguments.self, from: JSONEncoder().encode(arguments))
        #expect(decoded == arguments)
    }

    // MARK: Records

    @Test func rebuildRoundTripsAPayloadEntity() throws {
        let registry = EntityRegistry()
        registry.register(RegistryTestPlayurlEntity.self, matchers: [RegistryTestPlayurlEntity.matcher])
        let original = RegistryTestPlayurlEntity(
            payload: RegistryTestPlayurlPayload(cid: 1001, api: "http://h/{cid}", qualities: ["80", "64"], nested: ["a": 1, "b": 2]),
            entityKey: "1001", variantKey: "80", title: "Episode «1»", aggregationKey: "bv-1",
            destinationDirectory: "shows/one")
        let record = try original.record()
        #expect(record.entityType == "playurl")
        #expect(record.groupType == "registry-test-playurl-group")
        #expect(record.taskID == original.taskID)

        // Through the store's encoding, too.
        let stored = try JSONDecoder().decode(EntityRecord.self, from: JSONEncoder().encode(record))
        #expect(stored == record)

        let rebuilt = try #require(try registry.rebuild(stored) as? RegistryTestPlayurlEntity)
        #expect(rebuilt.payload == original.payload)
        #expect(rebuilt.entityKey == "1001")
        #expect(rebuilt.variantKey == "80")
        #expect(rebuilt.title == "Episode «1»")
        #expect(rebuilt.aggregationKey == "bv-1")
        #expect(rebuilt.destinationDirectory == "shows/one")
        #expect(rebuilt.taskID == original.taskID)
        #expect(try rebuilt.record() == record)
        #expect(registry.groupType(named: record.groupType) == RegistryTestPlayurlGroup.self)
    }

    @Test func rebuildRoundTripsADirectEntity() throws {
        let registry = EntityRegistry()
        let original = DirectEntity(url: URL(string: "https://x/dir/a%20b.bin?x=1")!, fileName: "mine.bin", destinationDirectory: "d")
        let rebuilt = try #require(try registry.rebuild(try original.record()) as? DirectEntity)
        #expect(rebuilt.payload == original.payload)
        #expect(rebuilt.title == "mine.bin")
        #expect(rebuilt.destinationDirectory == "d")
        #expect(rebuilt.taskID == original.taskID)
    }

    @Test func rebuildOfAnUnregisteredTypeIsNoMatchingEntity() throws {
        let registry = EntityRegistry()
        let record = try RegistryTestPlayurlEntity(
            payload: RegistryTestPlayurlPayload(cid: 1, qualities: []), entityKey: "1").record()
        let error = #expect(throws: DownloadError.self) { try registry.rebuild(record) }
        #expect(error?.code == .noMatchingEntity)
        #expect(error?.message.contains("playurl") == true)
    }

    @Test(arguments: ["not json", "{}", #"{"cid":"one","qualities":[]}"#, "", #"{"cid":1}"#])
    func rebuildOfACorruptPayloadIsStoreFailure(_ payload: String) throws {
        let registry = EntityRegistry()
        registry.register(RegistryTestPlayurlEntity.self)
        var record = try RegistryTestPlayurlEntity(
            payload: RegistryTestPlayurlPayload(cid: 1, qualities: []), entityKey: "1").record()
        record.payload = Data(payload.utf8)
        let error = #expect(throws: DownloadError.self) { try registry.rebuild(record) }
        #expect(error?.code == .storeFailure, "\(String(describing: error))")
        #expect(error?.message.contains("playurl") == true)
    }

    @Test func aBaseEntityHasAnEmptyPayload() throws {
        let registry = EntityRegistry()
        registry.register(RegistryTestMPDEntity.self)
        let original = RegistryTestMPDEntity(entityKey: "https://x/a.mpd", variantKey: "v", aggregationKey: "g")
        let record = try original.record()
        #expect(record.payload == Data("{}".utf8))
        #expect(record.title == "https://x/a.mpd")
        #expect(record.groupType == DownloadTaskGroup.groupType)
        let rebuilt = try registry.rebuild(record)
        #expect(rebuilt is RegistryTestMPDEntity)
        #expect(rebuilt.taskID == original.taskID)
        #expect(rebuilt.aggregationKey == "g")
    }

    @Test func unknownGroupTypesFallBackToTheBaseGroup() {
        let registry = EntityRegistry()
        #expect(registry.groupType(named: "nobody") == DownloadTaskGroup.self)
        registry.register(group: RegistryTestPlayurlGroup.self)
        #expect(registry.groupType(named: "registry-test-playurl-group") == RegistryTestPlayurlGroup.self)
    }

    // MARK: Cache keys

    @Test func theDefaultCacheKey() throws {
        let entity = RegistryTestPlayurlEntity(payload: RegistryTestPlayurlPayload(cid: 1, qualities: []), entityKey: "1", variantKey: "80")
        let url = URL(string: "https://x/s.m4s")!
        let plain = SegmentLocation(outputIndex: 2, segmentIndex: 7, outputName: "v.mp4", segment: DownloadSegment(url: url))
        #expect(entity.cacheKey(for: plain) == "playurl/1/80/2/7")
        let digest = [UInt8](repeating: 0xAB, count: 32)
        let checked = SegmentLocation(
            outputIndex: 0, segmentIndex: 0, outputName: "v.mp4",
            segment: DownloadSegment(url: url, checksum: Checksum(.sha256, digest: digest)))
        #expect(entity.cacheKey(for: checked) == "sha256:" + String(repeating: "ab", count: 32))
        // Content-addressed: another entity shares the key.
        let other = DirectEntity(url: url)
        #expect(other.cacheKey(for: checked) == entity.cacheKey(for: checked))
        #expect(other.cacheKey(for: plain) != entity.cacheKey(for: plain))
    }
}

@Suite struct EntityRegistryTaskIDTests {
    @Test func descriptionForms() {
        #expect(DownloadTaskID(entityType: "playurl", entityKey: "1001").description == "playurl:1001")
        #expect(DownloadTaskID(entityType: "playurl", entityKey: "1001", variantKey: "80").description == "playurl:1001#80")
    }

    @Test(arguments: [
        DownloadTaskID(entityType: "playurl", entityKey: "1001"),
        DownloadTaskID(entityType: "playurl", entityKey: "1001", variantKey: "80"),
        DownloadTaskID(entityType: "direct", entityKey: "https://x/a.bin?q=1:2"),
        DownloadTaskID(entityType: "direct", entityKey: "https://x/a#frag", variantKey: "v"),
        DownloadTaskID(entityType: "t", entityKey: "k#a", variantKey: "b"),
        DownloadTaskID(entityType: "t", entityKey: "k", variantKey: "a b"),
    ])
    func parsesItsOwnDescription(_ id: DownloadTaskID) throws {
        #expect(DownloadTaskID(id.description) == id)
        let coded = try JSONDecoder().decode(DownloadTaskID.self, from: JSONEncoder().encode(id))
        #expect(coded == id)
    }

    /// The identity hashes its parts once; a part changed afterwards hashes it again, so that a
    /// changed identity is found as the one made with the same parts, and its JSON is the parts.
    @Test func aChangedPartHashesTheIdentityAgain() throws {
        var id = DownloadTaskID(entityType: "direct", entityKey: "https://x/a")
        let table = [DownloadTaskID(entityType: "hls", entityKey: "https://x/b", variantKey: "720p"): 1]
        #expect(table[id] == nil)
        id.entityType = "hls"
        id.entityKey = "https://x/b"
        id.variantKey = "720p"
        #expect(table[id] == 1)
        #expect(Set([id, DownloadTaskID("hls:https://x/b#720p")!]).count == 1)
        let json = try #require(String(data: JSONEncoder.sortedKeys.encode(id), encoding: .utf8))
        #expect(json == #"{"entityKey":"https:\/\/x\/b","entityType":"hls","variantKey":"720p"}"#)
        #expect(DownloadTaskID(entityType: "a", entityKey: "b") != DownloadTaskID(entityType: "a", entityKey: "b", variantKey: "c"))
    }

    @Test func parsing() {
        #expect(DownloadTaskID("direct:https://x/a") == DownloadTaskID(entityType: "direct", entityKey: "https://x/a"))
        #expect(DownloadTaskID("t:k#a#b") == DownloadTaskID(entityType: "t", entityKey: "k#a", variantKey: "b"))
        #expect(DownloadTaskID("t:k#") == DownloadTaskID(entityType: "t", entityKey: "k"))
    }

    @Test(arguments: ["", "nocolon", ":key", "type:", "type:#variant"])
    func refusesMalformedIDs(_ text: String) {
        #expect(DownloadTaskID(text) == nil)
    }

    @Test func aDirectEntityDropsTheFragmentSoItsIDRoundTrips() {
        // A fragment is never sent to a server; keeping it would make the ID's text form
        // (type:key#variant) ambiguous.
        let id = DirectEntity(url: URL(string: "https://x/a.bin#part2")!).taskID
        #expect(id.entityKey == "https://x/a.bin")
        #expect(id.variantKey == "")
        #expect(DownloadTaskID(id.description) == id)
    }

    @Test func sortsByDescription() {
        let ids = [
            DownloadTaskID(entityType: "b", entityKey: "1"), DownloadTaskID(entityType: "a", entityKey: "2"),
            DownloadTaskID(entityType: "a", entityKey: "1", variantKey: "z"), DownloadTaskID(entityType: "a", entityKey: "1"),
        ]
        #expect(ids.sorted().map(\.description) == ["a:1", "a:1#z", "a:2", "b:1"])
    }
}

private extension JSONEncoder {
    static var sortedKeys: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }
}
