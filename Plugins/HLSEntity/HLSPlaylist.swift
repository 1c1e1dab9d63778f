import Foundation
import Tessera

/// An HTTP Live Streaming playlist (RFC 8216): a master playlist that lists variants and
/// renditions, or a media playlist that lists segments.
///
/// ```swift
/// switch try HLSPlaylist.parse(document.data, url: document.url) {
/// case .master(let master): print(master.variants.map(\.identifier))
/// case .media(let media): print(media.segments.count, "segments")
/// }
/// ```
package enum HLSPlaylist: Sendable, Hashable {
    /// A master (multivariant) playlist.
    case master(HLSMasterPlaylist)
    /// A media playlist.
    case media(HLSMediaPlaylist)

    /// Parses a playlist fetched from `url` (the URL after redirects: relative URIs are
    /// resolved against it).
    ///
    /// The document must start with `#EXTM3U` (a UTF-8 byte order mark before it is allowed);
    /// lines end in LF or CRLF; blank lines, comments and unknown tags are ignored. A media
    /// playlist with more than `maxSegments` segments is refused with
    /// ``DownloadError/Code/manifestTooLarge`` before any segment is built; one that is still
    /// growing (live or event, without `#EXT-X-ENDLIST`) is read as it is now
    /// (``HLSMediaPlaylist/isLive``, ``HLSMediaPlaylist/liveWindow()``); one whose segments are
    /// encrypted with anything but `METHOD=AES-128` and `KEYFORMAT="identity"` is refused with
    /// ``DownloadError/Code/unsupportedContent``; every other problem is a
    /// ``DownloadError/Code/manifestInvalid`` naming the line. URLs are resolved with
    /// `URLSafety` (http and https only).
    package static func parse(_ data: Data, url: URL, maxSegments: Int = 1_000_000) throws(DownloadError) -> HLSPlaylist {
        try parse(text: String(decoding: data, as: UTF8.self), url: url, maxSegments: maxSegments)
    }

    /// Parses playlist text; see ``parse(_:url:maxSegments:)``.
    package static func parse(text: String, url: URL, maxSegments: Int = 1_000_000) throws(DownloadError) -> HLSPlaylist {
        var body = text
        if body.unicodeScalars.first == "\u{FEFF}" { body.unicodeScalars.removeFirst() }
        let scan = try PlaylistScan(body, url: url)
        if scan.isMaster {
            return .master(try HLSMasterPlaylist(parsing: body, url: url))
        }
        guard scan.uriCount <= maxSegments else {
            throw DownloadError(
                .manifestTooLarge,
                "the media playlist has \(scan.uriCount) segments, more than the limit of \(maxSegments)",
                url: url.absoluteString)
        }
        return .media(try HLSMediaPlaylist(parsing: body, url: url, segmentCount: scan.uriCount))
    }

    /// Tags that only a master playlist has.
    static let masterTags: Set<Substring> = ["#EXT-X-STREAM-INF", "#EXT-X-I-FRAME-STREAM-INF", "#EXT-X-MEDIA"]
    /// Tags that only a media playlist has.
    static let mediaTags: Set<Substring> = ["#EXTINF", "#EXT-X-TARGETDURATION", "#EXT-X-ENDLIST", "#EXT-X-BYTERANGE"]
}

/// The first pass over a playlist: the header, its type, and how many URIs it has (so the
/// segment limit is checked before anything is allocated).
struct PlaylistScan {
    var isMaster = false
    var uriCount = 0

    init(_ text: String, url: URL) throws(DownloadError) {
        var iterator = HLSLines(text: text).makeIterator()
        guard let first = iterator.next() else {
            throw DownloadError(.manifestInvalid, "the playlist is empty, not an HLS playlist", url: url.absoluteString)
        }
        let header = first.text.trimmingCharacters(in: .whitespaces)
        guard header == "#EXTM3U" else {
            throw DownloadError(
                .manifestInvalid,
                "the document is not an HLS playlist: line 1 is \"\(HLSAttributeList.excerpt(header))\", not #EXTM3U",
                url: url.absoluteString)
        }
        var masterTag: (name: Substring, line: Int)?
        var mediaTag: (name: Substring, line: Int)?
        while let line = iterator.next() {
            switch HLSLine(line.text) {
            case .ignorable:
                break
            case .uri:
                uriCount += 1
            case .tag(let name, _):
                if masterTag == nil, HLSPlaylist.masterTags.contains(name) { masterTag = (name, line.number) }
                if mediaTag == nil, HLSPlaylist.mediaTags.contains(name) { mediaTag = (name, line.number) }
            }
        }
        if let masterTag, let mediaTag {
            throw DownloadError(
                .manifestInvalid,
                "the playlist mixes master playlist tags (\(masterTag.name) on line \(masterTag.line)) with media "
                    + "playlist tags (\(mediaTag.name) on line \(mediaTag.line)); it must be one or the other",
                url: url.absoluteString)
        }
        isMaster = masterTag != nil
    }
}

extension DownloadError {
    /// The same error with `prefix` in front of its message (code, status and URL kept, so
    /// retries and re-resolves still see what happened).
    func prefixed(_ prefix: String) -> DownloadError {
        var error = self
        error.message = prefix + error.message
        return error
    }
}
