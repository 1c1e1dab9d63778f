import Foundation

/// An MPEG-DASH presentation on a ``LoopbackOrigin``: one MPD and every initialization and
/// media segment it names, at the exact templated paths.
///
/// The MPD (`<directory>/<name>.mpd`, `application/dash+xml`) has one 9-second period with
/// relative BaseURLs on two levels (`media/`, then `video/` or `audio/`):
/// - video, `SegmentTemplate` with a `SegmentTimeline` (`<S t="0" d="180000" r="3"/><S d="90000"/>`
///   at timescale 90000: five segments, `$RepresentationID$/seg-$Time$.m4s`), in two
///   representations, `v480` (800 kb/s) and `v720` (2.4 Mb/s);
/// - audio, `SegmentTemplate` with `@duration` (96000 at timescale 48000: ceil(4.5) = five
///   segments, `$RepresentationID$/$Number%05d$.m4s`), in two representations, `a64` and `a128`.
///
/// A default download (best video + best audio) leaves `<name>/v720.mp4` and `<name>/a128.m4a`,
/// each the initialization segment followed by the five media segments. Segment bytes are
/// generated (``OriginContent``) from their paths.
public struct DASHFixture: OriginFixture {
    /// One resource of a track: a path on the origin and its size.
    public struct Part: Sendable, Hashable {
        /// The path on the origin.
        public var path: String
        /// Its size in bytes.
        public var size: Int64
    }

    /// One representation and the file a download of it produces.
    public struct Track: Sendable, Hashable {
        /// The representation id.
        public var id: String
        /// The output file, relative to the download root.
        public var file: String
        /// Initialization segment, then media segments.
        public var parts: [Part]
        /// Whether the default selection (best video + best audio) downloads it.
        public var isDefault: Bool

        /// The size of the output file.
        public var size: Int64 { parts.reduce(0) { $0 + $1.size } }
    }

    /// The origin serving the stream.
    public let origin: LoopbackOrigin
    /// The MPD's path on the origin.
    public let mpdPath: String
    /// The MPD's text, as served.
    public let mpd: String
    /// Every representation, in the MPD's order.
    public let tracks: [Track]

    /// The MPD's URL.
    public var inputs: [String] { [origin.url(mpdPath).absoluteString] }

    /// The files of the default selection: `<folder>/v720.mp4` and `<folder>/a128.m4a`, the folder
    /// named by the MPD's title (or by its file name when it has none).
    public var expectedFiles: [String] { tracks.filter(\.isDefault).map(\.file) }

    /// The track of a representation id.
    public func track(_ id: String) -> Track? { tracks.first { $0.id == id } }

    /// Serves the MPD at `<directory>/<name>.mpd` and every segment under `<directory>/media/`.
    ///
    /// - Parameters:
    ///   - title: The MPD's `<Title>` (plain text), which names the outputs' folder; `nil` for
    ///     none, and the folder is `name`.
    ///   - destinationDirectory: The entity's destination directory the download uses
    ///     (relative to the download root; `""` for the root), which prefixes the expected files.
    public static func install(
        on origin: LoopbackOrigin, directory: String = "/dash/demo", name: String = "stream", title: String? = "Tessera DASH fixture",
        destinationDirectory: String = ""
    ) -> DASHFixture {
        let folder = title ?? name
        let directory = directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        let prefix = destinationDirectory.isEmpty ? "" : (destinationDirectory.hasSuffix("/") ? destinationDirectory : destinationDirectory + "/")
        let videoTimes: [Int64] = [0, 180_000, 360_000, 540_000, 720_000]
        let videoDurations: [Int64] = [180_000, 180_000, 180_000, 180_000, 90_000]
        struct Representation {
            var id: String, kind: String, ext: String, segmentBase: Int64, initSize: Int64, isDefault: Bool
        }
        let representations = [
            Representation(id: "v480", kind: "video", ext: "mp4", segmentBase: 60_000, initSize: 1_181, isDefault: false),
            Representation(id: "v720", kind: "video", ext: "mp4", segmentBase: 180_000, initSize: 1_297, isDefault: true),
            Representation(id: "a64", kind: "audio", ext: "m4a", segmentBase: 16_000, initSize: 611, isDefault: false),
            Representation(id: "a128", kind: "audio", ext: "m4a", segmentBase: 32_000, initSize: 643, isDefault: true),
        ]
        var tracks: [Track] = []
        for representation in representations {
            let base = "\(directory)/media/\(representation.kind)/\(representation.id)"
            var parts = [Part(path: "\(base)/init.mp4", size: representation.initSize)]
            for index in 0..<5 {
                let path: String
                let size: Int64
                if representation.kind == "video" {
                    path = "\(base)/seg-\(videoTimes[index]).m4s"
                    size = representation.segmentBase * videoDurations[index] / 180_000 + Int64(index) * 7_919
                } else {
                    path = "\(base)/\(String(repeating: "0", count: 4))\(index + 1).m4s"
                    size = representation.segmentBase + Int64(index) * 101
                }
                parts.append(Part(path: path, size: size))
            }
            tracks.append(Track(
                id: representation.id, file: "\(prefix)\(folder)/\(representation.id).\(representation.ext)", parts: parts,
                isDefault: representation.isDefault))
        }
        for track in tracks {
            for part in track.parts {
                let type = part.path.contains("/audio/") ? "audio/mp4" : "video/mp4"
                origin.serve(part.path, .generated(size: part.size, contentType: type))
            }
        }
        let mpd = """
            <?xml version="1.0" encoding="UTF-8"?>
            <MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT9S" minBufferTime="PT2S"
                 profiles="urn:mpeg:dash:profile:isoff-live:2011">
              \(title.map { "<ProgramInformation><Title>\($0)</Title></ProgramInformation>" } ?? "")
              <Period id="p0" start="PT0S" duration="PT9S">
                <BaseURL>media/</BaseURL>
                <AdaptationSet id="1" contentType="video" mimeType="video/mp4" segmentAlignment="true" startWithSAP="1">
                  <BaseURL>video/</BaseURL>
                  <SegmentTemplate timescale="90000" initialization="$RepresentationID$/init.mp4" media="$RepresentationID$/seg-$Time$.m4s">
                    <SegmentTimeline>
                      <S t="0" d="180000" r="3"/>
                      <S d="90000"/>
                    </SegmentTimeline>
                  </SegmentTemplate>
                  <Representation id="v480" bandwidth="800000" width="854" height="480" codecs="avc1.64001e" frameRate="25"/>
                  <Representation id="v720" bandwidth="2400000" width="1280" height="720" codecs="avc1.64001f" frameRate="25"/>
                </AdaptationSet>
                <AdaptationSet id="2" contentType="audio" mimeType="audio/mp4" lang="en" segmentAlignment="true">
                  <BaseURL>audio/</BaseURL>
                  <SegmentTemplate timescale="48000" duration="96000" startNumber="1"
                                   initialization="$RepresentationID$/init.mp4" media="$RepresentationID$/$Number%05d$.m4s"/>
                  <Representation id="a64" bandwidth="64000" codecs="mp4a.40.5" audioSamplingRate="48000"/>
                  <Representation id="a128" bandwidth="128000" codecs="mp4a.40.2" audioSamplingRate="48000"/>
                </AdaptationSet>
              </Period>
            </MPD>

            """
        let mpdPath = "\(directory)/\(name).mpd"
        origin.serve(mpdPath, .text(mpd, contentType: "application/dash+xml"))
        return DASHFixture(origin: origin, mpdPath: mpdPath, mpd: mpd, tracks: tracks)
    }

    /// The bytes a download of `track` must produce.
    public func expectedBytes(of track: Track) -> [UInt8] {
        track.parts.flatMap { origin.content(at: $0.path).bytes(0..<$0.size) }
    }

    /// Problems with the default selection's files under `downloadRoot`.
    public func verify(downloadRoot: String) async -> [String] {
        var problems: [String] = []
        for track in tracks where track.isDefault {
            problems += await verify(track, downloadRoot: downloadRoot)
        }
        return problems
    }

    /// Problems with one track's file under `downloadRoot`: missing, wrong size, or a part
    /// whose bytes differ.
    public func verify(_ track: Track, downloadRoot: String) async -> [String] {
        let path = (downloadRoot as NSString).appendingPathComponent(track.file)
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let size = (attributes[.size] as? NSNumber)?.int64Value
        else {
            return ["\(track.file): missing"]
        }
        guard size == track.size else {
            return ["\(track.file): \(size) bytes, expected \(track.size) (init + \(track.parts.count - 1) segments)"]
        }
        var problems: [String] = []
        var offset: Int64 = 0
        for part in track.parts {
            if !(await origin.content(at: part.path).verifyFile(atPath: path, size: part.size, fileOffset: offset)) {
                problems.append("\(track.file): bytes \(offset)..<\(offset + part.size) differ from \(part.path)")
            }
            offset += part.size
        }
        return problems
    }
}
