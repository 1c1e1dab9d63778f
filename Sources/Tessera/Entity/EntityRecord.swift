import Foundation

/// An entity as the store keeps it: the base fields and the subclass's payload, enough for
/// ``EntityRegistry/rebuild(_:)`` to make the same entity again after a restart.
public struct EntityRecord: Sendable, Codable, Hashable {
    /// The registry name of the entity's class.
    public var entityType: String
    /// See ``DownloadBaseEntity/entityKey``.
    public var entityKey: String
    /// See ``DownloadBaseEntity/variantKey``.
    public var variantKey: String
    /// See ``DownloadBaseEntity/title``.
    public var title: String
    /// See ``DownloadBaseEntity/aggregationKey``.
    public var aggregationKey: String?
    /// The registry name of the entity's group class.
    public var groupType: String
    /// See ``DownloadBaseEntity/destinationDirectory``.
    public var destinationDirectory: String
    /// The subclass's own state, as JSON.
    public var payload: Data

    /// Creates a record.
    public init(
        entityType: String, entityKey: String, variantKey: String, title: String, aggregationKey: String?,
        groupType: String, destinationDirectory: String, payload: Data
    ) {
        self.entityType = entityType
        self.entityKey = entityKey
        self.variantKey = variantKey
        self.title = title
        self.aggregationKey = aggregationKey
        self.groupType = groupType
        self.destinationDirectory = destinationDirectory
        self.payload = payload
    }

    /// The identity of the entity's task.
    public var taskID: DownloadTaskID {
        DownloadTaskID(entityType: entityType, entityKey: entityKey, variantKey: variantKey)
    }

    /// Decodes the payload (for subclasses' `init(record:)`).
    public func decodePayload<Payload: Decodable>(_ type: Payload.Type) throws(DownloadError) -> Payload {
        try JSONManifest.decode(type, from: payload)
    }
}
