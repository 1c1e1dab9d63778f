import DASHEntity
import Foundation
import HLSEntity
import MetalinkEntity
import PlayurlEntity
import Tessera

/// Fuzzing harnesses for everything that reads what the network hands over: the MPD, M3U8,
/// Metalink and playurl parsers (through to the manifests they make and every segment's URLs),
/// the JSON reader, response naming (`Content-Disposition`) and the name and text sanitizers.
///
/// Built with `-sanitize=fuzzer,address -D FUZZING` (`make fuzz`), it is a libFuzzer binary:
/// `TESSERA_FUZZ_TARGET=<target>` picks the harness. Built as usual, it replays files:
/// `tessera-fuzz <target> FILE-OR-DIRECTORY...` runs each input once (the regression run of the
/// corpus and of every finding, in `make test`).
enum FuzzTarget: String, CaseIterable {
    case mpd, m3u8, metalink, playurl, json
    case naming
    case names

    /// Runs one input; any result is fine but a crash, a hang or a leak.
    func run(_ data: Data) {
        let url = URL(string: "http://127.0.0.1:8080/fuzz/dir/input?x=1")!
        switch self {
        case .mpd:
            guard let document = try? SafeXMLDocument.parse(data, baseURL: url) else { return }
            let entity = DASHEntity(url: url, format: .all)
            if let manifest = try? entity.manifest(from: document, url: url, maxSegments: 20_000) { exercise(manifest) }
        case .m3u8:
            guard let playlist = try? HLSPlaylist.parse(data, url: url, maxSegments: 20_000) else { return }
            if case .media(let media) = playlist {
                _ = media.duration
                if let segments = try? media.downloadSegments() { exercise(DownloadManifest(outputs: [DownloadOutput(name: "a.ts", segments: segments)])) }
                for segment in media.segments.prefix(64) { _ = segment.url }
            }
        case .metalink:
            // The stream must read what the tree reads: the same files, the same errors.
            let streamed = Self.metalinkReading(data, url: url, stream: true)
            precondition(streamed == Self.metalinkReading(data, url: url, stream: false), "the stream reads it differently")
            guard let document = try? MetalinkDocument.parse(data, url: url, maxFiles: 1_000) else { return }
            for index in document.entries.indices.prefix(64) {
                guard let file = try? document.file(at: index, maxPieces: 20_000) else { continue }
                if let manifest = try? MetalinkEntity.manifest(for: file, in: document, maxSegments: 20_000) { exercise(manifest) }
            }
        case .playurl:
            guard let entity = try? PlayurlEntity(cid: 1, aid: 2, api: "http://127.0.0.1:8080/playurl?cid={cid}&qn={quality}") else {
                preconditionFailure("the harness's own entity is refused")
            }
            if let manifest = try? entity.manifest(fromAnswer: data, url: url, maxSegments: 20_000) { exercise(manifest) }
        case .json:
            _ = try? JSONManifest.parse(data)
        case .naming:
            let text = String(decoding: data, as: UTF8.self)
            _ = ResponseNaming.fileName(url: url, headers: ["Content-Disposition": text])
            if let other = URL(string: text) { _ = ResponseNaming.fileName(url: other) }
        case .names:
            let text = String(decoding: data, as: UTF8.self)
            if let relative = try? SafePath.relative(text) { precondition(!relative.hasPrefix("/") && !relative.split(separator: "/").contains("..")) }
            let sanitized = SafePath.sanitizedFileName(text)
            precondition(!sanitized.contains("/") && !sanitized.isEmpty)
            precondition(SafePath.fitted(text, reserving: 8).utf8.count <= 255)
            let printable = UntrustedText.printable(text)
            precondition(!printable.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
        }
    }

    /// A Metalink's files (each one's details or error), or the document's error, as text: read
    /// by MetalinkStreamReader (`stream`) or by MetalinkDocument.
    private static func metalinkReading(_ data: Data, url: URL, stream: Bool) -> [String] {
        func shown(_ error: DownloadError) -> String { "\(error.code): \(error.message) \(error.url ?? "")" }
        var reading: [String] = []
        do throws(DownloadError) {
            if stream {
                let reader = try MetalinkStreamReader(data: data, url: url, maxFiles: 1_000, maxPieces: 20_000)
                while let item = try reader.next() {
                    switch item.file {
                    case .success(let file): reading.append("\(item.entry) \(file)")
                    case .failure(let error): reading.append("\(item.entry) " + shown(error))
                    }
                }
            } else {
                let document = try MetalinkDocument.parse(data, url: url, maxFiles: 1_000)
                for (index, entry) in document.entries.enumerated() {
                    do throws(DownloadError) {
                        reading.append("\(entry) \(try document.file(at: index, maxPieces: 20_000))")
                    } catch {
                        reading.append("\(entry) " + shown(error))
                    }
                }
            }
        } catch {
            return [shown(error)]
        }
        return reading
    }

    /// Reads a manifest the way the manager does: validation, sizes, and every segment's URLs.
    private func exercise(_ manifest: DownloadManifest) {
        guard (try? manifest.validate(maxSegments: 20_000, includingUnselected: true)) != nil else { return }
        for output in manifest.outputs {
            _ = output.knownSize
            _ = output.segments.sizeSummary
            for segment in output.segments {
                precondition(!segment.urls.isEmpty, "a validated segment without URLs")
                for url in segment.urls { precondition((try? URLSafety.check(url)) != nil, "an unsafe URL passed validation: \(url)") }
            }
        }
        _ = try? JSONDecoder().decode(DownloadManifest.self, from: JSONEncoder().encode(manifest))
    }
}

#if FUZZING
/// The harness libFuzzer calls, for the target named by `TESSERA_FUZZ_TARGET`.
private let fuzzTarget: FuzzTarget = {
    guard let name = ProcessInfo.processInfo.environment["TESSERA_FUZZ_TARGET"], let target = FuzzTarget(rawValue: name) else {
        fatalError("set TESSERA_FUZZ_TARGET to one of \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))")
    }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> Int32 {
    fuzzTarget.run(Data(bytes: bytes, count: count))
    return 0
}

/// libFuzzer's driver (SwiftPM names an executable's entry point itself, so libFuzzer's own
/// `main` is not the one that runs).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> Int32
) -> Int32

@main struct FuzzDriver {
    static func main() {
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { bytes, count in fuzzOneInput(bytes, count) })
    }
}
#else
/// Replays inputs: `tessera-fuzz TARGET FILE-OR-DIRECTORY...`.
@main struct FuzzReplay {
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name) else {
            FileHandle.standardError.write(Data("usage: tessera-fuzz \(FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")) FILE-OR-DIRECTORY...\n".utf8))
            exit(2)
        }
        var count = 0
        for path in arguments.dropFirst() {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            let files = isDirectory.boolValue
                ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { path + "/" + $0 } : [path]
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                target.run(data)
                count += 1
            }
        }
        print("\(target.rawValue): \(count) inputs")
    }
}
#endif
