import CTesseraSystem
import Foundation

/// What identifies one version of a remote resource: its `ETag` and `Last-Modified` (RFC 9110 §8.8).
///
/// Resuming a partial download sends the validator in `If-Range`, so a server whose content
/// changed answers with the whole new resource instead of splicing two versions.
public struct ResourceValidator: Hashable, Sendable, Codable {
    /// The entity tag exactly as the server sent it, quotes and weakness prefix included.
    public var etag: String?
    /// The `Last-Modified` date exactly as the server sent it.
    public var lastModified: String?
    /// Whether `Last-Modified` was at least one second older than the response's `Date`, which
    /// RFC 9110 §13.1.5 requires before a date may be used in `If-Range`.
    public var lastModifiedIsStrong: Bool

    /// Creates a validator.
    public init(etag: String? = nil, lastModified: String? = nil, lastModifiedIsStrong: Bool = true) {
        self.etag = etag
        self.lastModified = lastModified
        self.lastModifiedIsStrong = lastModifiedIsStrong
    }

    /// Whether the entity tag is a strong one (no `W/` prefix).
    public var hasStrongETag: Bool {
        guard let etag else { return false }
        return !etag.hasPrefix("W/") && etag.hasPrefix("\"")
    }

    /// The value for an `If-Range` header: a strong entity tag, else a strong date, else `nil`
    /// (a weak validator must never be used for a range request).
    public var ifRangeValue: String? {
        if hasStrongETag { return etag }
        if let lastModified, lastModifiedIsStrong { return lastModified }
        return nil
    }

    /// Whether `other` names the same version, by strong comparison (RFC 9110 §8.8.3.2): equal
    /// strong entity tags, or, when neither side has one, equal dates.
    public func matches(_ other: ResourceValidator) -> Bool {
        if hasStrongETag || other.hasStrongETag {
            return hasStrongETag && other.hasStrongETag && etag == other.etag
        }
        guard let lastModified, let otherDate = other.lastModified else { return false }
        return lastModified == otherDate
    }
}

/// The part of a transfer that is safely on disk, and what is needed to continue it later.
public struct TransferCheckpoint: Hashable, Sendable, Codable {
    /// How many bytes of the requested span (from its first byte) are written.
    public var bytesWritten: Int64
    /// The validator of the version those bytes belong to.
    public var validator: ResourceValidator?

    /// Creates a checkpoint.
    public init(bytesWritten: Int64, validator: ResourceValidator?) {
        self.bytesWritten = bytesWritten
        self.validator = validator
    }
}

extension TransferCheckpoint {
    /// The extended attribute that holds a file's validator (see
    /// ``TransferRequest/recordsValidator``).
    static let validatorAttribute = "user.tessera.validator"

    /// What a file written by a transfer with ``TransferRequest/recordsValidator`` holds: the
    /// bytes past `offset` and the validator they belong to; `nil` when the file has no
    /// recorded validator or no bytes. Resuming from it is safe: `If-Range` carries the
    /// validator, so a changed resource is fetched again from its first byte.
    public static func recovered(fromFileAt path: String, offset: Int64 = 0) -> TransferCheckpoint? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let length = buffer.withUnsafeMutableBytes {
            tessera_getxattr(path, validatorAttribute, $0.baseAddress, $0.count)
        }
        guard length > 0, let size = FileOperations.size(path), size > offset,
            let validator = try? JSONDecoder().decode(ResourceValidator.self, from: Data(buffer[0..<length]))
        else { return nil }
        return TransferCheckpoint(bytesWritten: size - offset, validator: validator)
    }

    /// Records `validator` on an open file; errors (no xattr support) are ignored.
    static func record(_ validator: ResourceValidator, on descriptor: Int32) {
        guard let data = try? JSONEncoder().encode(validator) else { return }
        _ = data.withUnsafeBytes { tessera_fsetxattr(descriptor, validatorAttribute, $0.baseAddress, $0.count) }
    }
}
