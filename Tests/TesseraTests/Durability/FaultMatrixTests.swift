import Foundation
import Testing
import TesseraTesting

@testable import Tessera

/// Each fault of a hostile or broken server against each kind of download: a small file (one
/// connection), a large one shared over several connections, a segmented manifest (the fault on
/// one of its segments) and a file of checksummed pieces with a mirror (as Metalink describes
/// one; the fault on the first request that meets it). Every cell ends either
/// completed with the origin's bytes exactly, or with the error that names the fault; a
/// completed file leaves no partial file and no work file behind.
@Suite(.timeLimit(.minutes(3))) struct FaultMatrixTests {
    enum Kind: String, CaseIterable, Sendable {
        /// 200 KB, one connection.
        case small
        /// 6 MB over up to 4 connections (split from the first response).
        case split
        /// A manifest of 6 segments of 200 KB, concatenated; the fault is on the third.
        case segments
        /// One file of 6 pieces of 200 KB (ranges of one resource, each with its SHA-256) and a
        /// mirror of the resource.
        case pieces

        var size: Int64 { self == .split ? 6_000_000 : 200_000 }
        /// Whether the download has a second URL for the resource that has the fault.
        var hasMirror: Bool { self == .segments || self == .pieces }
    }

    enum Fault: String, CaseIterable, Sendable {
        case dropOnce, status500Once, status503RetryAfterOnce, status429Once, wrongLengthOnce, stallOnce
        case contentChangesMidway, redirectLoop, redirectToFTP, missing
        /// The primary URL's host refuses every connection (nothing listens); a mirror works.
        case deadMirror

        /// The error a cell ends with, or `nil` when it completes.
        var expectedError: DownloadError.Code? {
            // (The pieces' mirror is the same path: a lasting fault is on both of its URLs.)
            switch self {
            case .redirectLoop: .tooManyRedirects
            case .redirectToFTP: .unsafeInput
            case .missing: .httpStatus
            default: nil
            }
        }
    }

    static let cells: [(Kind, Fault)] = Kind.allCases.flatMap { kind in
        Fault.allCases.filter { $0 != .deadMirror || kind.hasMirror }.map { (kind, $0) }
    }

    @Test(arguments: cells)
    func aFaultEndsCompleteOrWithItsError(kind: Kind, fault: Fault) async throws {
        var engine = CurlEngine.Configuration.forTests()
        engine.lowSpeedTime = .seconds(1)  // a stalled connection is given up within a second
        try await withManager(engine: engine, configure: { configuration in
            configuration.splitting = SplitPolicy(minimumSize: 1 << 20, pieceSize: 1 << 20, maxConnections: 4)
            configuration.retry.maxAttempts = 4
        }) { harness in
            let origin = harness.origin
            // Nothing listens on port 1: a host that refuses every connection.
            let dead = "http://127.0.0.1:1"
            let piecesPath = "/bytes/\(6 * kind.size)/pieces-\(fault).bin"
            let fixture: Fixture?
            switch kind {
            case .segments:
                fixture = harness.fixture("\(fault)", segments: 6, size: kind.size) { document in
                    if fault == .deadMirror {
                        let url = document.outputs[0].segments[2].urls[0]
                        document.outputs[0].segments[2].urls = [dead + URL(string: url)!.path, url]
                    }
                }
            case .pieces:
                let bytes = origin.content(at: piecesPath).bytes(0..<(6 * kind.size))
                fixture = harness.fixture("\(fault)") { document in
                    let primary = fault == .deadMirror ? dead + piecesPath : origin.url(piecesPath).absoluteString
                    // The mirror: the same resource (the origin's content ignores the query).
                    let mirror = origin.url(piecesPath).absoluteString + "?mirror=2"
                    document.outputs[0].assembly = "pieces"
                    document.outputs[0].sha256 = Checksum.compute(.sha256, bytes: bytes).hexDigest
                    document.outputs[0].segments = (0..<6).map { index in
                        let range = Int(Int64(index) * kind.size)..<Int(Int64(index + 1) * kind.size)
                        return FixtureDocument.Segment(
                            urls: [primary, mirror], size: kind.size, sha256: Checksum.compute(.sha256, bytes: bytes[range]).hexDigest,
                            offset: Int64(index) * kind.size, range: [Int64(index) * kind.size, kind.size])
                    }
                }
            case .small, .split:
                fixture = nil
            }
            let path = switch kind {
            case .segments: harness.segmentPath("\(fault)", 0, 2, size: kind.size)
            case .pieces: piecesPath
            case .small, .split: "/bytes/\(kind.size)/\(kind)-\(fault).bin"
            }
            switch fault {
            case .dropOnce: origin.inject(.dropConnection(afterBytes: kind.size / 3), at: path, times: 1)
            case .status500Once: origin.inject(.status(500), at: path, times: 1)
            case .status503RetryAfterOnce: origin.inject(.status(503, retryAfter: "1"), at: path, times: 1)
            case .status429Once: origin.inject(.status(429, retryAfter: "1"), at: path, times: 1)
            case .wrongLengthOnce: origin.inject(.wrongContentLength(delta: 1000), at: path, times: 1)
            case .stallOnce: origin.inject(.stall(.seconds(30), afterBytes: kind.size / 4), at: path, times: 1)
            case .contentChangesMidway: origin.inject(.throttle(bytesPerSecond: Int(kind.size)), at: path)
            case .redirectLoop: origin.inject(.redirect(to: path), at: path)
            case .redirectToFTP: origin.inject(.redirect(to: "ftp://127.0.0.1/\(kind).bin"), at: path)
            case .missing: origin.inject(.status(404), at: path)
            case .deadMirror: break
            }
            let entity: DownloadBaseEntity = fixture?.entity ?? DirectEntity(url: origin.url(path))
            try await harness.manager.start(entity)
            if fault == .contentChangesMidway {
                // A new version once a part of the old one has arrived: the file is one version,
                // never the two spliced.
                #expect(await eventually(within: .seconds(20)) { origin.bytesServed(for: path) >= kind.size / 4 })
                origin.changeContent(at: path)
                origin.clearFaults(at: path)
            }
            let file = fixture.map { harness.outputPath($0.entity, 0) } ?? harness.root.file("\(kind)-\(fault).bin")
            let ended = try #require(await harness.waitFor(entity.taskID, timeout: .seconds(60)) { $0.state.isFinal })
            if let expected = fault.expectedError {
                #expect(ended.state == .invalid || ended.state == .failed, "\(ended.state)")
                #expect(ended.error?.code == expected, "\(String(describing: ended.error))")
                #expect(fileSize(file) == nil, "no output for a download that failed")
                return
            }
            if kind == .pieces, fault == .contentChangesMidway, ended.state == .invalid {
                // The pieces' hashes are the old version's: a piece whose request started after
                // the change gets the new bytes, which cannot match. (All six usually start at
                // once, before the change, and complete; on a loaded machine some do not.)
                #expect(ended.error?.code == .checksumMismatch, "\(String(describing: ended.error))")
                #expect(fileSize(file) == nil, "no output for a download that failed")
                return
            }
            #expect(ended.state == .completed, "\(String(describing: ended.error))")
            // One version, whole: the current one, or (a connection that was already sending
            // when the content changed) the one before; never the two spliced.
            let offset: Int64? = kind == .segments ? 2 * kind.size : nil  // (nil: the whole file, nothing after)
            let size = kind == .pieces ? 6 * kind.size : kind.size
            let current = await origin.content(at: path).verifyFile(atPath: file, size: size, fileOffset: offset)
            let previous = fault == .contentChangesMidway
                ? await OriginContent(path: path, version: 0).verifyFile(atPath: file, size: size, fileOffset: offset) : false
            #expect(current || previous, "the file (the faulty segment's place in it) is one version of the origin's, whole")
            if kind == .segments {
                // The other segments, each in its place.
                for segment in [0, 1, 3, 4, 5] {
                    let other = harness.segmentPath("\(fault)", 0, segment, size: kind.size)
                    #expect(await origin.content(at: other).verifyFile(atPath: file, size: kind.size, fileOffset: Int64(segment) * kind.size))
                }
                #expect(fileSize(file) == 6 * kind.size)
            }
            // Nothing left behind: no partial file, no work file of the task (a plain file's partial
            // file, its second name, goes once the store has the completion).
            var left: [String] = []
            let clean = await eventually {
                left = ((try? FileManager.default.subpathsOfDirectory(atPath: harness.root.path)) ?? []).filter {
                    $0.hasSuffix(".part") || $0.hasSuffix(".seg") || $0.hasPrefix(".tessera/work/")
                }
                return left.isEmpty
            }
            #expect(clean, "\(left)")
        }
    }
}
