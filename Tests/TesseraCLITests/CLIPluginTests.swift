import Foundation
import Testing
import Tessera
import TesseraTesting

/// The bundled plugins through the command line, as a user meets them.
@Suite(.timeLimit(.minutes(3))) struct CLIPluginTests {
    enum Kind: String, CaseIterable, Sendable {
        case playurl, dash, metalink, hls

        func install(on origin: LoopbackOrigin) -> any OriginFixture {
            switch self {
            case .playurl: PlayurlFixture.install(on: origin)
            case .dash: DASHFixture.install(on: origin)
            case .metalink: MetalinkFixture.install(on: origin)
            case .hls: HLSFixture.install(on: origin)
            }
        }
    }

    static func pluginArguments(_ fixture: any OriginFixture) -> [String] {
        fixture.pluginArguments.flatMap { ["--plugin-arg", $0] }
    }

    @Test(arguments: Kind.allCases)
    func getDownloadsEveryKindByteForByte(kind: Kind) async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let fixture = kind.install(on: origin)
            let result = try await cli.run(["get"] + fixture.inputs + Self.pluginArguments(fixture))
            #expect(result.status == 0, "\(result.output)\n\(result.errors)")
            #expect(await fixture.verify(downloadRoot: cli.downloads) == [])
            #expect(result.errors.isEmpty, "\(result.errors)")
            // Not a terminal: one plain line per state change, ending with the completions.
            #expect(result.output.contains("completed"))
            #expect(!result.output.contains("\u{1B}["), "no terminal escapes when the output is not a terminal")
        }
    }

    @Test func resolveJSONFollowsTheSchemaAndMarksTheDefaultSelection() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let fixtures = Kind.allCases.map { $0.install(on: origin) }
            origin.serve("/broken/stream.mpd", .init(.data(Array(#"<MPD xmlns="urn:mpeg:dash:schema:mpd:2011"><Period>"#.utf8)), contentType: "application/dash+xml"))
            let broken = origin.url("/broken/stream.mpd").absoluteString
            let result = try await cli.run(
                ["resolve", "--json", "--proxy", ""] + fixtures.flatMap(\.inputs) + [broken] + fixtures.flatMap(Self.pluginArguments))
            #expect(result.status == 1, "one input is broken: \(result.errors)")
            let document = try JSONValue.parse(result.output)
            let schema = try JSONValue.parse(String(contentsOfFile: repositoryRoot + "/docs/resolve.schema.json", encoding: .utf8))
            #expect(SchemaValidator(root: schema).problems(document) == [])

            let entities = document["entities"]?.arrayValue ?? []
            func ofType(_ type: String) -> [JSONValue] { entities.filter { $0["type"]?.stringValue == type } }
            #expect(entities.compactMap { $0["type"]?.stringValue }.sorted() == ["dash", "hls", "metalink", "metalink", "metalink", "playurl", "playurl", "playurl"])
            // DASH: every representation listed, the best video and the best audio marked.
            let dash = try #require(ofType("dash").first)
            let marked = dash["outputs"]?.arrayValue.filter { $0["selected"] == .bool(true) }.compactMap { $0["name"]?.stringValue }
            #expect(marked == ["Tessera DASH fixture/v720.mp4", "Tessera DASH fixture/a128.m4a"])
            #expect((dash["outputs"]?.arrayValue.count ?? 0) == 4)
            // HLS: encrypted segments carry the key URL and IV.
            let hls = try #require(ofType("hls").first)
            let encrypted = hls["outputs"]?.arrayValue.flatMap { $0["segments"]?.arrayValue ?? [] }.filter { $0["encryption"] != nil } ?? []
            #expect(!encrypted.isEmpty)
            // Metalink: one entity per file, all in the document's group, with mirrors and checksums.
            let metalink = ofType("metalink")
            #expect(Set(metalink.compactMap { $0["group"]?.stringValue }).count == 1)
            #expect(metalink.allSatisfy { $0["outputs"]?.arrayValue.first?["checksum"] != nil })
            // Playurl: the group of the aid.
            let playurl = ofType("playurl")
            #expect(playurl.allSatisfy { $0["group"]?.stringValue == "aid:170001" })

            // The broken manifest: an error naming the input, and one line on standard error.
            let errors = document["errors"]?.arrayValue ?? []
            #expect(errors.count == 1)
            #expect(errors.first?["input"]?.stringValue == broken)
            #expect(errors.first?["code"]?.stringValue == "manifestInvalid")
            #expect(result.errors.split(separator: "\n").contains { $0.hasPrefix("tessera: \(broken):") })
        }
    }

    @Test func jsonEventLinesFollowTheirSchema() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let fixture = MetalinkFixture.install(on: origin)  // a group, a failing mirror, a corrupt piece: retries
            origin.inject(.status(404), at: "/gone.bin")
            let result = try await cli.run(
                ["get", "--json"] + fixture.inputs + [origin.url("/gone.bin").absoluteString, "nosuchplugin:1", "ftp://127.0.0.1/x"])
            #expect(result.status == 1)
            let schema = SchemaValidator(root: try JSONValue.parse(String(contentsOfFile: repositoryRoot + "/docs/events.schema.json", encoding: .utf8)))
            let lines = result.output.split(separator: "\n").map(String.init)
            #expect(lines.count > 10)
            var types: Set<String> = []
            for line in lines {
                let event = try JSONValue.parse(line)
                let type = try #require(event["type"]?.stringValue, "\(line)")
                types.insert(type)
                #expect(schema.problems(event) == [], "\(line)")
                #expect(schema.problems(event, definition: type) == [], "\(line)")
            }
            #expect(types.isSuperset(of: ["task_added", "task_state", "task_error", "group", "input_error", "summary"]), "\(types)")
            let summary = try JSONValue.parse(try #require(lines.last))
            #expect(summary["type"]?.stringValue == "summary")
            #expect(summary["exitCode"]?.int == 1)
            #expect(summary["tasks"]?.arrayValue.count == 4)
            // A wrong line is caught: the schema is strict.
            #expect(!schema.problems(try JSONValue.parse(#"{"type":"task_removed","id":"x","extra":1}"#), definition: "task_removed").isEmpty)
        }
    }

    @Test func aManifestWithoutATellingNameIsKnownByItsContentTypeAndAFileIsNotProbed() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let fixture = DASHFixture.install(on: origin)
            // The same MPD at a path with no extension, as an API or a script serves it.
            let noName = fixture.mpdPath.replacingOccurrences(of: ".mpd", with: "")
            origin.serve(noName, .init(.data(Array(fixture.mpd.utf8)), contentType: "application/dash+xml; charset=utf-8"))
            let file = "/bytes/50000/data.iso"
            let result = try await cli.run(["get", origin.url(noName).absoluteString, origin.url(file).absoluteString])
            #expect(result.status == 0, "\(result.output) \(result.errors)")
            #expect(result.output.contains("completed dash:"), "\(result.output)")
            for track in fixture.tracks where track.isDefault {
                #expect(fileSize(cli.downloads + "/" + track.file) == track.size, "\(track.file)")
            }
            // A name that says "file": no probe of its Content-Type before the task starts, and
            // none by the plain-file entity either: one GET, nothing else.
            #expect(origin.requests(for: file).map(\.method) == ["GET"])
            #expect(fileSize(cli.downloads + "/data.iso") == 50_000)
        }
    }

    @Test func theSchemaValidatorRejectsWhatTheSchemaForbids() throws {
        let schema = try JSONValue.parse(String(contentsOfFile: repositoryRoot + "/docs/resolve.schema.json", encoding: .utf8))
        let validator = SchemaValidator(root: schema)
        let good = #"{"tessera":"1","errors":[],"entities":[{"input":"u","id":"direct:u#","type":"direct","key":"u","variant":"","title":"t","outputs":[{"name":"a","assembly":"concatenated","selected":true,"segments":[{"urls":["http://h/a"],"range":{"offset":0,"length":5}}]}]}]}"#
        #expect(validator.problems(try JSONValue.parse(good)) == [])
        let cases = [
            good.replacingOccurrences(of: #""urls":["http://h/a"],"#, with: ""),  // a segment without URLs
            good.replacingOccurrences(of: "http://h/a", with: "ftp://h/a"),  // a scheme that is not http(s)
            good.replacingOccurrences(of: #""selected":true"#, with: #""selected":1"#),  // not a boolean
            good.replacingOccurrences(of: #""assembly":"concatenated""#, with: #""assembly":"zip""#),  // not in the enum
            good.replacingOccurrences(of: #""title":"t""#, with: #""title":"t","surprise":1"#),  // an unknown member
            good.replacingOccurrences(of: #""offset":0"#, with: #""offset":-1"#),  // below the minimum
        ]
        for bad in cases {
            #expect(!validator.problems(try JSONValue.parse(bad)).isEmpty, "\(bad)")
        }
    }

    @Test func listShowsTasksAndTheirGroups() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let fixture = PlayurlFixture.install(on: origin)
            let get = try await cli.run(["get"] + fixture.inputs + Self.pluginArguments(fixture))
            #expect(get.status == 0, "\(get.errors)")

            let list = try await cli.run(["list", "--json", "--state-dir", cli.state])
            #expect(list.status == 0)
            let document = try JSONValue.parse(list.output)
            let tasks = document["tasks"]?.arrayValue ?? []
            #expect(tasks.count == 3)
            #expect(tasks.allSatisfy { $0["state"]?.stringValue == "completed" })
            #expect(tasks.allSatisfy { $0["group"]?.stringValue == "aid:170001" })
            let group = try #require(document["groups"]?.arrayValue.first)
            #expect(group["key"]?.stringValue == "aid:170001")
            #expect(group["children"]?.arrayValue.count == 3)
            let expectedBytes = fixture.videos.flatMap(\.parts).reduce(Int64(0)) { $0 + $1.size }
            #expect(group["bytesDone"]?.int == Int(expectedBytes))

            let text = try await cli.run(["list", "--state-dir", cli.state])
            #expect(text.status == 0)
            #expect(text.output.contains("group aid:170001: 3 of 3 completed"))
            #expect(text.output.split(separator: "\n").filter { $0.hasPrefix("completed") }.count == 3)

            let empty = try await cli.run(["list", "--state-dir", cli.directory + "/nothing-here"])
            #expect(empty.status == 0)
            #expect(empty.output.contains("No tasks"))
        }
    }

    @Test func aMalformedManifestIsOneLineNamingTheInputAndWhere() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            origin.serve("/bad/truncated.mpd", .init(.data(Array(#"<?xml version="1.0"?><MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static"><Period><AdaptationSet"#.utf8)), contentType: "application/dash+xml"))
            origin.serve("/bad/list.m3u8", .init(.data(Array("this is not a playlist\n".utf8)), contentType: "application/vnd.apple.mpegurl"))
            origin.serve("/bad/files.meta4", .init(.data(Array(#"<metalink xmlns="urn:example:not-metalink"><file name="a"/></metalink>"#.utf8)), contentType: "application/metalink4+xml"))
            for path in ["/bad/truncated.mpd", "/bad/list.m3u8", "/bad/files.meta4"] {
                let input = origin.url(path).absoluteString
                let result = try await cli.run(["get", input])
                #expect(result.status == 1, "\(path): \(result.output) \(result.errors)")
                let lines = (result.output + result.errors).split(separator: "\n").filter { $0.contains(input) && ($0.contains("invalid") || $0.contains("tessera:")) }
                #expect(!lines.isEmpty, "\(path): \(result.output) \(result.errors)")
                #expect(!result.errors.contains("Fatal error") && !result.errors.contains("Stack trace"))
                #expect(FileManager.default.enumerator(atPath: cli.downloads)?.allObjects.compactMap { $0 as? String }.filter { !$0.hasPrefix(".") }.isEmpty ?? true,
                    "nothing is left in the download directory")
            }
        }
    }

    @Test func aFailedChecksumIsReportedAndTheExitCodeIsOne() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let content = origin.content(at: "/bytes/4096/payload.bin").bytes(0..<4096)
            let wrong = String(repeating: "0", count: 64)
            let document = """
                <?xml version="1.0" encoding="UTF-8"?>
                <metalink xmlns="urn:ietf:params:xml:ns:metalink">
                  <file name="payload.bin">
                    <size>\(content.count)</size>
                    <hash type="sha-256">\(wrong)</hash>
                    <url>\(origin.url("/bytes/4096/payload.bin").absoluteString)</url>
                  </file>
                </metalink>
                """
            origin.serve("/files.meta4", .init(.data(Array(document.utf8)), contentType: "application/metalink4+xml"))
            let result = try await cli.run(["get", "--retries", "1", origin.url("/files.meta4").absoluteString])
            #expect(result.status == 1)
            #expect((result.output + result.errors).lowercased().contains("checksum"), "\(result.output) \(result.errors)")
        }
    }
}

/// The package's root directory (for the docs the tests check against).
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
