import Foundation
import Tessera

/// A playurl API on a ``LoopbackOrigin``: one video (an aid) of three cids, each answered in
/// another way, and the media parts they name.
///
/// - The first cid (``jsonCid``) is answered in JSON (`{"code":0,"message":"0","data":{…}}`),
///   its `durl` listed out of order.
/// - The second (``xmlCid``) in the legacy XML (`<video><result>suee</result>…`), with
///   relative URLs in CDATA sections and `backup_url` lists.
/// - The third (``backupCid``) in JSON, every part's primary URL failing (404 for the first
///   part, 503 for the others) while its `backup_url`s work.
///
/// Every part is generated content (``OriginContent``) with its true `size` and `md5` in the
/// answer. The API is `/playurl/<cid>` (its query, `?qn={quality}&avid={aid}`, is ignored);
/// ``pluginArguments`` carries the template. A ``Scenario`` other than ``Scenario/standard``
/// changes what the first cid's API answers, for tests of the failure paths.
///
/// ```swift
/// let fixture = PlayurlFixture.install(on: origin)
/// // download fixture.inputs with fixture.pluginArguments into root, then:
/// let problems = await fixture.verify(downloadRoot: root)
/// ```
public struct PlayurlFixture: OriginFixture {
    /// What the first cid's API does.
    public enum Scenario: String, Sendable, Hashable, CaseIterable {
        /// Every cid answers correctly.
        case standard
        /// The first part of the JSON cid announces a wrong `md5`: the download cannot succeed.
        case wrongMD5
        /// The JSON cid's API answers its first call with URLs that answer `403` (expired
        /// signatures) and every later call with fresh ones: counted by the origin, the first
        /// request is redirected to the stale answer.
        case staleFirstAnswer
        /// The JSON cid's API answers `{"code":-404,"message":"video not found"}`.
        case apiError
    }

    /// How a cid's answer is written.
    public enum Encoding: String, Sendable, Hashable {
        /// `{"code":0,"data":{…}}`.
        case json
        /// `<video><result>suee</result>…</video>`.
        case xml
    }

    /// One `durl` part and the file it becomes.
    public struct Part: Sendable, Hashable {
        /// The part's `order`.
        public var order: Int
        /// Its size in bytes.
        public var size: Int64
        /// The origin path whose content the part is (the URL that works).
        public var contentPath: String
        /// The MD5 of that content, lowercase hex (what a correct answer announces).
        public var md5: String
        /// The file a correct download leaves, relative to the download root.
        public var outputName: String
    }

    /// One cid.
    public struct Video: Sendable, Hashable {
        /// The cid.
        public var cid: UInt64
        /// How its answer is written.
        public var encoding: Encoding
        /// The container its answer names (`flv`, `mp4`): the outputs' extension.
        public var format: String
        /// Its parts, by order.
        public var parts: [Part]
        /// The API path that answers for it.
        public var apiPath: String
        /// The paths of its primary URLs, when they fail (the backups then serve).
        public var failingPrimaryPaths: [String]
    }

    /// The message of the ``Scenario/apiError`` answer.
    public static let apiErrorMessage = "video not found"

    /// The scenario installed.
    public let scenario: Scenario
    /// The video's aid.
    public let aid: UInt64
    /// The three cids.
    public let videos: [Video]
    /// The API template, for `--plugin-arg playurl:api=…`.
    public let apiTemplate: String
    /// The stale parts' paths (``Scenario/staleFirstAnswer``): they answer `403`.
    public let stalePaths: [String]

    /// The cid answered in JSON (the one the scenarios change).
    public var jsonCid: UInt64 { videos[0].cid }
    /// The cid answered in XML.
    public var xmlCid: UInt64 { videos[1].cid }
    /// The cid whose primary URLs fail.
    public var backupCid: UInt64 { videos[2].cid }

    /// `playurl:<aid>/<cid>` for each cid.
    public var inputs: [String] { videos.map { "playurl:\(aid)/\($0.cid)" } }

    /// `playurl:api=<template>`.
    public var pluginArguments: [String] { ["playurl:api=\(apiTemplate)"] }

    /// The videos whose download completes in this scenario.
    public var completingVideos: [Video] {
        switch scenario {
        case .standard, .staleFirstAnswer: videos
        case .wrongMD5, .apiError: Array(videos.dropFirst())
        }
    }

    /// `<cid>/part-<order>.<format>` for each part that a download in this scenario completes.
    public var expectedFiles: [String] { completingVideos.flatMap { $0.parts.map(\.outputName) } }

    /// The video of `cid`.
    public func video(_ cid: UInt64) -> Video? { videos.first { $0.cid == cid } }

    /// How often the API was asked for `cid` (redirected first calls included).
    public func apiCalls(for cid: UInt64, on origin: LoopbackOrigin) -> Int {
        video(cid).map { origin.requestCount(for: $0.apiPath) } ?? 0
    }

    /// Installs the API answers and the media on `origin`.
    ///
    /// - Parameters:
    ///   - scenario: What the first cid's API does.
    ///   - aid: The video's aid.
    ///   - firstCid: The first of three consecutive cids; install fixtures with other cids
    ///     to have several on one origin.
    public static func install(
        on origin: LoopbackOrigin, scenario: Scenario = .standard, aid: UInt64 = 170_001, firstCid: UInt64 = 1001
    ) -> PlayurlFixture {
        let base = origin.baseURL.absoluteString
        let template = "\(base)/playurl/{cid}?qn={quality}&avid={aid}&fnval=0"
        let layouts: [(Encoding, String, [Int64])] = [
            (.json, "flv", [393_216, 12_345]),
            (.xml, "flv", [262_144, 200_000, 77_777]),
            (.json, "mp4", [300_000, 150_001]),
        ]
        var videos: [Video] = []
        var stalePaths: [String] = []
        for (index, (encoding, format, sizes)) in layouts.enumerated() {
            let cid = firstCid + UInt64(index)
            let parts = sizes.enumerated().map { offset, size in
                let order = offset + 1
                let path = "/media/\(aid)/\(cid)/\(cid)-\(order)-80.\(format)"
                return Part(
                    order: order, size: size, contentPath: path, md5: md5(of: path, size: size),
                    outputName: "\(cid)/part-\(order).\(format)")
            }
            for part in parts {
                origin.serve(part.contentPath, .generated(size: part.size, contentType: format == "mp4" ? "video/mp4" : "video/x-flv"))
            }
            let failing = index == 2 ? parts.map { "/cdn-primary/\(aid)/\(cid)/\($0.order).\(format)" } : []
            videos.append(Video(
                cid: cid, encoding: encoding, format: format, parts: parts, apiPath: "/playurl/\(cid)",
                failingPrimaryPaths: failing))
        }

        // The JSON cid: parts listed last first, absolute URLs with a signature-like query.
        let json = videos[0]
        var jsonParts = json.parts
        if scenario == .wrongMD5 { jsonParts[0].md5 = md5(of: "/not-the-part", size: 16) }
        origin.serve(json.apiPath, jsonAnswer(
            json, parts: jsonParts.reversed(),
            urls: { part in ["\(base)\(part.contentPath)?upsig=\(part.md5.prefix(8))&platform=pc"] }))
        switch scenario {
        case .standard, .wrongMD5:
            break
        case .apiError:
            origin.serve(json.apiPath, .text(
                #"{"code":-404,"message":"\#(apiErrorMessage)","ttl":1}"#, contentType: "application/json; charset=utf-8"))
        case .staleFirstAnswer:
            let stalePath = "/playurl-stale/\(json.cid)"
            stalePaths = json.parts.map { "/expired/\(aid)/\(json.cid)/\($0.order).\(json.format)" }
            for path in stalePaths { origin.inject(.status(403), at: path) }
            // Relative URLs: resolved against the answer's URL after the redirect.
            origin.serve(stalePath, jsonAnswer(
                json, parts: json.parts, urls: { part in ["/expired/\(aid)/\(json.cid)/\(part.order).\(json.format)?upsig=expired"] }))
            origin.inject(.redirect(to: "\(stalePath)?qn=80", status: 302), at: json.apiPath, times: 1)
        }

        // The XML cid: relative URLs in CDATA, a mirror (redirecting to the same bytes) per part.
        let xml = videos[1]
        for part in xml.parts {
            origin.inject(.redirect(to: part.contentPath), at: "/mirror\(part.contentPath)")
        }
        origin.serve(xml.apiPath, xmlAnswer(xml))

        // The third cid: every primary fails, the backups work.
        let backup = videos[2]
        for (part, path) in zip(backup.parts, backup.failingPrimaryPaths) {
            origin.inject(.status(part.order == 1 ? 404 : 503), at: path)
        }
        origin.serve(backup.apiPath, jsonAnswer(backup, parts: backup.parts) { part in
            ["\(base)\(backup.failingPrimaryPaths[part.order - 1])", "\(base)\(part.contentPath)", "\(base)/mirror\(part.contentPath)"]
        })
        for part in backup.parts {
            origin.inject(.redirect(to: part.contentPath), at: "/mirror\(part.contentPath)")
        }

        return PlayurlFixture(scenario: scenario, aid: aid, videos: videos, apiTemplate: template, stalePaths: stalePaths)
    }

    /// Problems with the files of ``completingVideos`` under `downloadRoot`.
    public func verify(downloadRoot: String) async -> [String] {
        var problems: [String] = []
        for video in completingVideos {
            for part in video.parts {
                if let problem = await Self.problem(
                    with: part.outputName, under: downloadRoot, size: part.size, content: OriginContent(path: part.contentPath))
                {
                    problems.append(problem)
                }
            }
        }
        return problems
    }

    // MARK: - Answers

    private static func md5(of path: String, size: Int64) -> String {
        Checksum.compute(.md5, bytes: OriginContent(path: path).bytes(0..<size)).hexDigest
    }

    /// Milliseconds of a part, as if it were 1 Mbit/s.
    private static func length(of part: Part) -> Int64 { part.size * 8 / 1000 }

    private static func jsonAnswer(_ video: Video, parts: [Part], urls: (Part) -> [String]) -> LoopbackOrigin.Resource {
        func quoted(_ text: String) -> String {
            "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                .replacingOccurrences(of: "/", with: "\\/") + "\""
        }
        let durl = parts.map { part -> String in
            let list = urls(part)
            return """
                {"order":\(part.order),"length":\(length(of: part)),"size":\(part.size),"ahead":"","vhead":"",\
                "url":\(quoted(list[0])),"backup_url":[\(list.dropFirst().map(quoted).joined(separator: ","))],"md5":"\(part.md5)"}
                """
        }
        let timelength = video.parts.reduce(Int64(0)) { $0 + length(of: $1) }
        let body = """
            {"code":0,"message":"0","ttl":1,"data":{"from":"local","result":"suc","message":"","quality":80,\
            "format":"\(video.format)","timelength":\(timelength),"accept_format":"flv,flv720,flv480,mp4",\
            "accept_description":["高清 1080P","高清 720P","清晰 480P"],"accept_quality":[80,64,32],"video_codecid":7,\
            "seek_param":"start","seek_type":"offset","durl":[\(durl.joined(separator: ","))],\
            "support_formats":[{"quality":80,"format":"flv","new_description":"1080P 高清"}]}}
            """
        return .text(body, contentType: "application/json; charset=utf-8")
    }

    private static func xmlAnswer(_ video: Video) -> LoopbackOrigin.Resource {
        let timelength = video.parts.reduce(Int64(0)) { $0 + length(of: $1) }
        var body = """
            <?xml version="1.0" encoding="UTF-8"?>
            <video>
            <result>suee</result>
            <timelength>\(timelength)</timelength>
            <format>\(video.format)</format>
            <accept_format><![CDATA[flv,flv720,flv480,mp4]]></accept_format>
            <accept_quality><![CDATA[80,64,32,16]]></accept_quality>
            <from><![CDATA[local]]></from>
            <seek_param><![CDATA[start]]></seek_param>
            <seek_type><![CDATA[offset]]></seek_type>

            """
        for part in video.parts {
            body += """
                <durl>
                <order>\(part.order)</order>
                <length>\(length(of: part))</length>
                <size>\(part.size)</size>
                <ahead><![CDATA[]]></ahead>
                <vhead><![CDATA[]]></vhead>
                <url><![CDATA[\(part.contentPath)?e=ig8euxZM2rNcNbdlhoNvNC8BqJIzNbfqXBvEqxTEto8BTrNvN0GvT90W5JZMkX_YN0MvXg8gNEV4NC8xNEV4N03eN0B5tZlqNxTEto8BTrNvNeZVuJ10Kj_g2UB02J0mN0B5tZlqNCNEto8BTrNvNC7MTX502C8f2jmMQJ6mqF2fka1mqx6gqj0eN0B599M=&deadline=&gen=playurlv2&og=hw]]></url>
                <backup_url>
                <url><![CDATA[/mirror\(part.contentPath)?e=x&og=cos]]></url>
                </backup_url>
                <md5>\(part.md5)</md5>
                </durl>

                """
        }
        body += "</video>\n"
        return .text(body, contentType: "text/xml; charset=utf-8")
    }
}
