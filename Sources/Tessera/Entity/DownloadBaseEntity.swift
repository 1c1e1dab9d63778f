import Foundation

/// The base class of every entity: something to download, identified by a key, that a parser
/// (``DownloadParserProtocol``) turns into a ``DownloadManifest``.
///
/// Subclass it, conform to ``DownloadParserProtocol``, and register the class with an
/// ``EntityRegistry``. An entity is a value in class clothing: set every property in the
/// initialiser and never change it afterwards, because the manager shares it across tasks
/// (hence `@unchecked Sendable`). State that must survive a restart goes in the payload:
/// override ``encodePayload()`` and ``init(record:)``, or subclass ``PayloadEntity`` and get
/// both for free.
open class DownloadBaseEntity: @unchecked Sendable {
    /// The name the registry knows the class by; also the first part of every task ID.
    /// Override it with a short stable name (`"playurl"`); the default is the class name.
    open class var entityType: String { TypeNames.name(of: self) }

    /// The group class tasks of this entity join (through ``aggregationKey``).
    open class var groupType: DownloadTaskGroup.Type { DownloadTaskGroup.self }

    /// Unique within the entity type: a cid, a manifest URL.
    public let entityKey: String
    /// The variant (quality, representation selector); part of the task's identity, so the
    /// same video in two qualities is two tasks.
    public let variantKey: String
    /// A name for people.
    public let title: String
    /// Tasks with the same aggregation key form one group (the cids of one video, the files of
    /// one Metalink); `nil` for none.
    public let aggregationKey: String?
    /// Where the outputs go, relative to the manager's download root (`""` for the root itself).
    public let destinationDirectory: String

    /// Creates an entity.
    public init(
        entityKey: String, variantKey: String = "", title: String? = nil, aggregationKey: String? = nil,
        destinationDirectory: String = ""
    ) {
        self.entityKey = entityKey
        self.variantKey = variantKey
        self.title = title ?? entityKey
        self.aggregationKey = aggregationKey
        self.destinationDirectory = destinationDirectory
    }

    /// Rebuilds an entity from its stored record. Subclasses with a payload override this,
    /// decode their state with ``EntityRecord/decodePayload(_:)`` and call `super`.
    public required init(record: EntityRecord) throws {
        entityKey = record.entityKey
        variantKey = record.variantKey
        title = record.title
        aggregationKey = record.aggregationKey
        destinationDirectory = record.destinationDirectory
    }

    /// The subclass's own state as JSON; the default has none.
    open func encodePayload() throws -> Data { Data("{}".utf8) }

    /// The key under which the segment cache files a segment's bytes.
    ///
    /// The default is content-addressed when the segment has a checksum (the same bytes under
    /// any entity share one entry) and otherwise entity + variant + output + index, as
    /// ZZDownloader does. Override it when two entities are known to share segments (the same
    /// CDN object under two keys).
    open func cacheKey(for segment: SegmentLocation) -> String {
        if let checksum = segment.segment.checksum {
            return "\(checksum.algorithm.rawValue):\(checksum.hexDigest)"
        }
        return "\(Self.entityType)/\(entityKey)/\(variantKey)/\(segment.outputIndex)/\(segment.segmentIndex)"
    }

    /// The identity of this entity's task.
    public var taskID: DownloadTaskID {
        DownloadTaskID(entityType: Self.entityType, entityKey: entityKey, variantKey: variantKey)
    }

    /// The record the store keeps.
    public func record() throws -> EntityRecord {
        EntityRecord(
            entityType: Self.entityType, entityKey: entityKey, variantKey: variantKey, title: title,
            aggregationKey: aggregationKey, groupType: Self.groupType.groupType,
            destinationDirectory: destinationDirectory, payload: try encodePayload())
    }
}

/// A segment and where it sits, as given to ``DownloadBaseEntity/cacheKey(for:)``.
public struct SegmentLocation: Sendable, Hashable {
    /// The output's position in the manifest.
    public var outputIndex: Int
    /// The segment's position in its output.
    public var segmentIndex: Int
    /// The output's name.
    public var outputName: String
    /// The segment.
    public var segment: DownloadSegment

    /// Creates a location.
    public init(outputIndex: Int, segmentIndex: Int, outputName: String, segment: DownloadSegment) {
        self.outputIndex = outputIndex
        self.segmentIndex = segmentIndex
        self.outputName = outputName
        self.segment = segment
    }
}

/// An entity whose state is one `Codable` payload, stored and restored without any code of
/// the subclass's own.
///
/// ```swift
/// struct PageEntityPayload: Codable, Sendable { var url: URL }
///
/// final class PageEntity: PayloadEntity<PageEntityPayload>, DownloadParserProtocol {
///     override class var entityType: String { "page" }
///     convenience init(url: URL) { self.init(payload: .init(url: url), entityKey: url.absoluteString) }
///     func resolve(in context: ResolveContext) async throws -> DownloadManifest { ... }
/// }
/// ```
open class PayloadEntity<Payload: Codable & Sendable>: DownloadBaseEntity, @unchecked Sendable {
    /// The entity's own state.
    public let payload: Payload

    /// Creates an entity with its payload.
    public init(
        payload: Payload, entityKey: String, variantKey: String = "", title: String? = nil,
        aggregationKey: String? = nil, destinationDirectory: String = ""
    ) {
        self.payload = payload
        super.init(
            entityKey: entityKey, variantKey: variantKey, title: title, aggregationKey: aggregationKey,
            destinationDirectory: destinationDirectory)
    }

    public required init(record: EntityRecord) throws {
        payload = try record.decodePayload(Payload.self)
        try super.init(record: record)
    }

    open override func encodePayload() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(payload)
    }
}
