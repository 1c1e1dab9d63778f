import Foundation
import Tessera

/// What a ``PlayurlEntity`` keeps in the store: everything needed to ask the API again after a
/// restart, without the command line's plugin arguments.
public struct PlayurlPayload: Codable, Sendable, Hashable {
    /// The cid: the page (part) of a video whose playurl is asked for.
    public var cid: UInt64
    /// The aid of the video the cid belongs to, when known; it groups the cids of one video.
    public var aid: UInt64?
    /// The quality code sent as `{quality}` (80 = 1080p, 64 = 720p, 32 = 480p, 16 = 360p).
    public var quality: Int
    /// The API endpoint as a template with `{cid}`, `{quality}` and (optionally) `{aid}`.
    public var api: String
    /// A `Referer` sent to the API and the media servers (Bilibili's CDN wants one), if any.
    public var referer: String?

    /// Creates a payload.
    public init(cid: UInt64, aid: UInt64? = nil, quality: Int = PlayurlEntity.defaultQuality, api: String, referer: String? = nil) {
        self.cid = cid
        self.aid = aid
        self.quality = quality
        self.api = api
        self.referer = referer
    }
}

/// A video page keyed by its **cid**, resolved through a *playurl* API into `durl` parts
/// (ZZDownloader's case): one output per part, each one segment with the part's `url`
/// followed by its `backup_url` mirrors, its `size` and its `md5`.
///
/// Inputs are `playurl:<cid>` and `playurl:<aid>/<cid>` (the aid groups the cids of one
/// video: aggregation key `aid:<aid>`). The endpoint is a template given with
/// `--plugin-arg playurl:api=URL`, e.g. `https://api.example.com/x/player/playurl?cid={cid}&qn={quality}&avid={aid}`;
/// the quality comes from `--format 64`, `--plugin-arg playurl:quality=64`, or defaults to 80,
/// and is the task's variant. `--plugin-arg playurl:referer=URL` adds a `Referer` header.
///
/// The answer is told apart by its first byte, not its `Content-Type`: JSON
/// (`{"code":0,"message":"0","data":{"quality":80,"format":"flv","durl":[…]}}`, also with the
/// play info under `result` or at the top level as older APIs send it) or the legacy XML
/// (`<video><result>suee</result>…<durl><order>1</order>…<url><![CDATA[…]]></url>
/// <backup_url><url>…</url></backup_url></durl></video>`). Parts are sorted by `order`,
/// which must number them 1 to N; outputs are named `<cid>/part-<order>.<format>`.
///
/// ```swift
/// let registry = EntityRegistry()
/// PlayurlEntity.register(in: registry)
/// var arguments = PluginArguments()
/// try arguments.add("playurl:api=https://api.example.com/playurl?cid={cid}&qn={quality}")
/// let entity = try registry.makeEntity(for: EntityInput("playurl:170001/1001", arguments: arguments))
/// ```
public final class PlayurlEntity: PayloadEntity<PlayurlPayload>, DownloadParserProtocol, @unchecked Sendable {
    /// `"playurl"`.
    public override class var entityType: String { "playurl" }

    /// The plugin's name in `playurl:<cid>` inputs and `--plugin-arg playurl:…` arguments.
    public static let plugin = "playurl"

    /// The quality asked for when neither `--format` nor `playurl:quality` names one (1080p).
    public static let defaultQuality = 80

    /// The format (container) used when the answer names none.
    public static let defaultFormat = "flv"

    /// Creates the entity for a cid (and the aid of its video); throws
    /// ``DownloadError/Code/invalidRequest`` for an API template that cannot work and
    /// ``DownloadError/Code/unsafeInput`` for one that is not http(s).
    public convenience init(
        cid: UInt64, aid: UInt64? = nil, quality: Int = PlayurlEntity.defaultQuality, api: String,
        referer: String? = nil, destinationDirectory: String = ""
    ) throws(DownloadError) {
        let payload = PlayurlPayload(cid: cid, aid: aid, quality: quality, api: api, referer: referer)
        try Self.validate(payload)
        self.init(
            payload: payload, entityKey: "cid:\(cid)", variantKey: String(quality), title: Self.title(cid: cid, aid: aid),
            aggregationKey: aid.map { "aid:\($0)" }, destinationDirectory: destinationDirectory)
    }

    // MARK: - Registration

    /// Accepts `playurl:<cid>` and `playurl:<aid>/<cid>`.
    public static var matchers: [EntityMatcher] {
        [
            EntityMatcher(
                plugin: plugin,
                summary: "playurl:<cid> or playurl:<aid>/<cid>: a video's parts through a playurl API (--plugin-arg playurl:api=URL)",
                rules: [.scheme(plugin)]
            ) { input, key in
                try PlayurlEntity(input: input, key: key)
            }
        ]
    }

    /// Registers the entity type and its matchers.
    public static func register(in registry: EntityRegistry) {
        registry.register(PlayurlEntity.self, matchers: matchers)
    }

    /// Builds the entity for an input's key (`<cid>` or `<aid>/<cid>`), reading `api`,
    /// `quality` and `referer` from the input's `playurl` plugin arguments and a numeric
    /// `format` as the quality.
    public convenience init(input: EntityInput, key: String) throws(DownloadError) {
        let (aid, cid) = try Self.parseKey(key)
        let arguments = input.arguments[Self.plugin]
        guard let api = arguments["api"]?.trimmingCharacters(in: .whitespaces), !api.isEmpty else {
            throw DownloadError(
                .invalidRequest,
                "playurl:\(key) needs the API endpoint: pass --plugin-arg playurl:api=URL, a template with {cid} and {quality} (and optionally {aid}), e.g. --plugin-arg 'playurl:api=https://api.example.com/playurl?cid={cid}&qn={quality}'")
        }
        let quality = try Self.quality(format: input.format, argument: arguments["quality"])
        let referer = arguments["referer"].flatMap { $0.isEmpty ? nil : $0 }
        try self.init(
            cid: cid, aid: aid, quality: quality, api: api, referer: referer,
            destinationDirectory: input.destinationDirectory)
    }

    // MARK: - Resolving

    /// Asks the API for the cid's parts and turns the answer into a manifest.
    public func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        let url = try apiURL()
        var headers = HTTPHeaders()
        if let referer = payload.referer { headers.add(name: "Referer", value: referer) }
        let document = try await context.fetch(url, headers: headers)
        return try manifest(
            fromAnswer: document.data, url: document.url, maxSegments: context.maxSegments,
            maxDocumentSize: context.maxDocumentSize)
    }

    /// The API URL for this entity: the template with `{cid}`, `{quality}` and `{aid}` filled
    /// in (an unknown aid becomes empty).
    public func apiURL() throws(DownloadError) -> URL {
        try Self.apiURL(for: payload)
    }

    // MARK: - Inputs

    /// `(aid, cid)` from `<cid>` or `<aid>/<cid>`; ``DownloadError/Code/invalidRequest`` for
    /// anything else.
    static func parseKey(_ key: String) throws(DownloadError) -> (aid: UInt64?, cid: UInt64) {
        let shape = "playurl inputs are playurl:<cid> or playurl:<aid>/<cid>, with decimal numbers (playurl:1001, playurl:170001/1001)"
        let parts = key.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2 else {
            throw DownloadError(.invalidRequest, "\"playurl:\(printable(key))\" is not a video: \(shape)")
        }
        func number(_ text: Substring, _ what: String) throws(DownloadError) -> UInt64 {
            guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                throw DownloadError(.invalidRequest, "the \(what) \"\(printable(String(text)))\" in \"playurl:\(printable(key))\" is not a decimal number: \(shape)")
            }
            guard let value = UInt64(text), value > 0 else {
                throw DownloadError(.invalidRequest, "the \(what) \"\(printable(String(text)))\" in \"playurl:\(printable(key))\" is not a positive 64-bit number: \(shape)")
            }
            return value
        }
        if parts.count == 2 {
            return (try number(parts[0], "aid"), try number(parts[1], "cid"))
        }
        return (nil, try number(parts[0], "cid"))
    }

    /// The quality from `--format` (a number, or `best`/`default` for the default) or the
    /// `quality` plugin argument, else ``defaultQuality``.
    static func quality(format: String?, argument: String?) throws(DownloadError) -> Int {
        func parse(_ text: String, _ source: String) throws(DownloadError) -> Int? {
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || ["best", "default"].contains(trimmed.lowercased()) { return nil }
            guard trimmed.utf8.count <= 9, trimmed.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                let value = Int(trimmed)
            else {
                throw DownloadError(
                    .invalidRequest,
                    "the playurl quality is a number such as 80 (1080p), 64 (720p), 32 (480p) or 16 (360p); \(source) \"\(printable(trimmed))\" is not one")
            }
            return value
        }
        if let format, let value = try parse(format, "the format") { return value }
        if let argument, let value = try parse(argument, "playurl:quality=") { return value }
        return defaultQuality
    }

    /// Checks the template and the referer before anything is stored.
    static func validate(_ payload: PlayurlPayload) throws(DownloadError) {
        _ = try apiURL(for: payload)
        if let referer = payload.referer,
            referer.utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F })
        {
            throw DownloadError(.invalidRequest, "the playurl referer contains a control character")
        }
    }

    static func apiURL(for payload: PlayurlPayload) throws(DownloadError) -> URL {
        let template = payload.api
        guard template.contains("{cid}") else {
            throw DownloadError(
                .invalidRequest,
                "the playurl API template must contain {cid} (and {quality}), e.g. https://api.example.com/playurl?cid={cid}&qn={quality}; got \"\(printable(template))\"")
        }
        let text = template.replacingOccurrences(of: "{cid}", with: String(payload.cid))
            .replacingOccurrences(of: "{quality}", with: String(payload.quality))
            .replacingOccurrences(of: "{aid}", with: payload.aid.map(String.init) ?? "")
        if let open = text.firstIndex(of: "{"), let close = text[open...].firstIndex(of: "}") {
            throw DownloadError(
                .invalidRequest,
                "the playurl API template has an unknown placeholder \(text[open...close]); it knows {cid}, {quality} and {aid}")
        }
        return try URLSafety.resolve(text, against: nil, context: "the playurl API URL")
    }

    static func title(cid: UInt64, aid: UInt64?) -> String {
        aid.map { "aid \($0) cid \(cid)" } ?? "cid \(cid)"
    }

    static func printable(_ text: String) -> String { UntrustedText.printable(text, limit: 120, marksCut: false) }
}
