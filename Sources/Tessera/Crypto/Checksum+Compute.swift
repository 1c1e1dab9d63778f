extension Checksum {
    /// The checksum of `bytes` in memory, e.g. an `[UInt8]`, a slice or `Data`.
    public static func compute(_ algorithm: Algorithm, bytes: some Collection<UInt8>) -> Checksum {
        let hasher = ChecksumHasher(algorithm)
        hasher.update(contentsOf: bytes)
        return hasher.finalize()
    }

    /// The checksum of the bytes in `bytes`.
    public static func compute(_ algorithm: Algorithm, bytes: UnsafeRawBufferPointer) -> Checksum {
        let hasher = ChecksumHasher(algorithm)
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// The checksum of the file at `path`, or of the bytes `range` selects in it, read in 1 MiB
    /// chunks (memory stays constant whatever the size).
    ///
    /// A `range` with a `nil` length runs to the end of the file.
    ///
    /// - Throws: ``DownloadError/Code/writeFailed`` when the file cannot be opened or read (it
    ///   is missing, a directory, unreadable), with the path and `systemErrno`;
    ///   ``DownloadError/Code/sizeMismatch`` when the file ends before `range` does (an
    ///   incomplete download).
    public static func compute(
        _ algorithm: Algorithm, fileAt path: String, range: ByteRange? = nil
    ) throws(DownloadError) -> Checksum {
        let file = try CryptoFileDescriptor.openForReading(path)
        let start = range?.offset ?? 0
        if let range, range.length == nil {
            let size = try file.size()
            guard range.offset <= size else { throw try shortFile(file, range: range, algorithm: algorithm) }
        }
        let hasher = ChecksumHasher(algorithm)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: CryptoFileDescriptor.chunkSize, alignment: 64)
        defer { buffer.deallocate() }
        var offset = start
        var remaining = range?.length
        while remaining != 0 {
            let wanted = remaining.map { Int(min($0, Int64(buffer.count))) } ?? buffer.count
            let count = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<wanted]), at: offset)
            if count == 0 {
                guard let range, range.length != nil else { break }
                throw try shortFile(file, range: range, algorithm: algorithm)
            }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            offset += Int64(count)
            remaining = remaining.map { $0 - Int64(count) }
        }
        return hasher.finalize()
    }

    /// Checks that the file at `path` (or the bytes `range` selects in it) has this checksum,
    /// hashing it with ``compute(_:fileAt:range:)``.
    ///
    /// - Throws: ``DownloadError/Code/checksumMismatch`` with the message
    ///   `sha256 of <path> is <actual>, expected <expected>` (the range follows the path when
    ///   one is given); the errors of ``compute(_:fileAt:range:)`` when the file cannot be read.
    public func verify(fileAt path: String, range: ByteRange? = nil) throws(DownloadError) {
        let actual = try Checksum.compute(algorithm, fileAt: path, range: range)
        guard actual != self else { return }
        let subject = range.map { "\(path) (bytes \($0))" } ?? path
        throw DownloadError(
            .checksumMismatch, "checksum mismatch: \(algorithm) of \(subject) is \(actual.hexDigest), expected \(hexDigest)")
    }

    /// The error for a file that ends before `range` does.
    private static func shortFile(
        _ file: CryptoFileDescriptor, range: ByteRange, algorithm: Algorithm
    ) throws(DownloadError) -> DownloadError {
        let size = try file.size()
        return DownloadError(
            .sizeMismatch,
            "cannot compute the \(algorithm) of bytes \(range) of \(file.path): the file has only \(size) bytes")
    }
}
