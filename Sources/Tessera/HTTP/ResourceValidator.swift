import Foundation

/// What identifies one version of a remote resource: its `ETag` and `Last-Modified` (RFC 9110 §8.8).
///
/// Resuming a partial download sends the validator in `If-Range`, so a server whose content
/// changed answers with the whole new resource instead of splicing two versions.
package struct ResourceValidator: Hashable, Sendable, Codable {
    /// The entity tag exactly as the server sent it, quotes and weakness prefix included.
    package var etag: String?
    /// The `Last-Modified` date exactly as the server sent it.
    package var lastModified: String?
    /// Whether `Last-Modified` was at least one second older than the response's `Date`, which
    /// RFC 9110 §13.1.5 requires before a date may be used in `If-Range`.
    package var lastModifiedIsStrong: Bool

    /// Creates a validator.
    package init(etag: String? = nil, lastModified: String? = nil, lastModifiedIsStrong: Bool = true) {
        self.etag = etag
        self.lastModified = lastModified
        self.lastModifiedIsStrong = lastModifiedIsStrong
    }

    /// Whether the entity tag is a strong one (no `W/` prefix).
    package var hasStrongETag: Bool {
        guard let etag else { return false }
        return !etag.hasPrefix("W/") && etag.hasPrefix("\"")
    }

    /// The value for an `If-Range` header: a strong entity tag, else a strong date, else `nil`
    /// (a weak validator must never be used for a range request).
    package var ifRangeValue: String? {
        if hasStrongETag { return etag }
        if let lastModified, lastModifiedIsStrong { return lastModified }
        return nil
    }

    /// Whether `other` names the same version, by strong comparison (RFC 9110 §8.8.3.2): equal
    /// strong entity tags, or, when neither side has one, equal dates.
    package func matches(_ other: ResourceValidator) -> Bool {
        if hasStrongETag || other.hasStrongETag {
            return hasStrongETag && other.hasStrongETag && etag == other.etag
        }
        guard let lastModified, let otherDate = other.lastModified else { return false }
        return lastModified == otherDate
    }
}

/// The part of a transfer that is safely on disk, and what is needed to continue it later.
package struct TransferCheckpoint: Hashable, Sendable, Codable {
    /// How many bytes of the requested span (from its first byte) are written.
    package var bytesWritten: Int64
    /// The validator of the version those bytes belong to.
    package var validator: ResourceValidator?

    /// Creates a checkpoint.
    package init(bytesWritten: Int64, validator: ResourceValidator?) {
        self.bytesWritten = bytesWritten
        self.validator = validator
    }
}
