import Foundation
import Tessera

/// A Metalink 4 document (RFC 5854) with three files, served by a ``LoopbackOrigin`` with faults
/// to recover from:
///
/// | file | size | what it shows |
/// |---|---|---|
/// | `metalink-release.tar` | 300,000 | whole-file SHA-256; its first mirror always answers `500` |
/// | `metalink-extras/archive.bin` | 600,000 | a sub-directory; 10 pieces of 64 KiB with SHA-256 each; its first mirror serves piece 5 (index 4) corrupted, so that piece is fetched again from the second |
/// | `metalink-notes.txt` | 100,000 | 4 pieces of 32 KiB; mirrors listed out of priority order, one as a relative URL; an ftp mirror and a torrent to skip |
///
/// Every file also has its whole-file SHA-256. Both mirrors of a file serve the same bytes
/// (except the corrupted piece): those of ``File/content``, generated with ``OriginContent``.
///
/// ```swift
/// let fixture = MetalinkFixture.install(on: origin)
/// // download fixture.inputs with MetalinkEntity into root, then:
/// let problems = await fixture.verify(downloadRoot: root)
/// ```
public struct MetalinkFixture: OriginFixture {
    /// One file of the document.
    public struct File: Sendable, Hashable {
        /// The `name` in the document, and the output's path relative to the download root.
        public var name: String
        /// Its size.
        public var size: Int64
        /// The bytes a correct download has (its first ``size`` bytes).
        public var content: OriginContent
        /// The origin paths of its mirrors, in priority order (first tried first).
        public var mirrorPaths: [String]
        /// The piece length, when the document lists piece hashes.
        public var pieceLength: Int64?
        /// The whole-file SHA-256.
        public var sha256: Checksum

        /// The number of pieces (`nil` without piece hashes).
        public var pieceCount: Int? { pieceLength.map { Int((size + $0 - 1) / $0) } }
    }

    /// The origin path of the document.
    public let metalinkPath: String
    /// The document's URL.
    public let metalinkURL: URL
    /// The document as served.
    public let document: String
    /// The three files, in document order.
    public let files: [File]
    /// The mirror of `metalink-release.tar` that always answers `500` (tried first).
    public let failingMirrorPath: String
    /// The mirror of `metalink-extras/archive.bin` that serves piece ``corruptPieceIndex`` with
    /// wrong bytes (tried first).
    public let corruptMirrorPath: String
    /// The mirror that serves `metalink-extras/archive.bin` intact (tried second).
    public let repairMirrorPath: String
    /// The index of the corrupted piece of `metalink-extras/archive.bin`.
    public let corruptPieceIndex: Int

    /// The document's URL.
    public var inputs: [String] { [metalinkURL.absoluteString] }

    /// The three files' names (the entities' destination directory is the download root).
    public var expectedFiles: [String] { files.map(\.name) }

    /// Missing files, wrong sizes and wrong bytes under `downloadRoot`.
    public func verify(downloadRoot: String) async -> [String] {
        var problems: [String] = []
        for file in files {
            if let problem = await Self.problem(with: file.name, under: downloadRoot, size: file.size, content: file.content) {
                problems.append(problem)
            }
        }
        return problems
    }

    /// Serves the document at `<prefix>/release.meta4` (as `application/metalink4+xml`) and its
    /// files' mirrors at `<prefix>/mirror-a/<name>` and `<prefix>/mirror-b/<name>`, with the
    /// faults described above.
    public static func install(on origin: LoopbackOrigin, prefix: String = "/metalink") -> MetalinkFixture {
        func file(_ name: String, size: Int64, pieceLength: Int64?) -> File {
            let content = OriginContent(path: "\(prefix)/content/\(name)")
            return File(
                name: name, size: size, content: content,
                mirrorPaths: ["\(prefix)/mirror-a/\(name)", "\(prefix)/mirror-b/\(name)"], pieceLength: pieceLength,
                sha256: Checksum.compute(.sha256, bytes: content.bytes(0..<size)))
        }
        let release = file("metalink-release.tar", size: 300_000, pieceLength: nil)
        let archive = file("metalink-extras/archive.bin", size: 600_000, pieceLength: 65_536)
        let notes = file("metalink-notes.txt", size: 100_000, pieceLength: 32_768)
        let files = [release, archive, notes]
        let corruptPiece = 4

        for file in files {
            let bytes = file.content.bytes(0..<file.size)
            for path in file.mirrorPaths { origin.serve(path, .bytes(bytes)) }
        }
        // archive.bin's first mirror has a bad copy of one piece.
        var corrupted = archive.content.bytes(0..<archive.size)
        let start = corruptPiece * Int(archive.pieceLength!)
        for index in start..<(start + Int(archive.pieceLength!)) where index % 1_000 == 0 { corrupted[index] ^= 0xA5 }
        origin.serve(archive.mirrorPaths[0], .bytes(corrupted))
        // release.tar's first mirror is broken.
        origin.inject(.status(500), at: release.mirrorPaths[0], times: nil)

        let path = "\(prefix)/release.meta4"
        let url = origin.url(path)
        func pieces(_ file: File) -> String {
            guard let length = file.pieceLength else { return "" }
            let bytes = file.content.bytes(0..<file.size)
            let hashes = stride(from: 0, to: Int(file.size), by: Int(length)).map { offset in
                let end = min(offset + Int(length), bytes.count)
                return "      <hash>\(Checksum.compute(.sha256, bytes: bytes[offset..<end]).hexDigest)</hash>"
            }
            return "    <pieces length=\"\(length)\" type=\"sha-256\">\n" + hashes.joined(separator: "\n") + "\n    </pieces>\n"
        }
        let base = "http://127.0.0.1:\(origin.port)"
        let document = """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <generator>TesseraTesting/MetalinkFixture</generator>
              <published>2024-05-01T12:00:00Z</published>
              <file name="\(release.name)">
                <size>\(release.size)</size>
                <identity>Tessera release</identity>
                <version>1.0</version>
                <description>A release tarball whose first mirror is broken.</description>
                <hash type="sha-256">\(release.sha256.hexDigest)</hash>
                <url location="de" priority="1">\(base)\(release.mirrorPaths[0])</url>
                <url location="fr" priority="2">\(base)\(release.mirrorPaths[1])</url>
              </file>
              <file name="\(archive.name)">
                <size>\(archive.size)</size>
                <hash type="sha-256">\(archive.sha256.hexDigest)</hash>
            \(pieces(archive))    <url priority="1">\(base)\(archive.mirrorPaths[0])</url>
                <url priority="2">\(base)\(archive.mirrorPaths[1])</url>
              </file>
              <file name="\(notes.name)">
                <size>\(notes.size)</size>
                <language>en</language>
                <hash type="sha-256">\(notes.sha256.hexDigest)</hash>
            \(pieces(notes))    <url priority="2">mirror-b/\(notes.name)</url>
                <url priority="1">\(base)\(notes.mirrorPaths[0])</url>
                <url priority="3">ftp://127.0.0.1\(notes.mirrorPaths[0])</url>
                <metaurl mediatype="torrent" priority="1">\(base)\(prefix)/notes.torrent</metaurl>
              </file>
            </metalink>

            """
        origin.serve(path, .text(document, contentType: "application/metalink4+xml"))
        return MetalinkFixture(
            metalinkPath: path, metalinkURL: url, document: document, files: files,
            failingMirrorPath: release.mirrorPaths[0], corruptMirrorPath: archive.mirrorPaths[0],
            repairMirrorPath: archive.mirrorPaths[1], corruptPieceIndex: corruptPiece)
    }
}
