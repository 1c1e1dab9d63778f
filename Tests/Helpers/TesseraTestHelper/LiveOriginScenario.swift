import Foundation
import Tessera
import TesseraTesting

/// `live-origin KEY=VALUE...`: a live stream on a loopback origin, on the real clock, for the
/// live benchmark (Benchmarks/live): prints `{"url": …, "total": …}` once it serves, serves
/// until standard input closes, then prints every segment request (path, segment index,
/// User-Agent) as one JSON object and exits.
///
/// Keys: `format` (hls, dash-number, dash-timeline), `media` (real: ffmpeg-made, or the bytes
/// per segment of generated content), `segments` (published in all), `segment-seconds`
/// (generated media), `window`, `ends` (1/0), `audio` (1: a separate audio track, HLS),
/// `keys` (rotate AES-128 keys every n segments, HLS), `discontinuity` (every n, HLS),
/// `dash-ending` (`static`, default, or `duration`).
func liveOriginScenario(_ arguments: [String]) async throws {
    var values: [String: String] = [:]
    for argument in arguments {
        let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { fail("live-origin takes KEY=VALUE arguments, not \(argument)") }
        values[parts[0]] = parts[1]
    }
    let format = values["format"] ?? "hls"
    let segments = Int(values["segments"] ?? "") ?? 60
    var options = LiveStreamFixture.Options()
    options.format = format == "dash-number" ? .dashNumber : format == "dash-timeline" ? .dashTimeline : .hls
    options.window = Int(values["window"] ?? "") ?? 6
    options.ends = values["ends"] != "0"
    options.keyRotationEvery = values["keys"].flatMap { Int($0) }
    options.discontinuityEvery = values["discontinuity"].flatMap { Int($0) }
    options.total = segments
    if values["dash-ending"] == "duration" { options.dashEnding = .announcesDuration }
    let media: LiveMedia
    var alternate: LiveMedia?
    if let bytes = values["media"].flatMap({ Int($0) }) {
        media = LiveMedia.generated(
            segments: segments, bytesPerSegment: bytes, segmentDuration: Double(values["segment-seconds"] ?? "") ?? 2,
            initSection: options.format != .hls)
    } else if options.format == .hls {
        media = try await LiveMedia.hls(segments: segments, separateAudio: values["audio"] == "1")
        if options.discontinuityEvery != nil {
            alternate = try await LiveMedia.hls(segments: segments, separateAudio: values["audio"] == "1", pattern: "smptebars")
        }
    } else {
        media = try await LiveMedia.dash(segments: segments)
    }
    let origin = try await LoopbackOrigin.start(threads: 2)
    let stream = LiveStreamFixture(media, alternate: alternate, options: options)
    let url = stream.install(on: origin)
    emit(["url": url.absoluteString, "total": stream.total, "segmentSeconds": media.segmentDuration])
    fflush(nil)
    // Serves until the benchmark closes our standard input.
    _ = try await onThread { FileHandle.standardInput.readDataToEndOfFile() }
    let requests: [[String: Any]] = origin.requests.compactMap { request in
        guard let (track, index) = stream.segment(atPath: request.path) else { return nil }
        return ["path": request.path, "track": track, "index": index, "agent": request.header("User-Agent") ?? ""]
    }
    let playlists = origin.requests.filter { $0.path.hasSuffix(".m3u8") || $0.path.hasSuffix(".mpd") }.map {
        ["path": $0.path, "agent": $0.header("User-Agent") ?? ""]
    }
    emit(["requests": requests, "manifests": playlists])
    try await origin.shutdown()
}
