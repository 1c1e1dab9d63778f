import Foundation
import Testing
import TesseraTesting

/// `-o TEMPLATE` names the files as yt-dlp's `-o` does; `-o DIR` is still the download
/// directory for one release, with a note saying so.
@Suite struct CLIOutputTemplateTests {
    @Test func aTemplateNamesEachTrackInTheDownloadDirectory() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let fixture = DASHFixture.install(on: origin)
            let result = try await cli.run(["get", "-o", "%(title)s/%(format_id)s.%(ext)s", fixture.inputs[0]])
            #expect(result.status == 0, "\(result.output) \(result.errors)")
            #expect(!result.errors.contains("note:"), "\(result.errors)")
            for track in fixture.tracks where track.isDefault {
                let ext = (track.file as NSString).pathExtension
                let path = cli.downloads + "/Tessera DASH fixture/\(track.id).\(ext)"
                #expect(fileSize(path) == track.size, "\(path)")
            }
            #expect(!FileManager.default.fileExists(atPath: cli.downloads + "/stream"), "the plugin's folder is not used")
        }
    }

    @Test func aTemplateThatLeavesTheDirectoryOrNamesNothingKnownIsRefused() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let unknown = try await cli.run(["get", "-o", "%(uploader)s.%(ext)s", "http://127.0.0.1:9/x.bin"])
        #expect(unknown.status == 2, "\(unknown.errors)")
        #expect(unknown.errors.contains("unknown field %(uploader)s"), "\(unknown.errors)")
        let outside = try await cli.run(["get", "-o", "../%(name)s.%(ext)s", "http://127.0.0.1:9/a.bin"])
        #expect(outside.status == 2, "\(outside.errors)")
        #expect(outside.errors.contains("inside the download directory"), "\(outside.errors)")
    }

    @Test func aDirectoryAfterOStillWorksWithANote() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let directory = cli.directory + "/elsewhere"
            let result = try await cli.run(["get", "-o", directory, origin.url("/bytes/1000/b.bin").absoluteString])
            #expect(result.status == 0, "\(result.errors)")
            #expect(fileSize(directory + "/b.bin") == 1000)
            #expect(result.errors.contains("note: -o"), "\(result.errors)")
        }
    }
}
