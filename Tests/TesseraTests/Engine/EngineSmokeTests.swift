import Foundation
import Testing
import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct EngineSmokeTests {
    @Test func downloadsAFile() async throws {
        try await withLoopbackOrigin { origin in
            let engine = try CurlEngine(configuration: .forTests())
            let directory = TemporaryDirectory()
            defer { directory.cleanUp() }
            let path = "/bytes/1000000/a.bin"
            let result = try await engine.transfer(.download(origin.url(path), to: directory.file("a.bin")))
            #expect(result.status == 200)
            #expect(result.bytesWritten == 1_000_000)
            #expect(await origin.content(at: path).verifyFile(atPath: directory.file("a.bin"), size: 1_000_000))
            await engine.shutdown()
        }
    }
}
