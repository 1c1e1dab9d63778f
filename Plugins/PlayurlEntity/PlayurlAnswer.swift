import Foundation
import Tessera

/// A playurl answer, JSON or XML, reduced to what a manifest needs. Values are as the server
/// wrote them; ``PlayurlEntity/manifest(fromAnswer:url:maxSegments:maxDocumentSize:)`` checks them.
struct PlayurlAnswer: Sendable {
    /// One `durl` entry.
    struct Part: Sendable {
        var order: Int?
        var length: Int64?
        var size: Int64?
        var url: String?
        var backupURLs: [String]
        var md5: String?
        /// Where the part is in the document, for messages: `"data.durl[1]"`, `the <durl> at line 12`.
        var location: String
    }

    /// `"JSON"` or `"XML"`, for messages.
    var kind: String
    var quality: Int?
    var format: String?
    var timelength: Int64?
    var acceptQuality: [String]
    var parts: [Part]
}

/// Where a JSON answer keeps its play info.
private enum JSONPlacement {
    case data, result, topLevel

    var prefix: String {
        switch self {
        case .data: "data."
        case .result: "result."
        case .topLevel: ""
        }
    }
}

extension PlayurlEntity {
    /// Which syntax an answer is in, told by its first character that is not white space (after
    /// a byte-order mark; UTF-8, or UTF-16 with one): `{` for JSON, `<` for XML.
    enum AnswerSyntax: Sendable, Equatable {
        case json, xml
    }

    static func syntax(of data: Data, url: URL) throws(DownloadError) -> AnswerSyntax {
        let isSpace = { (unit: UInt16) in unit == 0x20 || unit == 0x09 || unit == 0x0A || unit == 0x0D }
        // The first code unit that is not white space, and its byte offset.
        let first: (unit: UInt16, offset: Int)? = data.withUnsafeBytes { bytes in
            if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) {
                // UTF-16 with a byte-order mark, which both parsers read: look at code units.
                let bigEndian = bytes[0] == 0xFE
                for offset in stride(from: 2, to: bytes.count - 1, by: 2) {
                    let (high, low) = bigEndian ? (bytes[offset], bytes[offset + 1]) : (bytes[offset + 1], bytes[offset])
                    let unit = UInt16(high) << 8 | UInt16(low)
                    if !isSpace(unit) { return (unit, offset) }
                }
                return nil
            }
            let start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
            return bytes[start...].firstIndex { !isSpace(UInt16($0)) }.map { (UInt16(bytes[$0]), $0) }
        }
        guard let first else {
            throw DownloadError(.manifestInvalid, "the playurl API at \(url.absoluteString) answered an empty document", url: url.absoluteString)
        }
        switch first.unit {
        case 0x7B: return .json  // {
        case 0x3C: return .xml  // <
        default:
            let start = String(decoding: data.dropFirst(first.offset).prefix(40), as: UTF8.self)
            throw DownloadError(
                .manifestInvalid,
                "the playurl API at \(url.absoluteString) answered neither JSON nor XML: the answer starts with \"\(printable(start))\"",
                url: url.absoluteString)
        }
    }

    // MARK: - JSON

    /// Parses a JSON answer: `{"code": 0, "message": "0", "data": {…}}`, the same with
    /// `result` instead of `data` (PGC APIs), or the play info itself at the top level (the
    /// old interface). A non-zero `code` is the server's refusal, quoted.
    func parseJSONAnswer(_ data: Data, url: URL, maxSegments: Int, maxDocumentSize: Int) throws(DownloadError) -> PlayurlAnswer {
        let root: JSONValue
        do {
            root = try JSONManifest.parse(data, limit: maxDocumentSize)
        } catch {
            throw rephrase(error, "the playurl API's JSON answer")
        }
        guard root.object != nil else {
            throw invalid("the playurl API's JSON answer is not an object")
        }
        if let code = root["code"], !code.isNull {
            guard let number = code.int else {
                throw invalid("the playurl API's JSON answer has a \"code\" that is not a whole number")
            }
            if number != 0 {
                throw refusal(code: number, message: root["message"]?.string ?? root["msg"]?.string)
            }
        }
        let placement: JSONPlacement
        if root["data"]?.object != nil {
            placement = .data
        } else if root["result"]?.object != nil {
            placement = .result
        } else if root["durl"] != nil || root["dash"] != nil || root["result"]?.string != nil {
            placement = .topLevel
            if let result = root["result"]?.string,
                !["suee", "success", "suc"].contains(result.trimmingCharacters(in: .whitespaces).lowercased())
            {
                throw refusal(result: result, message: root["message"]?.string)
            }
        } else {
            throw invalid("the playurl API's JSON answer has no play info: neither \"data\" nor \"result\" is an object, and there is no \"durl\"")
        }
        let info: JSONValue? =
            switch placement {
            case .data: root["data"]
            case .result: root["result"]
            case .topLevel: root
            }
        // Count before anything is built.
        let count = info?["durl"]?.array?.count ?? 0
        guard count <= maxSegments else {
            throw DownloadError(
                .manifestTooLarge,
                "the playurl answer for cid \(payload.cid) has \(count) durl parts, more than the limit of \(maxSegments) segments",
                url: url.absoluteString)
        }

        let playInfo: JSONPlayInfo
        do {
            switch placement {
            case .data: playInfo = try JSONManifest.decode(JSONDataEnvelope.self, from: data, limit: maxDocumentSize).data
            case .result: playInfo = try JSONManifest.decode(JSONResultEnvelope.self, from: data, limit: maxDocumentSize).result
            case .topLevel: playInfo = try JSONManifest.decode(JSONPlayInfo.self, from: data, limit: maxDocumentSize)
            }
        } catch {
            throw rephrase(error, "the playurl API's JSON answer")
        }
        if (playInfo.durl ?? []).isEmpty {
            throw noParts(hasDASH: playInfo.dash != nil && playInfo.dash?.isNull == false)
        }
        let acceptQuality: [String]
        switch playInfo.acceptQuality {
        case .array(let values): acceptQuality = values.compactMap { $0.int.map(String.init) ?? $0.string }
        case .string(let text): acceptQuality = Self.commaList(text)
        default: acceptQuality = []
        }
        return PlayurlAnswer(
            kind: "JSON", quality: playInfo.quality, format: playInfo.format, timelength: playInfo.timelength,
            acceptQuality: acceptQuality,
            parts: (playInfo.durl ?? []).enumerated().map { index, part in
                PlayurlAnswer.Part(
                    order: part.order, length: part.length, size: part.size, url: part.url,
                    backupURLs: (part.backupURL ?? []).compactMap { $0 }, md5: part.md5,
                    location: "\"\(placement.prefix)durl[\(index)]\"")
            })
    }

    // MARK: - XML

    /// Parses the legacy XML answer: `<video><result>suee</result>…<durl>…</durl></video>`.
    func parseXMLAnswer(_ data: Data, url: URL, maxSegments: Int, maxDocumentSize: Int) throws(DownloadError) -> PlayurlAnswer {
        var options = XMLParseOptions()
        options.maxDocumentSize = min(options.maxDocumentSize, maxDocumentSize)
        let document: SafeXMLDocument
        do {
            document = try SafeXMLDocument.parse(data, options: options, baseURL: url)
        } catch {
            throw rephrase(error, "the playurl API's XML answer")
        }
        let root = document.root
        guard root.name == "video", root.namespaceURI == nil else {
            let qualified = root.namespaceURI.map { "<\(root.name)> in the namespace \($0)" } ?? "<\(root.name)>"
            throw invalid("the playurl API's XML answer has the root element \(qualified) at line \(root.line), not <video> (without a namespace)")
        }
        guard let resultElement = child("result", of: root) else {
            throw invalid("the playurl API's XML answer has no <result> in <video> at line \(root.line)")
        }
        let result = resultElement.text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard ["suee", "success"].contains(result.lowercased()) else {
            throw refusal(
                result: result,
                message: child("message", of: root)?.text.trimmingCharacters(in: .whitespacesAndNewlines),
                line: resultElement.line)
        }
        // Count before anything is built.
        let countText = try root.evaluateString("count(*[local-name()='durl' and namespace-uri()=''])")
        let count = Int(Double(countText) ?? 0)
        guard count <= maxSegments else {
            throw DownloadError(
                .manifestTooLarge,
                "the playurl answer for cid \(payload.cid) has \(count) <durl> parts, more than the limit of \(maxSegments) segments",
                url: url.absoluteString)
        }
        guard count > 0 else {
            throw noParts(hasDASH: child("dash", of: root) != nil)
        }
        var parts: [PlayurlAnswer.Part] = []
        parts.reserveCapacity(count)
        for durl in root.children where durl.name == "durl" && durl.namespaceURI == nil {
            let location = "the <durl> at line \(durl.line)"
            let backups = child("backup_url", of: durl).map { list in
                list.children.filter { $0.name == "url" && $0.namespaceURI == nil }.map {
                    $0.text.trimmingCharacters(in: .whitespacesAndNewlines)
                }
            } ?? []
            var order: Int?
            if let value = try integer("order", in: durl) {
                guard let exact = Int(exactly: value) else { throw invalid("the <order> of \(location) is out of range") }
                order = exact
            }
            parts.append(PlayurlAnswer.Part(
                order: order,
                length: try integer("length", in: durl), size: try integer("size", in: durl),
                url: child("url", of: durl)?.text.trimmingCharacters(in: .whitespacesAndNewlines),
                backupURLs: backups,
                md5: child("md5", of: durl)?.text.trimmingCharacters(in: .whitespacesAndNewlines),
                location: location))
        }
        let quality = try integer("quality", in: root).flatMap { Int(exactly: $0) }
        return PlayurlAnswer(
            kind: "XML", quality: quality,
            format: child("format", of: root)?.text.trimmingCharacters(in: .whitespacesAndNewlines),
            timelength: try integer("timelength", in: root),
            acceptQuality: child("accept_quality", of: root).map { Self.commaList($0.text) } ?? [],
            parts: parts)
    }

    /// The first child element `name` in no namespace (found without listing every child, so
    /// a `<video>` of many parts is not walked more than needed).
    private func child(_ name: String, of element: SafeXMLElement) -> SafeXMLElement? {
        guard let first = element.firstChild(named: name) else { return nil }
        if first.namespaceURI == nil { return first }
        return element.children.first { $0.name == name && $0.namespaceURI == nil }
    }

    /// The whole number in the child element `name`, `nil` when it is absent or empty.
    private func integer(_ name: String, in element: SafeXMLElement) throws(DownloadError) -> Int64? {
        guard let child = child(name, of: element) else { return nil }
        let text = child.text.trimmingCharacters(in: .whitespacesAndNewlines)
        if text.isEmpty { return nil }
        guard let value = Int64(text) else {
            throw invalid("the <\(name)> at line \(child.line) is not a whole number: \"\(Self.printable(text))\"")
        }
        return value
    }

    static func commaList(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
    }

    // MARK: - Errors

    /// ``DownloadError/Code/manifestInvalid`` about this cid's answer.
    func invalid(_ message: String) -> DownloadError {
        DownloadError(.manifestInvalid, "cid \(payload.cid): \(message)")
    }

    /// The same error, its message placed in context (the code is kept: `unsafeInput` stays
    /// `unsafeInput`).
    func rephrase(_ error: DownloadError, _ what: String) -> DownloadError {
        var error = error
        error.message = "cid \(payload.cid): \(what) cannot be used: \(error.message)"
        return error
    }

    /// The server said no with a code (JSON).
    func refusal(code: Int, message: String?) -> DownloadError {
        let said = message.map { "\"\(Self.printable($0))\"" } ?? "no message"
        return DownloadError(
            .manifestInvalid,
            "the playurl API refused cid \(payload.cid) (quality \(payload.quality)) with code \(code): \(said)")
    }

    /// The server said no with a `result` (XML, old JSON).
    func refusal(result: String, message: String?, line: Int? = nil) -> DownloadError {
        var text = "the playurl API refused cid \(payload.cid) (quality \(payload.quality)): result \"\(Self.printable(result))\""
        if let line { text += " at line \(line)" }
        text += ", not \"suee\""
        if let message, !message.isEmpty { text += ": \"\(Self.printable(message))\"" }
        return DownloadError(.manifestInvalid, text)
    }

    func noParts(hasDASH: Bool) -> DownloadError {
        var text = "the playurl answer for cid \(payload.cid) has no durl parts"
        if hasDASH {
            text += " (it offers DASH streams instead: ask the API for FLV/MP4, e.g. fnval=0 or fnval=1 in the template)"
        }
        return DownloadError(.manifestInvalid, text)
    }
}

// MARK: - JSON shapes

/// `{"data": {…}}`.
private struct JSONDataEnvelope: Decodable {
    var data: JSONPlayInfo
}

/// `{"result": {…}}`.
private struct JSONResultEnvelope: Decodable {
    var result: JSONPlayInfo
}

/// The play info; unknown keys are ignored.
private struct JSONPlayInfo: Decodable {
    var quality: Int?
    var format: String?
    var timelength: Int64?
    var acceptQuality: JSONValue?
    var durl: [JSONPart]?
    var dash: JSONValue?

    enum CodingKeys: String, CodingKey {
        case quality, format, timelength, durl, dash
        case acceptQuality = "accept_quality"
    }
}

/// One `durl` entry.
private struct JSONPart: Decodable {
    var order: Int?
    var length: Int64?
    var size: Int64?
    var url: String?
    var backupURL: [String?]?
    var md5: String?

    enum CodingKeys: String, CodingKey {
        case order, length, size, url, md5
        case backupURL = "backup_url"
    }
}
