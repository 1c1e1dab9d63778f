import ArgumentParser
import Foundation
import Tessera

/// `tessera resolve`: what a manifest offers, without downloading.
struct ResolveCommand: AsyncParsableCommand {
    static let configuration = CommandMain.subcommand(CommandConfiguration(
        commandName: "resolve",
        abstract: "Resolve inputs without downloading: every output a manifest offers, with its segments.",
        discussion: "Outputs the default (or --format) selection takes are marked. Like `yt-dlp -J`, for debugging a plugin."
    ))

    @OptionGroup var input: InputOptions
    @OptionGroup var network: NetworkOptions

    @Flag(help: "One JSON document (schema: docs/resolve.schema.json).")
    var json = false

    @Flag(name: .customLong("all-segments"), help: "List every segment (the default shows the first 10 of each output).")
    var allSegments = false

    func run() async throws {
        let inputs = try input.allInputs()
        let arguments = try input.parsedPluginArguments()
        let format = try input.formatSelector()
        var configuration = CurlEngine.Configuration()
        configuration.globalRateLimit = try network.rateLimit()
        if let agent = network.userAgent { configuration.userAgent = agent }
        if let proxy = network.proxy { configuration.proxy = proxy.isEmpty ? .none : .url(proxy) }
        let engine = try CurlEngine(configuration: configuration)
        let context = ResolveContext(engine: engine, headers: try network.headerFields(), documentTimeout: network.documentTimeout)
        let registry = makeRegistry()
        let resolver = InputResolver(registry: registry, context: context, arguments: arguments, format: format)
        // The JSON document is written as the entities resolve, each segment as it is read from
        // the manifest's compact form: never the whole document, nor every URL, in memory.
        var stream = JSONStream()
        var entities = 0
        if json { stream.raw("{\"entities\":[") }
        var errors: [[String: Any]] = []
        for text in inputs {
            do {
                for entity in try await resolver.entities(for: text) {
                    do {
                        guard let parser = entity as? any DownloadParserProtocol else {
                            throw DownloadError(.invalidRequest, "\(type(of: entity).entityType) has no parser")
                        }
                        let manifest = try await parser.resolve(in: context)
                        try manifest.validate(maxSegments: context.maxSegments)
                        // The JSON document lists every segment; the text shows the first few.
                        if json {
                            stream.raw(entities == 0 ? "\n" : ",\n")
                            ResolveReport.write(entity, input: text, manifest: manifest, to: &stream)
                            entities += 1
                        } else {
                            Terminal.outLines(ResolveReport.text(entity, manifest: manifest, allSegments: allSegments))
                        }
                    } catch {
                        let failure = error as? DownloadError ?? DownloadError(.manifestInvalid, "\(error)")
                        errors.append(["input": text, "id": entity.taskID.description, "code": failure.code.description, "message": failure.message])
                        Terminal.err("tessera: \(text): \(failure.message)")
                    }
                }
            } catch {
                errors.append(["input": text, "code": error.code.description, "message": error.message])
                Terminal.err("tessera: \(text): \(error.message)")
            }
        }
        if json {
            stream.raw("\n],\"errors\":")
            stream.value(errors)
            stream.raw(",\"tessera\":")
            stream.string(Tessera.version)
            stream.raw("}\n")
            stream.flush()
        }
        await engine.shutdown()
        if !errors.isEmpty { throw ExitCode(1) }
    }
}

/// How `resolve` shows a manifest.
enum ResolveReport {
    /// An entity's JSON object (as ``entity(_:input:manifest:)`` makes it, keys sorted), written
    /// to `stream` output by output and segment by segment, one segment a line.
    static func write(_ entity: DownloadBaseEntity, input: String, manifest: DownloadManifest, to stream: inout JSONStream) {
        var fields = Self.entity(entity, input: input, manifest: DownloadManifest(title: manifest.title, outputs: []))
        fields["sourceURL"] = manifest.sourceURL?.absoluteString
        if let expiry = manifest.expiresAt { fields["expiresAt"] = ISO8601DateFormatter().string(from: expiry) }
        if !manifest.metadata.isEmpty { fields["metadata"] = manifest.metadata }
        fields["outputs"] = nil
        writeObject(fields, to: &stream, inserting: "outputs") { stream in
            stream.raw("[")
            for (index, output) in manifest.outputs.enumerated() {
                stream.raw(index == 0 ? "\n" : ",\n")
                var outputFields = Self.output(DownloadOutput(
                    name: output.name, assembly: output.assembly, segments: [], expectedSize: output.expectedSize,
                    checksum: output.checksum, isSelected: output.isSelected, media: output.media))
                outputFields["segments"] = nil
                outputFields["size"] = output.knownSize
                writeObject(outputFields, to: &stream, inserting: "segments") { stream in
                    stream.raw("[")
                    let segments = output.segments
                    for index in segments.indices {
                        stream.raw(index == 0 ? "\n" : ",\n")
                        if let urls = segments.plainURLTexts(at: index) {
                            stream.raw("{\"urls\":")
                            stream.value(urls)
                            stream.raw("}")
                        } else {
                            stream.value(segment(segments[index]))
                        }
                    }
                    stream.raw("\n]")
                }
            }
            stream.raw("\n]")
        }
    }

    /// `fields` as a JSON object with sorted keys, the value of `key` written by `body` at its
    /// place among them.
    private static func writeObject(
        _ fields: [String: Any], to stream: inout JSONStream, inserting key: String, _ body: (inout JSONStream) -> Void
    ) {
        stream.raw("{")
        var first = true
        for name in (Array(fields.keys) + [key]).sorted() {
            stream.raw(first ? "" : ",")
            first = false
            stream.string(name)
            stream.raw(":")
            if name == key { body(&stream) } else { stream.value(fields[name]!) }
        }
        stream.raw("}")
    }

    static func entity(_ entity: DownloadBaseEntity, input: String, manifest: DownloadManifest) -> [String: Any] {
        var object: [String: Any] = [
            "input": input, "id": entity.taskID.description, "type": type(of: entity).entityType,
            "key": entity.entityKey, "variant": entity.variantKey, "title": manifest.title ?? entity.title,
            "outputs": manifest.outputs.map(output),
        ]
        if let group = entity.aggregationKey { object["group"] = group }
        if let source = manifest.sourceURL { object["sourceURL"] = source.absoluteString }
        if let expiry = manifest.expiresAt { object["expiresAt"] = ISO8601DateFormatter().string(from: expiry) }
        if !manifest.metadata.isEmpty { object["metadata"] = manifest.metadata }
        return object
    }

    static func output(_ output: DownloadOutput) -> [String: Any] {
        var object: [String: Any] = [
            "name": output.name, "assembly": output.assembly.rawValue, "selected": output.isSelected,
            "segments": output.segments.map(segment),
        ]
        if let size = output.knownSize { object["size"] = size }
        if let checksum = output.checksum { object["checksum"] = checksum.description }
        if let media = output.media {
            var info: [String: Any] = ["kind": media.kind.rawValue]
            if let value = media.identifier { info["id"] = value }
            if let value = media.bandwidth { info["bandwidth"] = value }
            if let value = media.width { info["width"] = value }
            if let value = media.height { info["height"] = value }
            if let value = media.codecs { info["codecs"] = value }
            if let value = media.language { info["language"] = value }
            if let value = media.quality { info["quality"] = value }
            object["media"] = info
        }
        return object
    }

    static func segment(_ segment: DownloadSegment) -> [String: Any] {
        var object: [String: Any] = ["urls": segment.urls.map(\.absoluteString)]
        if let range = segment.range {
            object["range"] = ["offset": range.offset, "length": range.length as Any].compactMapValues { $0 is NSNull ? nil : $0 }
        }
        if let size = segment.knownSize { object["size"] = size }
        if let checksum = segment.checksum { object["checksum"] = checksum.description }
        if let offset = segment.offset { object["offset"] = offset }
        if let name = segment.name { object["name"] = name }
        if let encryption = segment.encryption {
            object["encryption"] = [
                "method": encryption.method.rawValue, "keyURL": encryption.keyURL.absoluteString,
                "iv": encryption.iv.map { String(format: "%02x", $0) }.joined(),
            ]
        }
        return object
    }

    static func text(_ entity: DownloadBaseEntity, manifest: DownloadManifest, allSegments: Bool) -> String {
        var lines = ["\(entity.taskID) — \(manifest.title ?? entity.title)"]
        if let group = entity.aggregationKey { lines.append("  group: \(group)") }
        for output in manifest.outputs {
            var line = "  [\(output.isSelected ? "x" : " ")] \(output.name)  \(output.assembly.rawValue), \(output.segments.count) segment\(output.segments.count == 1 ? "" : "s")"
            if let size = output.knownSize { line += ", \(ByteCount.format(size))" }
            if let media = output.media {
                var facts = [media.kind.rawValue]
                if let bandwidth = media.bandwidth { facts.append("\(bandwidth / 1000) kb/s") }
                if let width = media.width, let height = media.height { facts.append("\(width)x\(height)") }
                if let codecs = media.codecs { facts.append(codecs) }
                if let language = media.language { facts.append(language) }
                line += " [\(facts.joined(separator: ", "))]"
            }
            if let checksum = output.checksum { line += " \(checksum)" }
            lines.append(line)
            let shown = allSegments ? output.segments[...] : output.segments.prefix(10)
            for (index, segment) in shown.enumerated() {
                var text = "      \(index + 1). \(segment.urls[0].absoluteString)"
                if segment.urls.count > 1 { text += " (+\(segment.urls.count - 1) mirror\(segment.urls.count == 2 ? "" : "s"))" }
                if let range = segment.range { text += " bytes \(range)" }
                if let size = segment.knownSize { text += " \(size) B" }
                if let checksum = segment.checksum { text += " \(checksum.algorithm.rawValue)" }
                if segment.encryption != nil { text += " AES-128" }
                lines.append(text)
            }
            if shown.count < output.segments.count {
                lines.append("      … \(output.segments.count - shown.count) more (--all-segments)")
            }
        }
        return lines.joined(separator: "\n")
    }
}
