/// The identity of a download task: its entity's type, key and variant. Adding an entity whose
/// identity is already known returns the existing task.
///
/// Its text form is `type:key#variant`; a key should not contain `#` (``DirectEntity`` drops
/// URL fragments for that reason), or the text form will not parse back.
public struct DownloadTaskID: Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
    /// The registry name of the entity type, e.g. `playurl`.
    public var entityType: String { didSet { hash = Self.hash(entityType, entityKey, variantKey) } }
    /// The entity's key, unique within its type, e.g. `cid:1001`.
    public var entityKey: String { didSet { hash = Self.hash(entityType, entityKey, variantKey) } }
    /// The variant (quality, representation), part of the identity; empty when there is none.
    public var variantKey: String { didSet { hash = Self.hash(entityType, entityKey, variantKey) } }
    /// The three parts hashed, once: an identity is made once and looked up in the manager's,
    /// the store's and the command's tables many times (its key is often a whole URL).
    private var hash: Int

    /// Creates an identity.
    public init(entityType: String, entityKey: String, variantKey: String = "") {
        self.entityType = entityType
        self.entityKey = entityKey
        self.variantKey = variantKey
        hash = Self.hash(entityType, entityKey, variantKey)
    }

    private static func hash(_ entityType: String, _ entityKey: String, _ variantKey: String) -> Int {
        var hasher = Hasher()
        hasher.combine(entityType)
        hasher.combine(entityKey)
        hasher.combine(variantKey)
        return hasher.finalize()
    }

    /// Hashes the identity (its three parts, hashed when it was made).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(hash)
    }

    /// Equal when the type, the key and the variant are.
    public static func == (lhs: DownloadTaskID, rhs: DownloadTaskID) -> Bool {
        lhs.hash == rhs.hash && lhs.entityKey == rhs.entityKey && lhs.entityType == rhs.entityType
            && lhs.variantKey == rhs.variantKey
    }

    private enum CodingKeys: String, CodingKey {
        case entityType, entityKey, variantKey
    }

    /// Decodes the three parts (`entityType`, `entityKey`, `variantKey`).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            entityType: try container.decode(String.self, forKey: .entityType),
            entityKey: try container.decode(String.self, forKey: .entityKey),
            variantKey: try container.decode(String.self, forKey: .variantKey))
    }

    /// Encodes the three parts.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(entityType, forKey: .entityType)
        try container.encode(entityKey, forKey: .entityKey)
        try container.encode(variantKey, forKey: .variantKey)
    }

    /// `type:key` or `type:key#variant`.
    public var description: String {
        variantKey.isEmpty ? "\(entityType):\(entityKey)" : "\(entityType):\(entityKey)#\(variantKey)"
    }

    /// Parses ``description``'s form; the type ends at the first `:`, the variant starts at the
    /// last `#`.
    public init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else { return nil }
        let entityType = String(text[..<colon])
        let rest = text[text.index(after: colon)...]
        let entityKey: String, variantKey: String
        if let mark = rest.lastIndex(of: "#") {
            entityKey = String(rest[..<mark])
            variantKey = String(rest[rest.index(after: mark)...])
        } else {
            entityKey = String(rest)
            variantKey = ""
        }
        guard !entityKey.isEmpty else { return nil }
        self.init(entityType: entityType, entityKey: entityKey, variantKey: variantKey)
    }

    public static func < (lhs: DownloadTaskID, rhs: DownloadTaskID) -> Bool {
        (lhs.entityType, lhs.entityKey, lhs.variantKey) < (rhs.entityType, rhs.entityKey, rhs.variantKey)
    }
}
