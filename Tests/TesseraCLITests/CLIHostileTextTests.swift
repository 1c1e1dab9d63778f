import Foundation
import Testing
import TesseraTesting

/// Text from the network (titles, file names, error pages, URL paths) never reaches the terminal
/// with a character that steers it: C0 and C1 controls, DEL, bidirectional formatting.
@Suite(.timeLimit(.minutes(3))) struct CLIHostileTextTests {
    /// What a terminal must never receive from us (line breaks are ours).
    static func unsafe(_ text: String) -> [Unicode.Scalar] {
        text.unicodeScalars.filter { scalar in
            guard scalar != "\n" else { return false }
            switch scalar.value {
            case 0..<0x20, 0x7F...0x9F, 0x200E, 0x200F, 0x061C, 0x202A...0x202E, 0x2066...0x2069: return true
            default: return false
            }
        }
    }

    static let title = "Bad\u{9B}31mTitle\u{202E}gpj.exe"

    /// Serves a DASH MPD with a hostile title, an error page full of escape sequences and a
    /// Metalink with a hostile file name; returns the inputs.
    func hostileInputs(_ origin: LoopbackOrigin) -> [String] {
        let mpd = """
            <?xml version="1.0" encoding="UTF-8"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT4S" profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">
              <ProgramInformation><Title>\(Self.title)</Title></ProgramInformation>
              <Period duration="PT4S">
                <AdaptationSet mimeType="video/mp4" contentType="video">
                  <Representation id="v1" bandwidth="100000" codecs="avc1.4d401f">
                    <BaseURL>v1.mp4</BaseURL>
                    <SegmentBase/>
                  </Representation>
                </AdaptationSet>
              </Period>
            </MPD>
            """
        origin.serve("/hostile/show.mpd", .text(mpd, contentType: "application/dash+xml"))
        origin.serve("/hostile/v1.mp4", .generated(size: 5000))
        origin.inject(.answer(status: 404, body: "\u{1B}[2J\u{1B}]0;owned\u{07}gone\u{9B}1m\u{202E}reversed\r\nnext"), at: "/hostile/gone.bin")
        let metalink = """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <file name="x&#x9B;31m&#x202E;.bin"><size>100</size><url>\(origin.url("/bytes/100/m.bin").absoluteString)</url></file>
              <file name="fine.bin"><size>200</size><url>\(origin.url("/bytes/200/fine.bin").absoluteString)</url></file>
            </metalink>
            """
        origin.serve("/hostile/files.meta4", .text(metalink, contentType: "application/metalink4+xml"))
        return [
            origin.url("/hostile/show.mpd").absoluteString,
            origin.url("/hostile/gone.bin").absoluteString,
            origin.url("/hostile/files.meta4").absoluteString,
            origin.url("/bytes/100/a%1B%5B31mred%C2%9B%E2%80%AE.bin").absoluteString,
        ]
    }

    @Test func nothingThatSteersATerminalIsPrinted() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let inputs = hostileInputs(origin)
            let result = try await cli.run(["get"] + inputs)
            #expect(result.status != 0, "the missing file and the refused name are failures")
            #expect(Self.unsafe(result.output).isEmpty, "stdout: \(result.output.debugDescription)")
            #expect(Self.unsafe(result.errors).isEmpty, "stderr: \(result.errors.debugDescription)")
            // The rest downloaded, under names without those characters.
            #expect(fileSize(cli.downloads + "/fine.bin") == 200)
            let names = (try? FileManager.default.subpathsOfDirectory(atPath: cli.downloads)) ?? []
            #expect(names.allSatisfy { Self.unsafe($0).isEmpty }, "\(names.map(\.debugDescription))")
            #expect(names.contains { $0.hasSuffix(".bin") && $0.hasPrefix("a_") }, "\(names)")
            // The error page is quoted, cleaned.
            #expect(result.errors.contains("404") || result.output.contains("404"))

            // The list of tasks says the same, cleaned.
            let list = try await cli.run(["list", "--state-dir", cli.state])
            #expect(Self.unsafe(list.output + list.errors).isEmpty, "\(list.output.debugDescription)")
        }
    }

    @Test func jsonKeepsTheTextButEscapesWhatATerminalWouldActOn() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let inputs = hostileInputs(origin)
            let result = try await cli.run(["get", "--json"] + inputs)
            #expect(Self.unsafe(result.output).isEmpty, "stdout: \(result.output.debugDescription)")
            #expect(Self.unsafe(result.errors).isEmpty, "stderr: \(result.errors.debugDescription)")
            // Still JSON, and a reader gets the title as the server wrote it.
            let lines = result.jsonLines
            #expect(!lines.isEmpty)
            #expect(lines.contains { $0["title"] as? String == Self.title }, "\(lines)")

            let resolved = try await cli.run(["resolve", "--json", inputs[0]])
            #expect(Self.unsafe(resolved.output).isEmpty)
            let entities = resolved.json?["entities"] as? [[String: Any]]
            #expect(entities?.first?["title"] as? String == Self.title)
            let plain = try await cli.run(["resolve", inputs[0]])
            #expect(Self.unsafe(plain.output + plain.errors).isEmpty, "\(plain.output.debugDescription)")
        }
    }
}
