import Foundation
import Tessera

/// A media playlist: the segments of one variant or rendition, in order (RFC 8216 §4.3.3).
///
/// Parsing resolves everything a download needs per segment: its URL, its byte range
/// (`#EXT-X-BYTERANGE`, `n@o` or `n` continuing after the previous sub-range of the same
/// resource), its media sequence number, its encryption (`#EXT-X-KEY` with `METHOD=AES-128`
/// and an explicit IV or the sequence-number IV) and the initialisation section in effect
/// (`#EXT-X-MAP`). ``downloadSegments()`` turns them into the segments of one concatenated
/// output: each initialisation section before the first segment it applies to.
package struct HLSMediaPlaylist: Sendable, Hashable {
    /// The playlist's URL (after redirects).
    package var url: URL
    /// `#EXT-X-MEDIA-SEQUENCE`: the sequence number of the first segment (0 when absent).
    package var mediaSequence: UInt64
    /// `#EXT-X-TARGETDURATION`, in seconds.
    package var targetDuration: Int?
    /// `#EXT-X-PLAYLIST-TYPE` (`VOD` or `EVENT`), when present.
    package var playlistType: String?
    /// Whether the playlist has `#EXT-X-ENDLIST`.
    package var hasEndList: Bool
    /// `#EXT-X-DISCONTINUITY-SEQUENCE`: the discontinuity sequence number of the first segment
    /// (0 when absent).
    package var discontinuitySequence: UInt64

    /// Whether the playlist is still growing: neither `#EXT-X-ENDLIST` nor
    /// `#EXT-X-PLAYLIST-TYPE:VOD` (a live stream with a sliding window, or an `EVENT` playlist).
    package var isLive: Bool { !hasEndList && playlistType != "VOD" }
    /// The media segments, in order (`#EXT-X-GAP` segments left out), kept compactly.
    package var segments: HLSSegments

    /// The sum of the segments' `#EXTINF` durations, in seconds.
    package var duration: Double { segments.totalDuration }

    /// Whether any segment has an initialisation section (`#EXT-X-MAP`): fragmented MP4
    /// (or another format that needs one).
    package var hasInitSection: Bool { segments.indices.contains { segments.initSection(at: $0) != nil } }

    /// How many segments ``downloadSegments()`` returns: the media segments plus one for each
    /// initialisation section that comes into effect.
    package var downloadSegmentCount: Int {
        var count = 0
        var current: HLSInitSection?
        for index in segments.indices {
            if let map = segments.initSection(at: index), !map.hasSameContent(as: current) {
                count += 1
                current = map
            }
            count += 1
        }
        return count
    }

    /// The segments of the concatenated output: an initialisation section before the first
    /// media segment it applies to (again whenever a different `#EXT-X-MAP` takes effect), then
    /// the media segments, each with its range and encryption. Encrypted segments carry no
    /// expected size (the decrypted size is known only after decryption). The list is compact:
    /// the URIs are kept as text and resolved when a segment is read.
    package func downloadSegments() throws(DownloadError) -> SegmentList {
        try segments.downloadList()
    }
}

/// One media segment of a ``HLSMediaPlaylist``.
package struct HLSSegment: Sendable, Hashable {
    /// Where its bytes are.
    package var url: URL
    /// The bytes of the resource that make it (`#EXT-X-BYTERANGE`), or `nil` for all of it.
    package var range: ByteRange?
    /// `#EXTINF` duration in seconds.
    package var duration: Double
    /// `#EXTINF` title, when there is one.
    package var title: String?
    /// Its media sequence number.
    package var mediaSequence: UInt64
    /// How it is encrypted (AES-128), or `nil` when it is not.
    package var encryption: SegmentEncryption?
    /// The initialisation section (`#EXT-X-MAP`) that applies to it.
    package var initSection: HLSInitSection?
    /// Whether `#EXT-X-DISCONTINUITY` comes before it.
    package var isDiscontinuity: Bool
    /// The line of its URI in the playlist.
    package var line: Int
    /// Its own `#EXT-X-PROGRAM-DATE-TIME`, if it has one (``HLSMediaPlaylist/liveWindow()``
    /// gives every segment after a dated one its date).
    package var programDateTime: Date?
}

/// A media initialisation section (`#EXT-X-MAP`).
package struct HLSInitSection: Sendable, Hashable {
    /// Where its bytes are.
    package var url: URL
    /// The bytes of the resource that make it (`BYTERANGE`), or `nil` for all of it.
    package var range: ByteRange?
    /// How it is encrypted: under `METHOD=AES-128` with the key's explicit IV.
    package var encryption: SegmentEncryption?
    /// The line of its tag in the playlist.
    package var line: Int

    /// Whether `other` is the same bytes (the line may differ).
    func hasSameContent(as other: HLSInitSection?) -> Bool {
        guard let other else { return false }
        return url == other.url && range == other.range && encryption == other.encryption
    }
}

/// An `#EXT-X-KEY` tag in effect.
private struct KeyTag {
    var method: String
    var keyFormat: String
    var url: URL?
    var iv: [UInt8]?
    var line: Int
}

extension HLSMediaPlaylist {
    /// Parses the body of a media playlist whose header and segment count were checked.
    init(parsing text: String, url: URL, segmentCount: Int) throws(DownloadError) {
        self.url = url
        mediaSequence = 0
        hasEndList = false
        discontinuitySequence = 0
        segments = HLSSegments(base: url, capacity: segmentCount)
        let source = url.absoluteString
        func invalid(_ message: String) -> DownloadError { DownloadError(.manifestInvalid, message, url: source) }

        var pendingInfo: (duration: Double, title: String?, line: Int)?
        var pendingRange: (length: Int64, offset: Int64?, line: Int)?
        var pendingDiscontinuity = false
        var pendingGap = false
        var pendingDate: Date?
        var keys: [String: KeyTag] = [:]
        var map: HLSInitSection?
        var previous: (url: String, end: Int64?)?
        var index: UInt64 = 0
        var sawSegment = false

        func effectiveEncryption(sequence: UInt64?, line: Int, what: String) throws(DownloadError) -> SegmentEncryption? {
            guard !keys.isEmpty else { return nil }
            guard let key = keys["identity"] else {
                let key = keys.values.min { $0.line < $1.line }!
                throw DownloadError(
                    .unsupportedContent,
                    "line \(key.line): #EXT-X-KEY with KEYFORMAT=\"\(HLSAttributeList.excerpt(key.keyFormat))\" "
                        + "(METHOD=\(HLSAttributeList.excerpt(key.method))) is a DRM key system; only METHOD=AES-128 "
                        + "with KEYFORMAT=\"identity\" is supported",
                    url: source)
            }
            switch key.method {
            case "AES-128":
                let iv: [UInt8]
                if let explicit = key.iv {
                    iv = explicit
                } else if let sequence {
                    iv = AES128CBC.sequenceIV(sequence)
                } else {
                    throw invalid(
                        "line \(line): \(what) is encrypted with METHOD=AES-128 (#EXT-X-KEY on line \(key.line)), "
                            + "which then needs an IV attribute (RFC 8216 §4.3.2.5)")
                }
                return SegmentEncryption(method: .aes128, keyURL: key.url!, iv: iv)
            case "SAMPLE-AES", "SAMPLE-AES-CTR":
                throw DownloadError(
                    .unsupportedContent,
                    "line \(key.line): #EXT-X-KEY METHOD=\(key.method) encrypts the samples inside the media "
                        + "(as DRM does); only METHOD=AES-128 is supported",
                    url: source)
            default:
                throw DownloadError(
                    .unsupportedContent,
                    "line \(key.line): #EXT-X-KEY METHOD=\(HLSAttributeList.excerpt(key.method)) is not supported; "
                        + "only METHOD=AES-128 is",
                    url: source)
            }
        }

        func byteRange(_ text: Substring, line: Int, tag: String) throws(DownloadError) -> (length: Int64, offset: Int64?) {
            let parts = text.trimmingCharacters(in: .whitespaces).split(separator: "@", omittingEmptySubsequences: false)
            func number(_ part: Substring) -> Int64? {
                guard !part.isEmpty, part.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
                return Int64(part)
            }
            guard parts.count <= 2, let length = number(parts[0]), parts.count == 1 || number(parts[1]) != nil else {
                throw invalid("line \(line): \(tag) is not a byte range of the form n[@o]: \"\(HLSAttributeList.excerpt(String(text)))\"")
            }
            guard length > 0 else { throw invalid("line \(line): \(tag) has a length of 0 bytes") }
            let offset = parts.count == 2 ? number(parts[1]) : nil
            if let offset, offset > Int64.max - length {
                throw invalid("line \(line): \(tag) ends after the largest possible offset")
            }
            return (length, offset)
        }

        var iterator = HLSLines(text: text).makeIterator()
        _ = iterator.next()  // #EXTM3U, checked by the scan
        while let (number, content) = iterator.next() {
            switch HLSLine(content) {
            case .ignorable:
                continue
            case .tag(let name, let value):
                switch name {
                case "#EXTINF":
                    guard let value, !value.isEmpty else { throw invalid("line \(number): #EXTINF has no duration") }
                    let comma = value.firstIndex(of: ",")
                    let durationText = HLSLine.trimmed(value[..<(comma ?? value.endIndex)])
                    guard let duration = Double(durationText), duration.isFinite, duration >= 0 else {
                        throw invalid("line \(number): #EXTINF duration is not a number: \"\(HLSAttributeList.excerpt(String(durationText)))\"")
                    }
                    let title = comma.map { String(value[value.index(after: $0)...]) }.flatMap { $0.isEmpty ? nil : $0 }
                    pendingInfo = (duration, title, number)
                case "#EXT-X-BYTERANGE":
                    let range = try byteRange(value ?? "", line: number, tag: "#EXT-X-BYTERANGE")
                    pendingRange = (range.length, range.offset, number)
                case "#EXT-X-MEDIA-SEQUENCE":
                    guard !sawSegment else {
                        throw invalid("line \(number): #EXT-X-MEDIA-SEQUENCE must come before the first segment")
                    }
                    guard let text = value?.trimmingCharacters(in: .whitespaces), let sequence = UInt64(text) else {
                        throw invalid("line \(number): #EXT-X-MEDIA-SEQUENCE is not a decimal integer")
                    }
                    mediaSequence = sequence
                case "#EXT-X-TARGETDURATION":
                    guard let text = value?.trimmingCharacters(in: .whitespaces), let seconds = Int(text), seconds >= 0 else {
                        throw invalid("line \(number): #EXT-X-TARGETDURATION is not a decimal integer")
                    }
                    targetDuration = seconds
                case "#EXT-X-PLAYLIST-TYPE":
                    playlistType = value?.trimmingCharacters(in: .whitespaces)
                case "#EXT-X-DISCONTINUITY-SEQUENCE":
                    guard !sawSegment else {
                        throw invalid("line \(number): #EXT-X-DISCONTINUITY-SEQUENCE must come before the first segment")
                    }
                    guard let text = value?.trimmingCharacters(in: .whitespaces), let sequence = UInt64(text) else {
                        throw invalid("line \(number): #EXT-X-DISCONTINUITY-SEQUENCE is not a decimal integer")
                    }
                    discontinuitySequence = sequence
                case "#EXT-X-PROGRAM-DATE-TIME":
                    // Informational (RFC 8216 §4.3.2.6): one that cannot be read is left out.
                    pendingDate = value.flatMap { ISO8601Time.date(from: String($0)) }
                case "#EXT-X-ENDLIST":
                    hasEndList = true
                case "#EXT-X-DISCONTINUITY":
                    pendingDiscontinuity = true
                case "#EXT-X-GAP":
                    pendingGap = true
                case "#EXT-X-KEY":
                    let attributes = try HLSAttributeList(parsing: value ?? "", tag: "#EXT-X-KEY", line: number)
                    let method = try attributes.required("METHOD")
                    if method == "NONE" {
                        keys.removeAll()
                        continue
                    }
                    let keyFormat = attributes["KEYFORMAT"] ?? "identity"
                    var key = KeyTag(method: method, keyFormat: keyFormat, url: nil, iv: nil, line: number)
                    if keyFormat == "identity", method == "AES-128" {
                        let uri = try attributes.required("URI")
                        key.url = try URLSafety.resolve(uri, against: url, context: "line \(number): the #EXT-X-KEY URI")
                        key.iv = try attributes.hexBytes("IV", count: AES128CBC.blockSize)
                    }
                    keys[keyFormat] = key
                case "#EXT-X-MAP":
                    let attributes = try HLSAttributeList(parsing: value ?? "", tag: "#EXT-X-MAP", line: number)
                    let uri = try attributes.required("URI")
                    let mapURL = try URLSafety.resolve(uri, against: url, context: "line \(number): the #EXT-X-MAP URI")
                    var range: ByteRange?
                    if let text = attributes["BYTERANGE"] {
                        let parsed = try byteRange(Substring(text), line: number, tag: "#EXT-X-MAP BYTERANGE")
                        range = ByteRange(offset: parsed.offset ?? 0, length: parsed.length)
                    }
                    let encryption = try effectiveEncryption(sequence: nil, line: number, what: "the #EXT-X-MAP section")
                    map = HLSInitSection(url: mapURL, range: range, encryption: encryption, line: number)
                default:
                    continue  // Unknown and informational tags.
                }
            case .uri(let reference):
                guard let info = pendingInfo else {
                    throw invalid("line \(number): the segment \"\(HLSAttributeList.excerpt(String(reference)))\" has no #EXTINF before it")
                }
                let reference = String(reference)
                guard segments.canAppend(reference) else {
                    throw DownloadError(.manifestTooLarge, "the media playlist's segment URIs add up to more than 4 GB", url: source)
                }
                let segmentURL = try segments.absoluteText(of: reference, line: number)
                var range: ByteRange?
                if let pending = pendingRange {
                    let offset: Int64
                    if let explicit = pending.offset {
                        offset = explicit
                    } else if let previous, previous.url == segmentURL, let end = previous.end {
                        offset = end
                    } else {
                        throw invalid(
                            "line \(pending.line): #EXT-X-BYTERANGE has no offset, so the segment before it must be "
                                + "a sub-range of the same resource (RFC 8216 §4.3.2.2)")
                    }
                    guard offset <= Int64.max - pending.length else {
                        throw invalid("line \(pending.line): #EXT-X-BYTERANGE ends after the largest possible offset")
                    }
                    range = ByteRange(offset: offset, length: pending.length)
                }
                let (sequence, overflow) = mediaSequence.addingReportingOverflow(index)
                guard !overflow else { throw invalid("line \(number): the media sequence number overflows") }
                let encryption = try effectiveEncryption(sequence: sequence, line: number, what: "the segment")
                if !pendingGap {
                    segments.append(
                        reference: reference, range: range, duration: info.duration, title: info.title, sequence: sequence,
                        encryption: encryption, initSection: map, isDiscontinuity: pendingDiscontinuity, line: number,
                        programDateTime: pendingDate)
                } else {
                    segments.skip(duration: info.duration, isDiscontinuity: pendingDiscontinuity, programDateTime: pendingDate)
                }
                pendingDate = nil
                previous = (segmentURL, range.map { $0.offset + $0.length! })
                pendingInfo = nil
                pendingRange = nil
                pendingDiscontinuity = false
                pendingGap = false
                index += 1
                sawSegment = true
            }
        }
        if let pendingInfo {
            throw invalid("line \(pendingInfo.line): #EXTINF is not followed by a segment URI")
        }
        // A live playlist may offer nothing but #EXT-X-GAP segments for a while.
        guard !segments.isEmpty || (isLive && sawSegment) else { throw invalid("the media playlist has no segments") }
        guard mediaSequence.addingReportingOverflow(index).partialValue <= UInt64(Int64.max) else {
            throw invalid("the media sequence numbers go past 2^63")
        }
    }
}
