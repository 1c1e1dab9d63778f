import Foundation

/// Knows every entity type: by name, to rebuild stored entities, and by the inputs it accepts,
/// so a command line picks a plugin without a hard-coded switch (as yt-dlp's `_VALID_URL`).
///
/// ```swift
/// let registry = EntityRegistry()              // knows DirectEntity for plain URLs
/// registry.register(PlayurlEntity.self, matchers: [PlayurlEntity.matcher])
/// let entity = try registry.makeEntity(for: EntityInput("playurl:1001"))
/// ```
public final class EntityRegistry: Sendable {
    private struct State {
        var entityTypes: [String: DownloadBaseEntity.Type] = [:]
        var groupTypes: [String: DownloadTaskGroup.Type] = [:]
        var matchers: [EntityMatcher] = []
    }

    private let state = Locked(State())

    /// Creates a registry; with `builtins` it knows ``DirectEntity`` and its matcher (the
    /// fallback for any http or https URL).
    public init(builtins: Bool = true) {
        register(group: DownloadTaskGroup.self)
        if builtins { register(DirectEntity.self, matchers: [DirectEntity.matcher]) }
    }

    /// Registers an entity class (and its group class) and the inputs it accepts.
    public func register(_ type: DownloadBaseEntity.Type, matchers: [EntityMatcher] = []) {
        state.withLock { state in
            state.entityTypes[type.entityType] = type
            state.groupTypes[type.groupType.groupType] = type.groupType
            state.matchers.append(contentsOf: matchers)
            // Highest priority first; among equals, the earliest registered.
            state.matchers = state.matchers.enumerated().sorted {
                $0.element.priority != $1.element.priority ? $0.element.priority > $1.element.priority : $0.offset < $1.offset
            }.map(\.element)
        }
    }

    /// Registers a group class, for groups whose entities are not registered (yet).
    public func register(group: DownloadTaskGroup.Type) {
        state.withLock { $0.groupTypes[group.groupType] = group }
    }

    /// The entity class registered under `name`.
    public func entityType(named name: String) -> DownloadBaseEntity.Type? {
        state.withLock { $0.entityTypes[name] }
    }

    /// The group class registered under `name`, or ``DownloadTaskGroup`` itself.
    public func groupType(named name: String) -> DownloadTaskGroup.Type {
        state.withLock { $0.groupTypes[name] } ?? DownloadTaskGroup.self
    }

    /// Every entity type name, sorted.
    public var entityTypeNames: [String] { state.withLock { $0.entityTypes.keys.sorted() } }

    /// Every matcher, in the order they are tried.
    public var matchers: [EntityMatcher] { state.withLock { $0.matchers } }

    /// Makes the stored entity again; ``DownloadError/Code/noMatchingEntity`` when its type is
    /// not registered (a plugin that is gone), ``DownloadError/Code/storeFailure`` when its
    /// payload no longer decodes.
    public func rebuild(_ record: EntityRecord) throws(DownloadError) -> DownloadBaseEntity {
        guard let type = entityType(named: record.entityType) else {
            throw DownloadError(.noMatchingEntity, "no entity type \"\(record.entityType)\" is registered (is its plugin missing?)")
        }
        do {
            return try type.init(record: record)
        } catch let error as DownloadError {
            throw DownloadError(.storeFailure, "the stored \(record.entityType) entity \(record.entityKey) cannot be rebuilt: \(error.message)")
        } catch {
            throw DownloadError(.storeFailure, "the stored \(record.entityType) entity \(record.entityKey) cannot be rebuilt: \(error)")
        }
    }

    /// The first matcher (by priority) that accepts `input`, with the key it extracted.
    public func match(_ input: EntityInput) -> (matcher: EntityMatcher, key: String)? {
        for matcher in matchers {
            if let key = matcher.key(for: input) { return (matcher, key) }
        }
        return nil
    }

    /// The entities for an input: one, or several when the matcher expands the input (a
    /// Metalink document is one task per file). `context` lets an expander fetch what it needs.
    public func makeEntities(for input: EntityInput, context: ResolveContext) async throws(DownloadError)
        -> [DownloadBaseEntity]
    {
        guard let (matcher, key) = match(input), let expand = matcher.expand else {
            return [try makeEntity(for: input)]
        }
        do {
            let entities = try await expand(input, key, context)
            guard !entities.isEmpty else {
                throw DownloadError(.manifestInvalid, "the \(matcher.plugin) plugin found nothing to download in \"\(input.text)\"")
            }
            return entities
        } catch let error as DownloadError {
            throw error
        } catch {
            throw DownloadError(.noMatchingEntity, "the \(matcher.plugin) plugin refused \"\(input.text)\": \(error)")
        }
    }

    /// Makes the entity for an input: the highest-priority matcher that accepts it builds it.
    public func makeEntity(for input: EntityInput) throws(DownloadError) -> DownloadBaseEntity {
        if let scheme = input.pluginScheme, !matchers.contains(where: { $0.acceptsScheme(scheme) }),
            input.url == nil
        {
            throw DownloadError(.noMatchingEntity, "no plugin is called \"\(scheme)\" (see `tessera plugins`)")
        }
        guard let matched = match(input) else {
            throw DownloadError(.noMatchingEntity, "no plugin accepts \"\(SafePath.printable(input.text))\"")
        }
        return try makeEntity(for: input, matched: matched)
    }

    /// Makes the entity for an input with the matcher ``match(_:)`` found for it (the input is
    /// not matched again).
    public func makeEntity(for input: EntityInput, matched: (matcher: EntityMatcher, key: String)) throws(DownloadError)
        -> DownloadBaseEntity
    {
        let (matcher, key) = matched
        do {
            return try matcher.make(input, key)
        } catch let error as DownloadError {
            throw error
        } catch {
            throw DownloadError(.noMatchingEntity, "the \(matcher.plugin) plugin refused \"\(input.text)\": \(error)")
        }
    }
}

/// What the user asked for, as a registry sees it.
public struct EntityInput: Sendable {
    /// The input as typed: a URL or `plugin:key`.
    public var text: String
    /// The input as an `http`/`https` URL, when it is one.
    public var url: URL?
    /// The `Content-Type` a probe of the URL returned, when the caller probed it.
    public var contentType: String?
    /// Arguments for plugins (`--plugin-arg playurl:api=...`).
    public var arguments: PluginArguments
    /// A format selector (`best`, `worst`, an id, `all`), for plugins with variants.
    public var format: String?
    /// Where outputs go, relative to the download root.
    public var destinationDirectory: String
    /// The extension of the URL's path, lowercased (for ``EntityMatcher/Rule/pathExtensions(_:)``).
    let pathExtension: String?

    /// Creates an input.
    public init(
        _ text: String, contentType: String? = nil, arguments: PluginArguments = PluginArguments(),
        format: String? = nil, destinationDirectory: String = ""
    ) {
        self.text = Self.trimmed(text)
        let candidate = URL(string: self.text)
        if let scheme = candidate?.scheme?.lowercased(), scheme == "http" || scheme == "https", candidate?.host != nil {
            url = candidate
        } else {
            url = nil
        }
        pathExtension = url.flatMap(EntityMatcher.pathExtension(of:))?.lowercased()
        self.contentType = contentType
        self.arguments = arguments
        self.format = format
        self.destinationDirectory = destinationDirectory
    }

    /// `text` without the white space and line breaks around it (as `trimmingCharacters(in:
    /// .whitespacesAndNewlines)`, without a trip through `NSString` per input).
    static func trimmed(_ text: String) -> String {
        // Nothing to trim when both ends are visible ASCII (as a URL's are).
        if let first = text.utf8.first, let last = text.utf8.last, (0x21...0x7e).contains(first), (0x21...0x7e).contains(last) {
            return text
        }
        let scalars = text.unicodeScalars
        let space = CharacterSet.whitespacesAndNewlines
        guard let first = scalars.firstIndex(where: { !space.contains($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !space.contains($0) })!
        if first == scalars.startIndex, scalars.index(after: last) == scalars.endIndex { return text }
        return String(scalars[first...last])
    }

    /// For `plugin:key` inputs, the plugin part.
    public var pluginScheme: String? {
        guard url == nil, let colon = text.firstIndex(of: ":") else { return nil }
        let scheme = text[..<colon]
        guard !scheme.isEmpty, scheme.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else { return nil }
        return String(scheme)
    }
}

/// `PLUGIN:KEY=VALUE` arguments, grouped by plugin.
public struct PluginArguments: Sendable, Hashable, Codable {
    /// plugin -> key -> value.
    public private(set) var values: [String: [String: String]]

    /// Creates an empty set, or one from a dictionary.
    public init(_ values: [String: [String: String]] = [:]) {
        self.values = values
    }

    /// The arguments of one plugin.
    public subscript(plugin: String) -> [String: String] { values[plugin] ?? [:] }

    /// Adds one `PLUGIN:KEY=VALUE`; throws ``DownloadError/Code/invalidRequest`` for another shape.
    public mutating func add(_ text: String) throws(DownloadError) {
        guard let colon = text.firstIndex(of: ":"), let equals = text[colon...].firstIndex(of: "=") else {
            throw DownloadError(.invalidRequest, "a plugin argument looks like PLUGIN:KEY=VALUE, not \"\(text)\"")
        }
        let plugin = String(text[..<colon]), key = String(text[text.index(after: colon)..<equals])
        guard !plugin.isEmpty, !key.isEmpty,
            plugin.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        else {
            throw DownloadError(.invalidRequest, "a plugin argument looks like PLUGIN:KEY=VALUE, not \"\(text)\"")
        }
        values[plugin, default: [:]][key] = String(text[text.index(after: equals)...])
    }
}

/// One way an entity type accepts inputs.
public struct EntityMatcher: Sendable {
    /// What an input must look like.
    public enum Rule: Sendable, Hashable {
        /// `scheme:key`, e.g. `playurl:1001` (the key is what follows the colon).
        case scheme(String)
        /// An http(s) URL matching this regular expression (the key is the URL).
        case urlPattern(String)
        /// An http(s) URL whose path ends in `.` and one of these extensions, in any case (the
        /// key is the URL): what most manifest kinds need, without a regular expression per input
        /// (a list of thousands of plain URLs is matched at string speed).
        case pathExtensions([String])
        /// An http(s) URL whose probed `Content-Type` is one of these (parameters ignored).
        case contentType([String])
        /// Any http(s) URL.
        case anyURL
    }

    /// The plugin's name, as `tessera plugins` shows it.
    public var plugin: String
    /// What the plugin handles, in a few words.
    public var summary: String
    /// Higher is tried first; ``DirectEntity`` uses the lowest (`0`).
    public var priority: Int
    /// The accepted inputs.
    public var rules: [Rule]
    /// Builds the entity from the input and the extracted key.
    public var make: @Sendable (EntityInput, String) throws -> DownloadBaseEntity
    /// Expands an input into several entities (fetching a document if it must), for inputs
    /// that stand for a group; `nil` when an input is always one entity.
    public var expand: (@Sendable (EntityInput, String, ResolveContext) async throws -> [DownloadBaseEntity])?
    private let patterns: [RegexBox]

    /// Creates a matcher; an invalid pattern is a programming error.
    public init(
        plugin: String, summary: String, priority: Int = 100, rules: [Rule],
        expand: (@Sendable (EntityInput, String, ResolveContext) async throws -> [DownloadBaseEntity])? = nil,
        make: @escaping @Sendable (EntityInput, String) throws -> DownloadBaseEntity
    ) {
        self.plugin = plugin
        self.summary = summary
        self.priority = priority
        self.rules = rules
        self.expand = expand
        self.make = make
        patterns = rules.compactMap { rule in
            guard case .urlPattern(let pattern) = rule else { return nil }
            guard let regex = try? NSRegularExpression(pattern: pattern, options: [.caseInsensitive]) else {
                preconditionFailure("the \(plugin) matcher's pattern does not compile: \(pattern)")
            }
            return RegexBox(regex: regex)
        }
    }

    /// The extension of the URL's path as sent (percent-encoded), or `nil`.
    static func pathExtension(of url: URL) -> Substring? {
        // (Percent-encoded, the path is ASCII: its bytes are its characters.)
        let path = url.path(percentEncoded: true)
        let bytes = path.utf8
        guard let dot = bytes.lastIndex(of: UInt8(ascii: ".")), !bytes[dot...].contains(UInt8(ascii: "/")) else { return nil }
        return path[bytes.index(after: dot)...]
    }

    func acceptsScheme(_ scheme: String) -> Bool {
        rules.contains { if case .scheme(let own) = $0 { return own.lowercased() == scheme.lowercased() } else { return false } }
    }

    /// The key the matcher extracts from `input`, or `nil` when it does not accept it.
    public func key(for input: EntityInput) -> String? {
        for rule in rules {
            switch rule {
            case .scheme(let scheme):
                if input.url == nil, input.pluginScheme?.lowercased() == scheme.lowercased() {
                    let key = input.text.drop(while: { $0 != ":" }).dropFirst()
                    if !key.isEmpty { return String(key) }
                }
            case .urlPattern:
                break
            case .pathExtensions(let extensions):
                if let url = input.url, let ext = input.pathExtension, extensions.contains(where: { $0.lowercased() == ext }) {
                    return url.absoluteString
                }
            case .contentType(let types):
                if let url = input.url, let contentType = input.contentType {
                    let bare = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
                    if let bare, types.contains(where: { $0.lowercased() == bare }) { return url.absoluteString }
                }
            case .anyURL:
                if let url = input.url { return url.absoluteString }
            }
        }
        if let url = input.url {
            let text = url.absoluteString
            for box in patterns where box.regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil {
                return text
            }
        }
        return nil
    }
}

/// `NSRegularExpression` is immutable after creation and safe to share.
private struct RegexBox: @unchecked Sendable {
    let regex: NSRegularExpression
}
