import Foundation
import Tessera

extension PlayurlEntity {
    /// Turns a playurl answer (JSON or XML, told apart by its first byte) into a manifest:
    /// one output per `durl` part, in `order`, named `<cid>/part-<order>.<format>`, each one
    /// segment whose URLs are the part's `url` and then its `backup_url`s (relative ones
    /// resolved against `url`), with the part's `size` as the expected size and its `md5` as
    /// the checksum.
    ///
    /// - Parameters:
    ///   - data: The answer's body.
    ///   - url: Where the answer came from, after redirects.
    ///   - maxSegments: More parts than this are refused before any is built.
    ///   - maxDocumentSize: The largest answer accepted, in bytes.
    /// - Throws: ``DownloadError/Code/manifestInvalid`` for an answer that is neither JSON nor
    ///   XML, malformed, a refusal by the server (its message quoted), without parts, or with
    ///   order numbers that are missing or repeated; ``DownloadError/Code/manifestTooLarge``
    ///   over a limit; ``DownloadError/Code/unsafeInput`` for URLs that are not http(s) or
    ///   XML with entity declarations; ``DownloadError/Code/unsafePath`` for a name that
    ///   would leave the download directory.
    public func manifest(
        fromAnswer data: Data, url: URL, maxSegments: Int = 1_000_000, maxDocumentSize: Int = 32 << 20
    ) throws(DownloadError) -> DownloadManifest {
        let answer: PlayurlAnswer
        switch try Self.syntax(of: data, url: url) {
        case .json: answer = try parseJSONAnswer(data, url: url, maxSegments: maxSegments, maxDocumentSize: maxDocumentSize)
        case .xml: answer = try parseXMLAnswer(data, url: url, maxSegments: maxSegments, maxDocumentSize: maxDocumentSize)
        }
        return try manifest(from: answer, url: url, maxSegments: maxSegments)
    }

    func manifest(from answer: PlayurlAnswer, url base: URL, maxSegments: Int) throws(DownloadError) -> DownloadManifest {
        let parts = answer.parts
        guard !parts.isEmpty else { throw noParts(hasDASH: false) }
        guard parts.count <= maxSegments else {
            throw DownloadError(
                .manifestTooLarge,
                "the playurl answer for cid \(payload.cid) has \(parts.count) durl parts, more than the limit of \(maxSegments) segments")
        }

        // Orders must number the parts 1…N, each once.
        var byOrder = [Int: PlayurlAnswer.Part](minimumCapacity: parts.count)
        for part in parts {
            guard let order = part.order else {
                throw invalid("\(part.location) has no order number")
            }
            if let first = byOrder[order] {
                throw invalid("\(part.location) repeats the order number \(order) of \(first.location)")
            }
            byOrder[order] = part
        }
        if let missing = (1...parts.count).first(where: { byOrder[$0] == nil }) {
            let stray = parts.first { !(1...parts.count).contains($0.order ?? 0) }
            var text = "the \(parts.count) durl parts must be numbered 1 to \(parts.count), but order \(missing) is missing"
            if let stray, let order = stray.order { text += " (\(stray.location) has order \(order))" }
            throw invalid(text)
        }

        let quality = answer.quality ?? payload.quality
        let format = Self.fileExtension(for: answer.format)
        let media = MediaInfo(kind: .muxed, identifier: String(quality), quality: String(quality))
        var segmentHeaders = HTTPHeaders()
        if let referer = payload.referer { segmentHeaders.add(name: "Referer", value: referer) }
        var metadata: [String: String] = [
            "cid": String(payload.cid), "quality": String(quality), "requested_quality": String(payload.quality),
            "format": answer.format ?? Self.defaultFormat, "parts": String(parts.count), "answer": answer.kind,
        ]
        if let aid = payload.aid { metadata["aid"] = String(aid) }
        if let timelength = answer.timelength { metadata["timelength"] = String(timelength) }
        if !answer.acceptQuality.isEmpty { metadata["accept_quality"] = answer.acceptQuality.joined(separator: ",") }

        var outputs: [DownloadOutput] = []
        outputs.reserveCapacity(parts.count)
        var deadlines: [Date] = []
        for order in 1...parts.count {
            let part = byOrder[order]!
            guard let primary = part.url, !primary.isEmpty else {
                throw invalid("\(part.location) (order \(order)) has no url")
            }
            var urls = [try URLSafety.resolve(primary, against: base, context: "the url of part \(order) of cid \(payload.cid)")]
            for (index, backup) in part.backupURLs.enumerated() where !backup.isEmpty {
                let url = try URLSafety.resolve(
                    backup, against: base, context: "backup url \(index + 1) of part \(order) of cid \(payload.cid)")
                if !urls.contains(url) { urls.append(url) }
            }
            if let size = part.size, size < 0 {
                throw invalid("\(part.location) (order \(order)) has a negative size \(size)")
            }
            var checksum: Checksum?
            if let md5 = part.md5, !md5.isEmpty {
                do {
                    checksum = try Checksum(.md5, hex: md5)
                } catch {
                    throw invalid("the md5 of \(part.location) (order \(order)) is not an MD5 digest: \(error.message)")
                }
            }
            if let length = part.length { metadata["part-\(order).length"] = String(length) }
            deadlines.append(contentsOf: urls.compactMap(Self.deadline))
            let name = try SafePath.relative("\(payload.cid)/part-\(order).\(format)")
            outputs.append(DownloadOutput(
                name: name,
                segments: [DownloadSegment(urls: urls, expectedSize: part.size, checksum: checksum, headers: segmentHeaders)],
                expectedSize: part.size, media: media))
        }
        // Signed CDN URLs carry their expiry (`deadline=<unix time>`); one already past is a
        // clock that disagrees with the server's, and a 403 will tell instead.
        let now = Date()
        let expiresAt = deadlines.filter { $0 > now }.min()
        return DownloadManifest(
            title: Self.title(cid: payload.cid, aid: payload.aid), outputs: outputs, expiresAt: expiresAt, sourceURL: base,
            metadata: metadata)
    }

    /// The file extension for the answer's `format`: `flv720`, `flv_p60` and the like are FLV
    /// files, `hdmp4` and `mp4` MP4 files; anything else is reduced to lowercase letters and
    /// digits (at most 16), and nothing at all to ``defaultFormat``.
    static func fileExtension(for format: String?) -> String {
        let cleaned = String(
            (format ?? "").lowercased().unicodeScalars
                .filter { ($0 >= "a" && $0 <= "z") || ($0 >= "0" && $0 <= "9") }
                .prefix(16)
                .map(Character.init))
        if cleaned.isEmpty { return defaultFormat }
        if cleaned.hasPrefix("flv") { return "flv" }
        if cleaned.hasSuffix("mp4") || cleaned.hasPrefix("mp4") { return "mp4" }
        return cleaned
    }

    /// The `deadline` query parameter of a signed URL, as a date.
    static func deadline(of url: URL) -> Date? {
        guard let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems,
            let value = items.first(where: { $0.name == "deadline" })?.value, let seconds = Int64(value), seconds > 0
        else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}
