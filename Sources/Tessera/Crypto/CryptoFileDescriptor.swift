#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An open file for the crypto helpers (``Checksum/compute(_:fileAt:range:)``,
/// ``AES128CBC/decryptFile(at:to:key:iv:)``): POSIX reads and writes that retry on `EINTR` and
/// turn failures into a ``DownloadError`` naming the path. Closes its descriptor in `deinit`
/// unless ``close()`` did. Single owner, not shared between threads.
final class CryptoFileDescriptor {
    /// The size of the buffer files are streamed through: constant memory whatever the file size.
    static let chunkSize = 1 << 20

    /// The path, for messages.
    let path: String
    private var descriptor: Int32

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    deinit {
        if descriptor >= 0 { _ = systemClose(descriptor) }
    }

    /// Opens `path` for reading.
    static func openForReading(_ path: String) throws(DownloadError) -> CryptoFileDescriptor {
        let descriptor = retryingOnInterrupt { open(path, O_RDONLY | O_CLOEXEC) }
        guard descriptor >= 0 else { throw fileError(errno, doing: "open", path) }
        let file = CryptoFileDescriptor(path: path, descriptor: descriptor)
        _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_SEQUENTIAL)
        return file
    }

    /// Creates `path`, or truncates it when it exists, for writing (mode 0644 before the umask).
    static func createForWriting(_ path: String) throws(DownloadError) -> CryptoFileDescriptor {
        let descriptor = retryingOnInterrupt { open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        guard descriptor >= 0 else { throw fileError(errno, doing: "create", path) }
        return CryptoFileDescriptor(path: path, descriptor: descriptor)
    }

    /// The file's `stat`.
    func status() throws(DownloadError) -> stat {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw Self.fileError(errno, doing: "inspect", path) }
        return info
    }

    /// The file's size in bytes.
    func size() throws(DownloadError) -> Int64 {
        Int64(try status().st_size)
    }

    /// Reads up to `buffer.count` bytes at `offset`; returns how many, 0 at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(DownloadError) -> Int {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        let descriptor = descriptor
        let count = retryingOnInterrupt { pread(descriptor, base, buffer.count, off_t(offset)) }
        guard count >= 0 else { throw Self.fileError(errno, doing: "read", path) }
        return count
    }

    /// Reads until `buffer` is full or the file ends; returns how many bytes were read.
    func readFully(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(DownloadError) -> Int {
        var done = 0
        while done < buffer.count {
            let count = try read(
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + Int64(done))
            if count == 0 { break }
            done += count
        }
        return done
    }

    /// Appends all of `bytes` at the current position.
    func writeAll(_ bytes: UnsafeRawBufferPointer) throws(DownloadError) {
        guard let base = bytes.baseAddress else { return }
        let descriptor = descriptor
        var done = 0
        while done < bytes.count {
            let count = retryingOnInterrupt { write(descriptor, base + done, bytes.count - done) }
            guard count >= 0 else { throw Self.fileError(errno, doing: "write to", path) }
            done += count
        }
    }

    /// Closes the descriptor, reporting a failure (which, after writes, can mean lost data).
    func close() throws(DownloadError) {
        guard descriptor >= 0 else { return }
        let result = systemClose(descriptor)
        descriptor = -1
        // Linux releases the descriptor even when close fails, so it is never retried.
        if result != 0, errno != EINTR { throw Self.fileError(errno, doing: "close", path) }
    }

    /// An error for a failed file operation: ``DownloadError/Code/diskFull`` for `ENOSPC` and
    /// `EDQUOT`, ``DownloadError/Code/writeFailed`` for anything else (a missing file
    /// included), with the path, the system's explanation and `errno`.
    static func fileError(_ code: Int32, doing action: String, _ path: String) -> DownloadError {
        let full = code == ENOSPC || code == EDQUOT
        return DownloadError(
            full ? .diskFull : .writeFailed,
            "could not \(action) \(path): \(String(cString: strerror(code)))",
            systemErrno: code)
    }
}

/// Runs `call` again while it fails with `EINTR`.
private func retryingOnInterrupt<Result: BinaryInteger>(_ call: () -> Result) -> Result {
    while true {
        let result = call()
        if result < 0, errno == EINTR { continue }
        return result
    }
}

/// `close(2)`, reachable from inside the type that has its own `close()`.
private func systemClose(_ descriptor: Int32) -> Int32 {
    close(descriptor)
}
