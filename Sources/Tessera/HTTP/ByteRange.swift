/// A span of bytes in a remote resource: from ``offset``, ``length`` bytes, or to the end of the
/// resource when ``length`` is `nil` (RFC 9110 §14.1.2).
public struct ByteRange: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The first byte, counted from zero.
    public var offset: Int64
    /// How many bytes, or `nil` for "to the end".
    public var length: Int64?

    /// Creates a range; `offset` must not be negative and `length`, when given, must be positive.
    public init(offset: Int64, length: Int64? = nil) {
        precondition(offset >= 0, "a byte range cannot start before the first byte")
        precondition(length.map { $0 > 0 } ?? true, "a byte range must hold at least one byte")
        self.offset = offset
        self.length = length
    }

    /// The range of the inclusive positions `first...last`.
    public init(_ bounds: ClosedRange<Int64>) {
        self.init(offset: bounds.lowerBound, length: (bounds.upperBound - bounds.lowerBound).saturatingAdding(1))
    }

    /// The last byte, inclusive, when the range is bounded (`Int64.max` for a range that would
    /// end past it: a manifest's validation refuses those).
    public var last: Int64? { length.map { offset.saturatingAdding($0 - 1) } }

    /// The value of a `Range` header asking for this span, e.g. `bytes=0-1023` or `bytes=512-`.
    public var headerValue: String {
        if let last { return "bytes=\(offset)-\(last)" }
        return "bytes=\(offset)-"
    }

    /// The same range without its first `count` bytes, for resuming; `nil` when nothing is left.
    public func dropping(_ count: Int64) -> ByteRange? {
        guard count > 0 else { return self }
        if let length {
            guard count < length else { return nil }
            return ByteRange(offset: offset + count, length: length - count)
        }
        return ByteRange(offset: offset + count, length: nil)
    }

    public var description: String {
        if let last { return "\(offset)-\(last)" }
        return "\(offset)-"
    }
}
