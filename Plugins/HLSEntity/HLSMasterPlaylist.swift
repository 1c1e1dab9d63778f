import Foundation
import Tessera

/// A master (multivariant) playlist: the variants of a stream (`#EXT-X-STREAM-INF`) and its
/// alternative renditions (`#EXT-X-MEDIA`), RFC 8216 §4.3.4. I-frame playlists
/// (`#EXT-X-I-FRAME-STREAM-INF`) are ignored.
///
/// Every variant and every rendition with a URI has an ``HLSVariant/identifier`` /
/// ``HLSRendition/identifier`` that is unique in the playlist and names it in a format
/// selector and in its output's file name.
package struct HLSMasterPlaylist: Sendable, Hashable {
    /// The playlist's URL (after redirects).
    package var url: URL
    /// The variants, in playlist order.
    package var variants: [HLSVariant]
    /// The renditions, in playlist order (those without a URI included: they are carried in
    /// the variants themselves).
    package var renditions: [HLSRendition]
    /// The stream's title, from `#EXT-X-SESSION-DATA` (RFC 8216 §4.3.4.4) with a `DATA-ID` of
    /// `com.apple.hls.title` (or another reverse-DNS id ending in `.title`) and a `VALUE`: the
    /// first such tag without a `LANGUAGE`, else the first. `nil` when the playlist has none.
    /// Network text: print it through ``UntrustedText``.
    package var title: String?

    /// Every selectable identifier: the variants', then the renditions' that have a URI.
    package var identifiers: [String] {
        variants.map(\.identifier) + renditions.filter { $0.url != nil }.map(\.identifier)
    }

    /// The audio rendition that goes with `variant`: the `DEFAULT=YES` one of its `AUDIO`
    /// group, else the group's first; `nil` when the variant has no audio group or when that
    /// rendition has no URI (its audio is in the variant's own stream).
    package func audioRendition(for variant: HLSVariant) -> Int? {
        guard let group = variant.audioGroup else { return nil }
        let members = renditions.indices.filter { renditions[$0].type == .audio && renditions[$0].groupID == group }
        guard let chosen = members.first(where: { renditions[$0].isDefault }) ?? members.first else { return nil }
        return renditions[chosen].url == nil ? nil : chosen
    }

    /// What `selector` picks.
    ///
    /// - `best`: the variant with the highest `BANDWIDTH` (then `AVERAGE-BANDWIDTH`, then
    ///   height; the first of equals) among those that are not audio-only (unless all are),
    ///   plus its audio rendition (``audioRendition(for:)``).
    /// - `worst`: the same with the lowest `BANDWIDTH`.
    /// - `all`: every variant and every rendition with a URI.
    /// - identifiers: exactly the variants and renditions named (case-insensitively when no
    ///   name matches exactly); an unknown name is a ``DownloadError/Code/invalidRequest``
    ///   that lists the names there are.
    package func select(_ selector: FormatSelector) throws(DownloadError) -> HLSSelection {
        var selection = HLSSelection()
        switch selector {
        case .best, .worst:
            let nonAudio = variants.indices.filter { variants[$0].kind != .audio }
            let candidates = nonAudio.isEmpty ? Array(variants.indices) : nonAudio
            func rank(_ index: Int) -> (Int, Int, Int) {
                let variant = variants[index]
                return (variant.bandwidth, variant.averageBandwidth ?? 0, variant.height ?? 0)
            }
            var chosen = candidates[0]
            for index in candidates.dropFirst() {
                let better = selector == .best ? rank(index) > rank(chosen) : rank(index) < rank(chosen)
                if better { chosen = index }
            }
            selection.variants = [chosen]
            if let audio = audioRendition(for: variants[chosen]) { selection.renditions = [audio] }
        case .all:
            selection.variants = Set(variants.indices)
            selection.renditions = Set(renditions.indices.filter { renditions[$0].url != nil })
        case .identifiers(let names):
            for name in names {
                let exactVariant = variants.firstIndex { $0.identifier == name }
                let exactRendition = renditions.firstIndex { $0.url != nil && $0.identifier == name }
                if let index = exactVariant {
                    selection.variants.insert(index)
                } else if let index = exactRendition {
                    selection.renditions.insert(index)
                } else if let index = variants.firstIndex(where: { $0.identifier.lowercased() == name.lowercased() }) {
                    selection.variants.insert(index)
                } else if let index = renditions.firstIndex(where: {
                    $0.url != nil && $0.identifier.lowercased() == name.lowercased()
                }) {
                    selection.renditions.insert(index)
                } else {
                    throw DownloadError(
                        .invalidRequest,
                        "the playlist has no variant or rendition called \"\(HLSAttributeList.excerpt(name))\"; it has: "
                            + identifiers.joined(separator: ", "),
                        url: url.absoluteString)
                }
            }
        }
        return selection
    }
}

/// The variants and renditions (indices into ``HLSMasterPlaylist/variants`` and
/// ``HLSMasterPlaylist/renditions``) a format selector picks.
package struct HLSSelection: Sendable, Hashable {
    /// Selected variants.
    package var variants: Set<Int> = []
    /// Selected renditions (all with a URI).
    package var renditions: Set<Int> = []

    /// An empty selection.
    package init() {}
}

/// One variant stream (`#EXT-X-STREAM-INF` and the URI after it).
package struct HLSVariant: Sendable, Hashable {
    /// Its media playlist.
    package var url: URL
    /// `BANDWIDTH`: peak bits per second.
    package var bandwidth: Int
    /// `AVERAGE-BANDWIDTH`.
    package var averageBandwidth: Int?
    /// `RESOLUTION` width.
    package var width: Int?
    /// `RESOLUTION` height.
    package var height: Int?
    /// `CODECS`.
    package var codecs: String?
    /// `FRAME-RATE`.
    package var frameRate: Double?
    /// `AUDIO`: the group of its audio renditions.
    package var audioGroup: String?
    /// `VIDEO`: the group of its video renditions.
    package var videoGroup: String?
    /// `SUBTITLES`: the group of its subtitle renditions.
    package var subtitlesGroup: String?
    /// What it holds: `audio` when every codec is an audio codec, `video` when its audio comes
    /// from a separate rendition, `muxed` otherwise.
    package var kind: MediaInfo.Kind
    /// Its name: `<height>p` (`720p`) from `RESOLUTION`, or `v<n>-<bandwidth>` (n counted from
    /// 1 in playlist order) without one; `<height>p-<bandwidth>` when several variants share a
    /// height; `-<n>` appended if that still repeats a name.
    package var identifier: String
    /// The line of its `#EXT-X-STREAM-INF` tag.
    package var line: Int
}

/// One rendition (`#EXT-X-MEDIA`).
package struct HLSRendition: Sendable, Hashable {
    /// `TYPE`.
    package enum MediaType: String, Sendable, Hashable, Codable {
        /// An alternative audio track.
        case audio = "AUDIO"
        /// An alternative video track (another camera angle).
        case video = "VIDEO"
        /// Subtitles (WebVTT or IMSC segments).
        case subtitles = "SUBTITLES"
        /// Closed captions carried in the video stream (never a URI of their own).
        case closedCaptions = "CLOSED-CAPTIONS"
    }

    /// `TYPE`.
    package var type: MediaType
    /// `GROUP-ID`.
    package var groupID: String
    /// `NAME`.
    package var name: String
    /// `LANGUAGE`.
    package var language: String?
    /// `DEFAULT=YES`.
    package var isDefault: Bool
    /// `AUTOSELECT=YES`.
    package var autoselect: Bool
    /// `URI`: its media playlist, or `nil` when it is carried in the variant's stream.
    package var url: URL?
    /// Its name: `NAME`, or `<GROUP-ID>-<NAME>` when another rendition with a URI or a
    /// variant has the same name; `-<n>` appended if that still repeats a name.
    package var identifier: String
    /// The line of its tag.
    package var line: Int
}

extension HLSMasterPlaylist {
    /// Parses the body of a master playlist whose header was checked.
    init(parsing text: String, url: URL) throws(DownloadError) {
        self.url = url
        variants = []
        renditions = []
        var titles: [(value: String, hasLanguage: Bool)] = []
        let source = url.absoluteString
        func invalid(_ message: String) -> DownloadError { DownloadError(.manifestInvalid, message, url: source) }

        var pending: (attributes: HLSAttributeList, line: Int)?
        var iterator = HLSLines(text: text).makeIterator()
        _ = iterator.next()  // #EXTM3U
        while let (number, content) = iterator.next() {
            switch HLSLine(content) {
            case .ignorable:
                continue
            case .tag(let name, let value):
                switch name {
                case "#EXT-X-STREAM-INF":
                    if let pending {
                        throw invalid("line \(pending.line): #EXT-X-STREAM-INF is not followed by the variant's URI")
                    }
                    let attributes = try HLSAttributeList(parsing: value ?? "", tag: "#EXT-X-STREAM-INF", line: number)
                    guard try attributes.integer("BANDWIDTH") != nil else {
                        throw invalid("line \(number): #EXT-X-STREAM-INF has no BANDWIDTH attribute, which it requires")
                    }
                    pending = (attributes, number)
                case "#EXT-X-MEDIA":
                    let attributes = try HLSAttributeList(parsing: value ?? "", tag: "#EXT-X-MEDIA", line: number)
                    let typeName = try attributes.required("TYPE")
                    let groupID = try attributes.required("GROUP-ID")
                    let name = try attributes.required("NAME")
                    // A TYPE this version does not know is ignored, as RFC 8216 §6.3.1 asks of unknown values.
                    guard let type = HLSRendition.MediaType(rawValue: typeName) else { continue }
                    var renditionURL: URL?
                    if type != .closedCaptions, let uri = attributes["URI"] {
                        renditionURL = try URLSafety.resolve(uri, against: url, context: "line \(number): the #EXT-X-MEDIA URI")
                    }
                    renditions.append(HLSRendition(
                        type: type, groupID: groupID, name: name, language: attributes["LANGUAGE"],
                        isDefault: attributes.flag("DEFAULT"), autoselect: attributes.flag("AUTOSELECT"),
                        url: renditionURL, identifier: name, line: number))
                case "#EXT-X-SESSION-DATA":
                    // Only read for a title; a malformed one is ignored as the tag was before.
                    if let attributes = try? HLSAttributeList(parsing: value ?? "", tag: "#EXT-X-SESSION-DATA", line: number),
                        let id = attributes["DATA-ID"]?.lowercased(), id == "com.apple.hls.title" || id.hasSuffix(".title"),
                        let text = attributes["VALUE"], !text.allSatisfy(\.isWhitespace)
                    {
                        titles.append((text, attributes["LANGUAGE"] != nil))
                    }
                default:
                    continue  // #EXT-X-I-FRAME-STREAM-INF, unknown tags.
                }
            case .uri(let reference):
                guard let (attributes, line) = pending else {
                    throw invalid(
                        "line \(number): the URI \"\(HLSAttributeList.excerpt(String(reference)))\" does not follow an "
                            + "#EXT-X-STREAM-INF tag")
                }
                let variantURL = try URLSafety.resolve(String(reference), against: url, context: "line \(number): the variant URI")
                let resolution = try attributes.resolution("RESOLUTION")
                variants.append(HLSVariant(
                    url: variantURL, bandwidth: try attributes.integer("BANDWIDTH") ?? 0,
                    averageBandwidth: try attributes.integer("AVERAGE-BANDWIDTH"), width: resolution?.width,
                    height: resolution?.height, codecs: attributes["CODECS"], frameRate: try attributes.decimal("FRAME-RATE"),
                    audioGroup: attributes["AUDIO"], videoGroup: attributes["VIDEO"], subtitlesGroup: attributes["SUBTITLES"],
                    kind: .muxed, identifier: "", line: line))
                pending = nil
            }
        }
        if let pending {
            throw invalid("line \(pending.line): #EXT-X-STREAM-INF is not followed by the variant's URI")
        }
        guard !variants.isEmpty else {
            throw invalid("the master playlist has no variant (#EXT-X-STREAM-INF followed by a URI)")
        }
        for index in variants.indices {
            variants[index].kind = kind(of: variants[index])
        }
        title = (titles.first { !$0.hasLanguage } ?? titles.first)?.value
        nameEverything()
    }

    /// Audio-only codecs (RFC 6381 sample entries and the names HLS uses).
    private static let audioCodecs = ["mp4a", "ac-3", "ec-3", "ac-4", "opus", "flac", "alac", "mp3", "dtsc", "dtse", "dtsh", "dtsl"]

    private func kind(of variant: HLSVariant) -> MediaInfo.Kind {
        let codecs = (variant.codecs ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if variant.width == nil, !codecs.isEmpty,
            codecs.allSatisfy({ codec in Self.audioCodecs.contains { codec == $0 || codec.hasPrefix($0 + ".") } })
        {
            return .audio
        }
        return audioRendition(for: variant) != nil ? .video : .muxed
    }

    /// Gives every variant and every rendition with a URI a unique identifier.
    private mutating func nameEverything() {
        var taken = Set<String>()
        func unique(_ name: String, _ number: Int) -> String {
            var candidate = name
            if taken.contains(candidate) { candidate = "\(name)-\(number)" }
            var extra = 1
            while taken.contains(candidate) {
                extra += 1
                candidate = "\(name)-\(number)-\(extra)"
            }
            taken.insert(candidate)
            return candidate
        }
        // Variants: 720p, or 720p-<bandwidth> when the height repeats, or v<n>-<bandwidth>.
        var heights: [Int: Int] = [:]
        for variant in variants { if let height = variant.height { heights[height, default: 0] += 1 } }
        for index in variants.indices {
            let variant = variants[index]
            let base: String
            if let height = variant.height {
                base = heights[height, default: 0] > 1 ? "\(height)p-\(variant.bandwidth)" : "\(height)p"
            } else {
                base = "v\(index + 1)-\(variant.bandwidth)"
            }
            variants[index].identifier = unique(base, index + 1)
        }
        // Renditions with a URI: NAME, or GROUP-ID-NAME when the name repeats.
        var names: [String: Int] = [:]
        for rendition in renditions where rendition.url != nil { names[rendition.name, default: 0] += 1 }
        for index in renditions.indices where renditions[index].url != nil {
            let rendition = renditions[index]
            let repeated = names[rendition.name, default: 0] > 1 || taken.contains(rendition.name)
            renditions[index].identifier = unique(repeated ? "\(rendition.groupID)-\(rendition.name)" : rendition.name, index + 1)
        }
    }
}
