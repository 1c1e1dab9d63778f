/// Arithmetic on numbers that come from the network (sizes, offsets, counts, durations): held
/// at the bounds instead of trapping, for the places where a sum is shown or compared rather
/// than used to address bytes (a manifest's validation refuses sizes past 1 EiB before any
/// byte is addressed).
extension Int64 {
    /// `self + other`, or `Int64.max` / `Int64.min` where the sum would not fit.
    public func saturatingAdding(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }

    /// `self * other`, or `Int64.max` / `Int64.min` where the product would not fit.
    public func saturatingMultiplying(_ other: Int64) -> Int64 {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? ((self < 0) == (other < 0) ? .max : .min) : product
    }
}

extension Sequence where Element == Int64 {
    /// The sum, held at `Int64.max` (or `.min`) instead of overflowing.
    public func saturatingSum() -> Int64 {
        reduce(0) { $0.saturatingAdding($1) }
    }
}
