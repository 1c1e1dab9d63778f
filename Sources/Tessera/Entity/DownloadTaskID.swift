/// The identity of a download task: its entity's type, key and variant. Adding an entity whose
/// identity is already known returns the existing task.
///
/// Its text form is `type:key#variant`; a key should not contain `#` (``DirectEntity`` drops
/// URL fragments for that reason), or the text form will not parse back.
public struct DownloadTaskID: Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
    /// The registry name of the entity type, e.g. `playurl`.
    public var entityType: String
    /// The entity's key, unique within its type, e.g. `cid:1001`.
    public var entityKey: String
    /// The variant (quality, representation), part of the identity; empty when there is none.
    public var variantKey: String

    /// Creates an identity.
    public init(entityType: String, entityKey: String, variantKey: String = "") {
        self.entityType = entityType
        self.entityKey = entityKey
        self.variantKey = variantKey
    }

    /// `type:key` or `type:key#variant`.
    public var description: String {
        variantKey.isEmpty ? "\(entityType):\(entityKey)" : "\(entityType):\(entityKey)#\(variantKey)"
    }

    /// Parses ``description``'s form; the type ends at the first `:`, the variant starts at the
    /// last `#`.
    public init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else { return nil }
        entityType = String(text[..<colon])
        let rest = text[text.index(after: colon)...]
        if let hash = rest.lastIndex(of: "#") {
            entityKey = String(rest[..<hash])
            variantKey = String(rest[rest.index(after: hash)...])
        } else {
            entityKey = String(rest)
            variantKey = ""
        }
        guard !entityKey.isEmpty else { return nil }
    }

    public static func < (lhs: DownloadTaskID, rhs: DownloadTaskID) -> Bool {
        (lhs.entityType, lhs.entityKey, lhs.variantKey) < (rhs.entityType, rhs.entityKey, rhs.variantKey)
    }
}
