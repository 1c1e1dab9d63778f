import Foundation

/// Turns a finished task's files into one playable file, as yt-dlp does: a video track and its
/// audio track muxed together (each track keeping its language and name), or the ordered parts
/// of one video joined end to end. Nothing is re-encoded (`ffmpeg -c copy`).
///
/// Two steps, so that the decision can be tested without ffmpeg:
/// ``plan(for:title:)`` is a pure function from the files and their ``MediaInfo`` to a
/// ``MergePlan`` (or `nil`: nothing to merge), and ``run(_:ffmpeg:beforeRemovingInputs:)`` carries a plan out.
/// A ``DownloadTaskManager`` does both for every task it completes, as its
/// ``DownloadTaskManager/Configuration/merging`` policy says (``MergePolicy``); an application
/// that turned that off may call them itself:
///
/// ```swift
/// let merger = MediaMerger()
/// let inputs = info.outputs.map { MergeInput(path: $0.path, media: $0.media) }
/// if let plan = merger.plan(for: inputs, title: info.title), let ffmpeg = MediaMerger.findFFmpeg() {
///     let result = try await merger.run(plan, ffmpeg: ffmpeg)
///     print(result.path)
/// }
/// ```
package struct MediaMerger: Sendable {
    /// The container to write instead of the one the plan would choose (`--merge-output-format`).
    public var outputFormat: MergeOutputFormat?
    /// Whether every audio track goes into the merged file (yt-dlp's `--audio-multistreams`);
    /// otherwise the first one does, and the others stay files of their own.
    public var audioMultistreams: Bool

    /// Creates a merger; `outputFormat` overrides the container the plan would choose.
    public init(outputFormat: MergeOutputFormat? = nil, audioMultistreams: Bool = false) {
        self.outputFormat = outputFormat
        self.audioMultistreams = audioMultistreams
    }

    // MARK: - The decision

    /// What to do with `inputs` (a task's files in the manifest's order), or `nil` when they are
    /// not something to merge.
    ///
    /// - At least one ``MediaInfo/Kind/video`` and one ``MediaInfo/Kind/audio`` input (DASH,
    ///   HLS with separate audio): ``MergePlan/Method/mux``, the first video input's video
    ///   streams and the first audio input's audio streams (every audio input's with
    ///   ``audioMultistreams``: yt-dlp's rule) in one file, each track with its language and
    ///   name (``MergePlan/tracks``); the other inputs (more videos, subtitles) stay files of
    ///   their own. The container is MP4 when every codec the chosen inputs name (RFC 6381, the
    ///   variant's list included) is H.264, H.265 or AAC and both a video and an audio codec are
    ///   named, Matroska otherwise.
    /// - Two or more ``MediaInfo/Kind/muxed`` inputs with the same ``MediaInfo`` (the parts of
    ///   one video, as playurl gives them): ``MergePlan/Method/concatenate``, in the given
    ///   order. The container is the parts' own when they share a known extension, Matroska
    ///   otherwise.
    ///
    /// The merged file is named after `title` (made a safe file name), else after the inputs'
    /// directory, in the directory of the first input. The name may be one of the inputs' (the
    /// video named `%(title)s.mp4` by a template): the merged file then takes its place, as
    /// yt-dlp's does.
    public func plan(for inputs: [MergeInput], title: String?) -> MergePlan? {
        let videos = inputs.filter { $0.media?.kind == .video }
        let audios = inputs.filter { $0.media?.kind == .audio }
        if let video = videos.first, let firstAudio = audios.first {
            let chosenAudio = audioMultistreams ? audios : [firstAudio]
            let chosen = inputs.filter { $0 == video || chosenAudio.contains($0) }
            let format = outputFormat ?? (Self.fitsMP4(chosen.compactMap(\.media?.codecs)) ? .mp4 : .mkv)
            let streams = chosen.map { $0.media?.kind == .video ? MergePlan.Stream.video : .audio }
            var plan = makePlan(.mux, inputs: chosen.map(\.path), streams: streams, format: format.fileExtension, muxer: format.muxer, title: title)
            plan.tracks = chosen.map { input in
                MergePlan.Track(language: input.media?.language.flatMap(LanguageCode.iso639_2), name: input.media?.identifier)
            }
            return plan
        }
        guard inputs.count >= 2, let first = inputs.first?.media, first.kind == .muxed,
            inputs.allSatisfy({ $0.media == first })
        else { return nil }
        let (fileExtension, muxer): (String, String)
        if let outputFormat {
            (fileExtension, muxer) = (outputFormat.fileExtension, outputFormat.muxer)
        } else {
            let extensions = Set(inputs.map { Self.fileExtension(of: $0.path) })
            if extensions.count == 1, let only = extensions.first, let known = Self.concatMuxers[only] {
                (fileExtension, muxer) = (only, known)
            } else {
                (fileExtension, muxer) = (MergeOutputFormat.mkv.fileExtension, MergeOutputFormat.mkv.muxer)
            }
        }
        return makePlan(
            .concatenate, inputs: inputs.map(\.path), streams: inputs.map { _ in .all }, format: fileExtension, muxer: muxer,
            title: title)
    }

    private func makePlan(
        _ method: MergePlan.Method, inputs: [String], streams: [MergePlan.Stream], format: String, muxer: String, title: String?
    ) -> MergePlan {
        let directory = Self.directory(of: inputs[0])
        let fallback = Self.lastComponent(directory).flatMap { $0.isEmpty ? nil : $0 } ?? "merged"
        let stem = SafePath.sanitizedFileName(title ?? "", fallback: SafePath.sanitizedFileName(fallback, fallback: "merged"))
        let name = SafePath.fitted(stem, reserving: format.utf8.count + 1) + "." + format
        let output = SafePath.join(directory, name)
        return MergePlan(method: method, inputs: inputs, streams: streams, output: output, muxer: muxer)
    }

    /// The sample entries (RFC 6381, before the first dot) an MP4 takes without trouble.
    static let mp4Codecs: Set<String> = ["avc1", "avc3", "hvc1", "hev1", "mp4a"]
    static let videoCodecs: Set<String> = ["avc1", "avc3", "hvc1", "hev1"]

    /// Whether the codecs strings name a video and an audio codec, all of them fit for MP4.
    static func fitsMP4(_ codecs: [String]) -> Bool {
        let entries = codecs.flatMap { $0.split(separator: ",") }.map { entry in
            entry.trimmingCharacters(in: .whitespaces).lowercased().split(separator: ".", maxSplits: 1).first.map(String.init) ?? ""
        }
        guard !entries.isEmpty, entries.allSatisfy(mp4Codecs.contains) else { return false }
        return entries.contains(where: videoCodecs.contains) && entries.contains("mp4a")
    }

    /// The parts' extensions that are kept as the merged file's, with ffmpeg's muxer for each.
    static let concatMuxers: [String: String] = [
        "flv": "flv", "mp4": "mp4", "m4v": "mp4", "mov": "mov", "mkv": "matroska", "webm": "webm", "ts": "mpegts", "m4a": "ipod",
    ]

    static func fileExtension(of path: String) -> String {
        let name = lastComponent(path) ?? path
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "" }
        return name[name.index(after: dot)...].lowercased()
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static func lastComponent(_ path: String) -> String? {
        path.split(separator: "/").last.map(String.init)
    }

    // MARK: - ffmpeg's inputs

    /// The text of a concat demuxer list for `paths`, one `file '…'` line each, in order: a
    /// `'` becomes `'\''` (the demuxer's own quoting), and a relative path that starts with `-`
    /// gets `./` in front. The list file sits next to the parts, so relative paths are taken
    /// relative to it; absolute paths are passed as they are (ffmpeg runs with `-safe 0`).
    public static func concatList(_ paths: [String]) -> String {
        paths.map { path in
            "file '" + argumentPath(path).replacingOccurrences(of: "'", with: #"'\''"#) + "'\n"
        }.joined()
    }

    /// `path` as an argument to ffmpeg: a relative path that starts with `-` (which ffmpeg would
    /// take for an option) gets `./` in front; others are unchanged.
    public static func argumentPath(_ path: String) -> String {
        path.hasPrefix("-") ? "./" + path : path
    }

    // MARK: - Finding ffmpeg

    /// The first executable `ffmpeg` in the `PATH` of `environment` (the process's own by
    /// default), or `nil`. Only absolute `PATH` entries are searched: an empty or relative entry
    /// would run whatever file the current directory holds.
    public static func findFFmpeg(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        findExecutable("ffmpeg", environment: environment)
    }

    /// The first executable `name` in the `PATH` of `environment`, or `nil` (see
    /// ``findFFmpeg(environment:)``).
    public static func findExecutable(_ name: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") where directory.hasPrefix("/") {
            let candidate = SafePath.join(String(directory), name)
            var info = stat()
            if stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG, access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }
}

/// One file a `MediaMerger` may take: its path and what it holds.
public struct MergeInput: Sendable, Hashable {
    /// The file's path (absolute, as ``DownloadTaskInfo/OutputInfo/path`` gives it).
    public var path: String
    /// What the file holds, from the manifest; an input without it is never merged.
    public var media: MediaInfo?

    /// Creates an input.
    public init(path: String, media: MediaInfo?) {
        self.path = path
        self.media = media
    }
}

/// A container `--merge-output-format` may ask for.
public enum MergeOutputFormat: String, Sendable, Hashable, CaseIterable {
    /// MPEG-4 Part 14.
    case mp4
    /// Matroska: takes any codec.
    case mkv
    /// WebM (Matroska for VP8/VP9/AV1 and Vorbis/Opus only).
    case webm
    /// QuickTime.
    case mov

    /// The merged file's extension.
    public var fileExtension: String { rawValue }

    /// ffmpeg's name for the muxer (`-f`).
    public var muxer: String {
        switch self {
        case .mp4: "mp4"
        case .mkv: "matroska"
        case .webm: "webm"
        case .mov: "mov"
        }
    }
}

/// What a `MediaMerger` decided: which files become which one, how, and with which ffmpeg
/// arguments. A value: build it with `MediaMerger/plan(for:title:)`, carry it out with
/// `MediaMerger/run(_:ffmpeg:beforeRemovingInputs:)`.
public struct MergePlan: Sendable, Hashable {
    /// How the inputs become one file.
    public enum Method: String, Sendable, Hashable {
        /// Tracks side by side: a video and its audio (`-map` per input).
        case mux
        /// One after the other, with ffmpeg's concat demuxer: the parts of one video.
        case concatenate
    }

    /// Which streams of an input go into the merged file.
    public enum Stream: String, Sendable, Hashable {
        /// Its video streams (`-map N:v`).
        case video
        /// Its audio streams (`-map N:a`).
        case audio
        /// All of them (`-map N`).
        case all
    }

    /// How the inputs become one file.
    public var method: Method
    /// The inputs' paths, in order.
    public var inputs: [String]
    /// For ``Method/mux``: which streams of each input are taken (one per input).
    public var streams: [Stream]
    /// The merged file's path, in the directory of the first input.
    public var output: String
    /// ffmpeg's muxer for the merged file (`-f`): the container.
    public var muxer: String
    /// For ``Method/mux``: what each input's track is (one per input, or none), written into
    /// the merged file's stream as its language and name.
    public var tracks: [Track]
    /// The lease epoch of the process that runs this merge under a fence (a fleet's worker, see
    /// ``MergeFence``): it names the temporary files (`.name.e<epoch>.merging`), so that two
    /// holders' ffmpegs never write the same file; `nil` for a process that owns its root alone.
    package var temporaryEpoch: UInt64?

    /// What a merged track keeps of its source.
    public struct Track: Sendable, Hashable {
        /// Its ISO 639-2 language code (`eng`, `ger`), when the manifest gives one.
        public var language: String?
        /// Its name (an HLS rendition's `NAME`, a DASH representation's id).
        public var name: String?

        /// Creates a track's description.
        public init(language: String? = nil, name: String? = nil) {
            self.language = language
            self.name = name
        }
    }

    /// Creates a plan.
    public init(method: Method, inputs: [String], streams: [Stream], output: String, muxer: String, tracks: [Track] = []) {
        self.method = method
        self.inputs = inputs
        self.streams = streams
        self.output = output
        self.muxer = muxer
        self.tracks = tracks
    }

    /// Where ffmpeg writes before the file is renamed to ``output``: a hidden name in the same
    /// directory, so that a merge that stops half-way never leaves half a file under the final
    /// name.
    public var temporaryOutput: String {
        temporaryPath(".merging")
    }

    /// For ``Method/concatenate``: where the concat list is written (next to the merged file).
    public var concatListPath: String {
        temporaryPath(".concat")
    }

    /// A hidden name next to the output, with the epoch when there is one (see ``temporaryEpoch``).
    private func temporaryPath(_ suffix: String) -> String {
        SafePath.join(MediaMerger.directory(of: output), temporaryPrefix + (temporaryEpoch.map { ".e\($0)" } ?? "") + suffix)
    }

    /// What every temporary name of this plan starts with, whatever its epoch (room is kept for
    /// one: `.e` and 20 digits).
    var temporaryPrefix: String {
        "." + SafePath.fitted(MediaMerger.lastComponent(output) ?? "merged", reserving: temporaryEpoch == nil ? 10 : 32)
    }

    /// ffmpeg's arguments (without the program): no standard input, no banner, errors only,
    /// `-y` for the temporary file, the inputs (or the concat list), the streams, each track's
    /// language and name (`-metadata:s:a:N language=eng`, `title` for Matroska and
    /// `handler_name`, which MP4 keeps), `-c copy`, the muxer, and ``temporaryOutput``. Every
    /// path is one argument; a relative one that starts with `-` gets `./` in front. A track
    /// file holds one stream of its kind (a rendition, a representation): the metadata of the
    /// N-th audio input goes to the N-th audio stream.
    public var ffmpegArguments: [String] {
        var arguments = ["-nostdin", "-hide_banner", "-loglevel", "error", "-y"]
        switch method {
        case .mux:
            for input in inputs { arguments += ["-i", MediaMerger.argumentPath(input)] }
            for (index, stream) in streams.enumerated() {
                switch stream {
                case .video: arguments += ["-map", "\(index):v"]
                case .audio: arguments += ["-map", "\(index):a"]
                case .all: arguments += ["-map", "\(index)"]
                }
            }
            var counts: [Stream: Int] = [:]
            for (index, stream) in streams.enumerated() where stream != .all {
                let number = counts[stream, default: 0]
                counts[stream] = number + 1
                guard index < tracks.count else { continue }
                let specifier = "-metadata:s:\(stream == .video ? "v" : "a"):\(number)"
                if let language = tracks[index].language { arguments += [specifier, "language=\(language)"] }
                if let name = tracks[index].name, !name.isEmpty {
                    arguments += [specifier, "title=\(name)", specifier, "handler_name=\(name)"]
                }
            }
        case .concatenate:
            arguments += ["-f", "concat", "-safe", "0", "-i", MediaMerger.argumentPath(concatListPath), "-map", "0"]
        }
        arguments += ["-c", "copy", "-f", muxer, MediaMerger.argumentPath(temporaryOutput)]
        return arguments
    }
}
