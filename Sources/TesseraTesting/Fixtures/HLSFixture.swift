import Foundation
import Tessera

/// An HLS stream on a ``LoopbackOrigin``: a master playlist with two variants and a separate
/// audio group, the best variant fragmented MP4 and encrypted.
///
/// ```
/// <prefix>/hls-demo.m3u8               master (CRLF line endings): 360p and 720p, AUDIO="aac"
///                                       (English DEFAULT=YES, Deutsch), an I-frame playlist
/// <prefix>/v720/prog.m3u8              fMP4: #EXT-X-MAP init.mp4, media sequence 100,
///                                       AES-128 with key 1 and an explicit IV (init, 100, 101),
///                                       then key 2 with the sequence-number IV (102–105);
///                                       103–105 are byte ranges of packed.m4s (n@o, n, n@o
///                                       after a gap), a discontinuity before 105
/// <prefix>/v360/prog.m3u8              MPEG-TS, clear, three segments
/// <prefix>/audio/en/audio.m3u8         packed AAC, clear, three byte ranges of one file
/// <prefix>/audio/de/audio.m3u8         packed AAC, clear, two files
/// <prefix>/keys/k1.key, k2.key         the 16-byte keys
/// ```
///
/// Encrypted resources are served encrypted (``AES128CBC/encrypt(_:key:iv:)`` over
/// ``OriginContent`` plaintext); the expected outputs are the plaintext, concatenated. The
/// default selection (`best`) is `hls-demo/720p.mp4` and `hls-demo/English.aac`; `all` adds
/// `hls-demo/360p.ts` and `hls-demo/Deutsch.aac`.
public struct HLSFixture: OriginFixture {
    /// The master playlist's URL.
    public var inputs: [String] { [masterURL.absoluteString] }
    /// What the default selection leaves under the download root.
    public var expectedFiles: [String] { expectedContents.keys.sorted() }

    /// The master playlist's path on the origin.
    public let masterPath: String
    /// The master playlist's URL.
    public let masterURL: URL
    /// The 720p (best) variant's media playlist path: fMP4, AES-128, byte ranges.
    public let bestVariantPath: String
    /// The 360p (worst) variant's media playlist path: MPEG-TS, clear.
    public let worstVariantPath: String
    /// The English (default) audio rendition's media playlist path: byte ranges, clear.
    public let englishAudioPath: String
    /// The Deutsch audio rendition's media playlist path.
    public let germanAudioPath: String
    /// The I-frame playlist the master names (never served: it must never be fetched).
    public let iFramePlaylistPath: String
    /// The key files' paths (key 1, key 2).
    public let keyPaths: [String]
    /// The keys, by path.
    public let keys: [String: [UInt8]]
    /// The resource the 720p variant's byte-range segments come from.
    public let packedSegmentPath: String
    /// The files of the default selection and their exact bytes (the plaintext).
    public let expectedContents: [String: [UInt8]]
    /// The files of the `all` selection and their exact bytes.
    public let allContents: [String: [UInt8]]

    /// Problems with the default selection's files under `downloadRoot`.
    public func verify(downloadRoot: String) async -> [String] {
        Self.problems(downloadRoot: downloadRoot, expected: expectedContents)
    }

    /// Problems with the files `expected` names under `downloadRoot`: missing, wrong size, or
    /// the first byte that differs.
    public static func problems(downloadRoot: String, expected: [String: [UInt8]]) -> [String] {
        var problems: [String] = []
        for (name, bytes) in expected.sorted(by: { $0.key < $1.key }) {
            let path = (downloadRoot as NSString).appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: path) else {
                problems.append("\(name): missing")
                continue
            }
            let actual = [UInt8](data)
            if actual.count != bytes.count {
                problems.append("\(name): \(actual.count) bytes, expected \(bytes.count)")
            } else if actual != bytes, let first = zip(actual, bytes).enumerated().first(where: { $0.element.0 != $0.element.1 }) {
                problems.append("\(name): differs from byte \(first.offset) on")
            }
        }
        return problems
    }

    /// The content type the playlists are served with.
    public static let playlistContentType = "application/vnd.apple.mpegurl"

    /// Serves the stream under `prefix` on `origin` and returns what a download must produce.
    public static func install(on origin: LoopbackOrigin, prefix: String = "/hls/fixture") -> HLSFixture {
        func plain(_ name: String, _ size: Int) -> [UInt8] {
            OriginContent(path: "\(prefix)/plaintext/\(name)").bytes(0..<Int64(size))
        }
        func encrypt(_ bytes: [UInt8], _ key: [UInt8], _ iv: [UInt8]) -> [UInt8] {
            // 16-byte key and IV: cannot fail.
            (try? AES128CBC.encrypt(bytes, key: key, iv: iv)) ?? []
        }
        func playlist(_ path: String, _ lines: [String], lineEnding: String = "\n") {
            origin.serve(path, .text(lines.joined(separator: lineEnding) + lineEnding, contentType: playlistContentType))
        }

        let keyPaths = ["\(prefix)/keys/k1.key", "\(prefix)/keys/k2.key"]
        let key1 = OriginContent(path: keyPaths[0]).bytes(0..<16)
        let key2 = OriginContent(path: keyPaths[1]).bytes(0..<16)
        for (path, key) in zip(keyPaths, [key1, key2]) { origin.serve(path, .bytes(key)) }
        let iv1: [UInt8] = (0..<16).map { UInt8(0xA0 + $0) }
        let ivHex = "0x" + iv1.map { String(format: "%02X", $0) }.joined()

        // The 720p variant: init + 100, 101 under key 1 (explicit IV); 102–105 under key 2 (sequence IVs).
        let v720 = "\(prefix)/v720"
        let initPlain = plain("v720/init.mp4", 1_234)
        let plains = [40_000, 40_017, 30_001, 25_000, 20_005, 12_345].enumerated().map { plain("v720/seg-\(100 + $0.offset)", $0.element) }
        origin.serve("\(v720)/init.mp4", .bytes(encrypt(initPlain, key1, iv1)))
        origin.serve("\(v720)/seg-100.m4s", .bytes(encrypt(plains[0], key1, iv1)))
        origin.serve("\(v720)/seg-101.m4s", .bytes(encrypt(plains[1], key1, iv1)))
        origin.serve("\(v720)/seg-102.m4s", .bytes(encrypt(plains[2], key2, AES128CBC.sequenceIV(102))))
        let packed103 = encrypt(plains[3], key2, AES128CBC.sequenceIV(103))
        let packed104 = encrypt(plains[4], key2, AES128CBC.sequenceIV(104))
        let packed105 = encrypt(plains[5], key2, AES128CBC.sequenceIV(105))
        let gap = [UInt8](repeating: 0xEE, count: 4_096)  // bytes no segment uses
        let packedPath = "\(v720)/packed.m4s"
        origin.serve(packedPath, .bytes(packed103 + packed104 + gap + packed105))
        let offset105 = packed103.count + packed104.count + gap.count
        let bestPath = "\(v720)/prog.m3u8"
        playlist(bestPath, [
            "#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-TARGETDURATION:4", "#EXT-X-MEDIA-SEQUENCE:100",
            "#EXT-X-PLAYLIST-TYPE:VOD", "#EXT-X-INDEPENDENT-SEGMENTS",
            "#EXT-X-KEY:METHOD=AES-128,URI=\"../keys/k1.key\",IV=\(ivHex),KEYFORMAT=\"identity\"",
            "#EXT-X-MAP:URI=\"init.mp4\"",
            "#EXTINF:4.000,", "seg-100.m4s",
            "#EXTINF:4.000,", "seg-101.m4s",
            "# key rotation: from here on the IV is the media sequence number",
            "#EXT-X-KEY:METHOD=AES-128,URI=\"../keys/k2.key\"",
            "#EXTINF:4.000,", "seg-102.m4s",
            "#EXT-X-BYTERANGE:\(packed103.count)@0", "#EXTINF:4.000,", "packed.m4s",
            "#EXT-X-BYTERANGE:\(packed104.count)", "#EXTINF:4.000,", "packed.m4s",
            "#EXT-X-DISCONTINUITY",
            "#EXT-X-BYTERANGE:\(packed105.count)@\(offset105)", "#EXTINF:2.500,", "packed.m4s",
            "#EXT-X-ENDLIST",
        ])

        // The 360p variant: MPEG-TS, clear.
        let v360 = "\(prefix)/v360"
        let tsSizes: [Int64] = [18_800, 18_800, 9_400]
        for (index, size) in tsSizes.enumerated() { origin.serve("\(v360)/seg\(index).ts", .generated(size: size)) }
        let worstPath = "\(v360)/prog.m3u8"
        playlist(worstPath, ["#EXTM3U", "#EXT-X-TARGETDURATION:4", "#EXT-X-MEDIA-SEQUENCE:0"]
            + tsSizes.indices.flatMap { ["#EXTINF:4.0,", "seg\($0).ts"] } + ["#EXT-X-ENDLIST"])
        let tsBytes = tsSizes.indices.flatMap { origin.content(at: "\(v360)/seg\($0).ts").bytes(0..<tsSizes[$0]) }

        // English audio: three byte ranges of one packed AAC file.
        let enPath = "\(prefix)/audio/en/audio.m3u8"
        let enFile = "\(prefix)/audio/en/audio.aac"
        let enSize: Int64 = 8_000 + 8_000 + 4_321
        origin.serve(enFile, .generated(size: enSize))
        playlist(enPath, [
            "#EXTM3U", "#EXT-X-TARGETDURATION:4",
            "#EXTINF:4.0,", "#EXT-X-BYTERANGE:8000@0", "audio.aac",
            "#EXTINF:4.0,", "#EXT-X-BYTERANGE:8000", "audio.aac",
            "#EXTINF:2.2,", "#EXT-X-BYTERANGE:4321", "audio.aac",
            "#EXT-X-ENDLIST",
        ])
        let enBytes = origin.content(at: enFile).bytes(0..<enSize)

        // Deutsch audio: two files.
        let dePath = "\(prefix)/audio/de/audio.m3u8"
        let deSizes: [Int64] = [8_000, 6_000]
        for (index, size) in deSizes.enumerated() { origin.serve("\(prefix)/audio/de/a\(index).aac", .generated(size: size)) }
        playlist(dePath, ["#EXTM3U", "#EXT-X-TARGETDURATION:4"]
            + deSizes.indices.flatMap { ["#EXTINF:4.0,", "a\($0).aac"] } + ["#EXT-X-ENDLIST"])
        let deBytes = deSizes.indices.flatMap { origin.content(at: "\(prefix)/audio/de/a\($0).aac").bytes(0..<deSizes[$0]) }

        // The master, with CRLF line endings, the worse variant first.
        let masterPath = "\(prefix)/hls-demo.m3u8"
        let iFramePath = "\(v720)/iframes.m3u8"
        playlist(masterPath, [
            "#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-INDEPENDENT-SEGMENTS", "",
            "# Tessera's HLS fixture: two variants and a separate audio group",
            "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aac\",NAME=\"English\",LANGUAGE=\"en\",DEFAULT=YES,AUTOSELECT=YES,URI=\"audio/en/audio.m3u8\"",
            "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aac\",NAME=\"Deutsch\",LANGUAGE=\"de\",DEFAULT=NO,AUTOSELECT=YES,URI=\"audio/de/audio.m3u8\"",
            "#EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,CODECS=\"avc1.4d401e,mp4a.40.2\",AUDIO=\"aac\"",
            "v360/prog.m3u8",
            "#EXT-X-STREAM-INF:BANDWIDTH=2400000,AVERAGE-BANDWIDTH=2000000,RESOLUTION=1280x720,CODECS=\"avc1.64001f,mp4a.40.2\",FRAME-RATE=30.000,AUDIO=\"aac\"",
            "v720/prog.m3u8",
            "#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=120000,RESOLUTION=1280x720,URI=\"v720/iframes.m3u8\"",
        ], lineEnding: "\r\n")

        let expected: [String: [UInt8]] = [
            "hls-demo/720p.mp4": initPlain + plains.flatMap { $0 },
            "hls-demo/English.aac": enBytes,
        ]
        var all = expected
        all["hls-demo/360p.ts"] = tsBytes
        all["hls-demo/Deutsch.aac"] = deBytes
        return HLSFixture(
            masterPath: masterPath, masterURL: origin.url(masterPath), bestVariantPath: bestPath, worstVariantPath: worstPath,
            englishAudioPath: enPath, germanAudioPath: dePath, iFramePlaylistPath: iFramePath, keyPaths: keyPaths,
            keys: [keyPaths[0]: key1, keyPaths[1]: key2], packedSegmentPath: packedPath, expectedContents: expected,
            allContents: all)
    }
}
