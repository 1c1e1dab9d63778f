import Foundation
import Tessera

/// Real media for tests, made by ffmpeg itself, and ffprobe's view of a file. Every tool runs
/// without a shell, on a thread of its own (the caller's task waits without blocking the
/// cooperative pool).
public enum MediaTools {
    /// ffmpeg on `PATH`, if any.
    public static let ffmpeg = MediaMerger.findFFmpeg()
    /// ffprobe on `PATH`, if any.
    public static let ffprobe = MediaMerger.findExecutable("ffprobe")
    /// Whether both are there (tests that need them are skipped otherwise).
    public static let available = ffmpeg != nil && ffprobe != nil

    /// What went wrong running a tool.
    public struct Failure: Error, CustomStringConvertible {
        /// The tool's exit status and the end of its standard error.
        public var description: String
    }

    /// Runs `executable` with `arguments` (standard input closed) to its end; returns its
    /// standard output. Throws unless it exits with status 0.
    @discardableResult
    public static func run(_ executable: String, _ arguments: [String]) async throws -> Data {
        let captured: SpawnedProcess.Captured
        do {
            captured = try await onThread { try SpawnedProcess.capture(executable, arguments) }
        } catch {
            throw Failure(description: "\(executable) did not start: \(error)")
        }
        guard let termination = captured.termination, termination == .exited(0) else {
            let text = String(decoding: captured.errors.suffix(2000), as: UTF8.self)
            throw Failure(
                description: "\((executable as NSString).lastPathComponent) \(arguments.joined(separator: " ")) exited with \(captured.termination?.status ?? -1): \(text)")
        }
        return Data(captured.output)
    }

    private static func tool(_ path: String?) throws -> String {
        guard let path else { throw Failure(description: "ffmpeg and ffprobe are needed (apt-get install ffmpeg)") }
        return path
    }

    /// A video-only file of `seconds` (160x120, 10 frames a second, H.264 when ffmpeg has
    /// libx264, MPEG-4 Part 2 otherwise), in the container `path`'s extension names.
    public static func makeVideo(at path: String, seconds: Int = 2, extraArguments: [String] = []) async throws {
        let codec = hasLibx264 ? ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"] : ["-c:v", "mpeg4"]
        try await run(try tool(ffmpeg), [
            "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi",
            "-i", "testsrc=duration=\(seconds):size=160x120:rate=10",
        ] + codec + ["-g", "10"] + extraArguments + [path])
    }

    /// An audio-only AAC file of `seconds` (a sine), in the container `path`'s extension names.
    public static func makeAudio(at path: String, seconds: Int = 2, extraArguments: [String] = []) async throws {
        try await run(try tool(ffmpeg), [
            "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=\(seconds)",
            "-c:a", "aac", "-b:a", "64k",
        ] + extraArguments + [path])
    }

    /// A file with video and audio of `seconds`.
    public static func makeMuxed(at path: String, seconds: Int = 1) async throws {
        let codec = hasLibx264 ? ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"] : ["-c:v", "mpeg4"]
        try await run(try tool(ffmpeg), [
            "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi",
            "-i", "testsrc=duration=\(seconds):size=160x120:rate=10", "-f", "lavfi", "-i", "sine=frequency=440:duration=\(seconds)",
        ] + codec + ["-c:a", "aac", "-b:a", "64k", "-shortest", path])
    }

    /// Whether ffmpeg has the libx264 encoder.
    public static let hasLibx264: Bool = {
        guard let ffmpeg, let captured = try? SpawnedProcess.capture(ffmpeg, ["-hide_banner", "-encoders"]) else { return false }
        let data = captured.output
        return String(decoding: data, as: UTF8.self).contains("libx264")
    }()

    /// Decodes every frame of every stream of `path` (ffmpeg into a null output, which must end
    /// well), then counts the video frames ffprobe decodes from its start to its end; returns
    /// that count (0 for a file without video). A file with a gap in its media decodes (as a
    /// player plays on), and its count shows what is there.
    @discardableResult
    public static func decode(_ path: String) async throws -> Int {
        try await run(try tool(ffmpeg), ["-nostdin", "-hide_banner", "-v", "error", "-i", path, "-f", "null", "-"])
        let data = try await run(try tool(ffprobe), [
            "-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path,
        ])
        // (MPEG-TS lists its streams under their program again: the first line counts.)
        let first = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first
        return first.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? 0
    }

    /// What ffprobe sees in a file.
    public struct Probe: Sendable, Equatable {
        /// The streams' types in order (`video`, `audio`, …).
        public var streams: [String]
        /// The container's duration in seconds.
        public var duration: Double
        /// ffprobe's name for the container (`mov,mp4,m4a,3gp,3g2,mj2`, `matroska,webm`, `flv`).
        public var format: String
    }

    /// ffprobe's view of `path`: its streams, duration and container.
    public static func probe(_ path: String) async throws -> Probe {
        let data = try await run(try tool(ffprobe), [
            "-v", "error", "-show_entries", "stream=codec_type", "-show_entries", "format=duration,format_name", "-of", "json", path,
        ])
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        let streams = (object["streams"] as? [[String: Any]] ?? []).compactMap { $0["codec_type"] as? String }
        let format = object["format"] as? [String: Any] ?? [:]
        return Probe(
            streams: streams, duration: Double(format["duration"] as? String ?? "") ?? 0, format: format["format_name"] as? String ?? "")
    }
}
