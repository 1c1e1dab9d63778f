import CTesseraSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// File-system steps, as system calls with ``DownloadError``s. Every one of them may block:
/// callers run them off the cooperative pool (the manager's ``BlockingExecutor``).
package enum FileOperations {
    /// The whole file, or `nil` when it cannot be read (at most 1 GiB).
    ///
    /// The package's way to read a whole file: Foundation's `FileManager.contents(atPath:)`,
    /// `Data(contentsOf:)` and `String(contentsOfFile:)` leak a 4 KiB buffer for every empty
    /// file they read, on Linux (swift-foundation's `readBytesFromFile`; LeakSanitizer reports
    /// each one).
    /// Read to its end, whatever its size says (a file of /proc says 0).
    package static func contents(_ path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        let limit = 1 << 30
        guard fstat(descriptor, &info) == 0, info.st_size >= 0, info.st_size <= limit else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(Int(info.st_size))
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            guard bytes.count + count <= limit else { return nil }
            bytes += chunk[..<count]
        }
        return bytes
    }

    /// Creates an empty file (and its directory), truncating one that exists.
    static func createEmpty(_ path: String) throws(DownloadError) {
        try createParent(of: path)
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw systemError(errno, "could not create \(path)") }
        close(descriptor)
    }

    /// Moves `source` to `destination` unless a file is there already: `false` then, and both
    /// files stay as they were. (Where the file system cannot refuse a replacement atomically,
    /// the check and the move are two steps.)
    static func moveWithoutReplacing(_ source: String, to destination: String) throws(DownloadError) -> Bool {
        let result = try makingParent(of: destination, from: source) { withCPaths(source, destination, tessera_rename_noreplace) }
        switch result {
        case 0:
            return true
        case -2:
            if exists(destination) { return false }
            try createParent(of: destination)
            try rename(source, to: destination)
            return true
        default:
            if errno == EEXIST { return false }
            if errno == EXDEV {
                // Another file system: copied, then the source goes.
                if exists(destination) { return false }
                try createParent(of: destination)
                try copy(source, to: destination)
                remove(source)
                return true
            }
            throw systemError(errno, "could not move \(source) to \(destination)")
        }
    }

    /// Writes bytes at `offset` of the file at `path` (created when missing).
    static func write(_ bytes: [UInt8], to path: String, at offset: Int64) throws(DownloadError) {
        let descriptor = try openForWriting(path)
        defer { close(descriptor) }
        var done = 0
        while done < bytes.count {
            let result = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done)) }
            if result < 0, errno == EINTR { continue }
            guard result > 0 else { throw systemError(errno, "could not write \(path)") }
            done += result
        }
    }

    /// Copies the whole file `source` to `offset` of the file at `path` (the kernel moves the
    /// bytes); returns the bytes copied.
    @discardableResult
    static func copy(_ source: String, into path: String, at offset: Int64) throws(DownloadError) -> Int64 {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw systemError(errno, "could not open \(source)") }
        defer { close(input) }
        let output = try openForWriting(path)
        defer { close(output) }
        var info = stat()
        guard fstat(input, &info) == 0 else { throw systemError(errno, "could not read \(source)") }
        let size = Int64(info.st_size)
        var inputOffset: Int64 = 0, outputOffset = offset
        while inputOffset < size {
            let copied = tessera_copy_file_range_at(input, &inputOffset, output, &outputOffset, Int(size - inputOffset))
            if copied > 0 { continue }
            if copied == 0 { break }
            if errno == EINTR { continue }
            guard errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP else {
                throw systemError(errno, "could not write \(path)")
            }
            // No in-kernel copy here: through a buffer.
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while inputOffset < size {
                let count = buffer.withUnsafeMutableBytes { pread(input, $0.baseAddress, $0.count, off_t(inputOffset)) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { throw systemError(errno, "could not read \(source)") }
                try write(Array(buffer[0..<count]), to: path, at: outputOffset)
                inputOffset += Int64(count)
                outputOffset += Int64(count)
            }
        }
        guard inputOffset == size else {
            throw DownloadError(.writeFailed, "\(source) ended before its size while copying it into \(path)")
        }
        return size
    }

    /// Copies the bytes `range` of the file `source` into a new file at `path`.
    static func copyRange(of source: String, _ range: Range<Int64>, to path: String) throws(DownloadError) {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw systemError(errno, "could not open \(source)") }
        defer { close(input) }
        try createEmpty(path)
        let output = try openForWriting(path)
        defer { close(output) }
        var inputOffset = range.lowerBound, outputOffset: Int64 = 0
        while inputOffset < range.upperBound {
            let copied = tessera_copy_file_range_at(input, &inputOffset, output, &outputOffset, Int(range.upperBound - inputOffset))
            if copied > 0 { continue }
            if copied < 0, errno == EINTR { continue }
            if copied == 0 { throw DownloadError(.writeFailed, "\(source) ends before byte \(range.upperBound)") }
            throw systemError(errno, "could not copy from \(source)")
        }
    }

    private static func openForWriting(_ path: String) throws(DownloadError) -> Int32 {
        var descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        if descriptor < 0, errno == ENOENT {
            try createParent(of: path)
            descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        }
        guard descriptor >= 0 else { throw systemError(errno, "could not open \(path)") }
        return descriptor
    }

    /// Creates `path` and its missing parents; a failure names the component that failed and
    /// the system's reason (`Not a directory`, `Permission denied`, `Read-only file system`).
    static func createDirectory(_ path: String) throws(DownloadError) {
        guard !path.isEmpty else { return }
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { return }
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if stat(prefix, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else {
                    throw DownloadError(.writeFailed, "could not create the directory \(path): \(prefix) is not a directory")
                }
                continue
            }
            if mkdir(prefix, 0o755) != 0 {
                let code = errno
                guard code != EEXIST else { continue }
                throw DownloadError(
                    .writeFailed, "could not create the directory \(path): \(prefix): \(String(cString: strerror(code)))",
                    systemErrno: code)
            }
        }
    }

    static func createParent(of path: String) throws(DownloadError) {
        try createDirectory((path as NSString).deletingLastPathComponent)
    }

    /// Gives the file at `source` a second name, `destination`, unless a file is there: `true`
    /// when linked, `false` when `destination` exists, `nil` where the file system gives no hard
    /// link there (another device, or links refused): the caller moves the file instead.
    static func linkWithoutReplacing(_ source: String, to destination: String) throws(DownloadError) -> Bool? {
        let result = try makingParent(of: destination, from: source) { withCPaths(source, destination, link) }
        if result == 0 { return true }
        switch errno {
        case EEXIST: return false
        case EXDEV, EPERM, ENOTSUP, EMLINK, ENOSYS: return nil
        default: throw systemError(errno, "could not link \(source) to \(destination)")
        }
    }

    /// `body` with the two paths as C strings made from their own bytes: a `String` passed to C
    /// as such is first copied into a new array (a path or two for every file).
    private static func withCPaths<Result>(
        _ first: String, _ second: String, _ body: (UnsafePointer<CChar>, UnsafePointer<CChar>) -> Result
    ) -> Result {
        first.withCString { first in second.withCString { body(first, $0) } }
    }

    /// Runs `operation`, which puts `source`'s file at `destination`; when it fails (-1) because
    /// the destination's directory is missing (`ENOENT` while the source is there), makes the
    /// directory and runs it again. Its result, `errno` as it left it.
    private static func makingParent(
        of destination: String, from source: String, _ operation: () -> Int32
    ) throws(DownloadError) -> Int32 {
        let result = operation()
        guard result == -1, errno == ENOENT, exists(source) else { return result }
        try createParent(of: destination)
        return operation()
    }

    /// Whether `first` and `second` are two names of one file.
    static func isSameFile(_ first: String, _ second: String) -> Bool {
        var one = stat(), two = stat()
        guard stat(first, &one) == 0, stat(second, &two) == 0 else { return false }
        return one.st_dev == two.st_dev && one.st_ino == two.st_ino
    }

    /// How many names the file at `path` has (`nil`: no file there).
    static func linkCount(_ path: String) -> Int? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Int(info.st_nlink)
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    static func size(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }

    /// Removes the files `names` of `directory` (one look-up of the directory for all of them).
    static func remove(_ names: [String], in directory: String) {
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        // (`withCString`, as in ``withCPaths(_:_:_:)``.)
        for name in names { _ = name.withCString { unlinkat(descriptor, $0, 0) } }
    }

    static func remove(_ path: String) {
        if unlink(path) != 0, errno == EISDIR || errno == EPERM {
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    static func removeTree(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }

    static func rename(_ source: String, to destination: String) throws(DownloadError) {
        try createParent(of: destination)
        guard withCPaths(source, destination, Glibc.rename) == 0 else {
            throw systemError(errno, "could not move \(source) to \(destination)")
        }
    }

    /// A hard link when source and destination share a file system, a copy otherwise.
    static func linkOrCopy(_ source: String, to destination: String) throws(DownloadError) {
        try createParent(of: destination)
        remove(destination)
        if link(source, destination) == 0 { return }
        try copy(source, to: destination)
    }

    /// Copies a whole file (`copy_file_range`, so the kernel moves the bytes).
    static func copy(_ source: String, to destination: String) throws(DownloadError) {
        let output = open(destination, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard output >= 0 else { throw systemError(errno, "could not create \(destination)") }
        defer { close(output) }
        try append(source, to: output, destinationPath: destination)
    }

    /// Appends a whole file to an open descriptor.
    static func append(_ source: String, to output: Int32, destinationPath: String) throws(DownloadError) {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw systemError(errno, "could not open \(source)") }
        defer { close(input) }
        var info = stat()
        guard fstat(input, &info) == 0 else { throw systemError(errno, "could not read \(source)") }
        var remaining = Int(info.st_size)
        var useRange = true
        var buffer: [UInt8] = []
        while remaining > 0 {
            if useRange {
                let copied = tessera_copy_file_range(input, output, remaining)
                if copied > 0 {
                    remaining -= copied
                    continue
                }
                if copied == 0 { break }
                if errno == EINTR { continue }
                guard errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP else {
                    throw systemError(errno, "could not write \(destinationPath)")
                }
                useRange = false
                buffer = [UInt8](repeating: 0, count: 1 << 20)
            }
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, min($0.count, remaining)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw systemError(errno, "could not read \(source)") }
            var written = 0
            while written < count {
                let result = buffer.withUnsafeBytes { Glibc.write(output, $0.baseAddress! + written, count - written) }
                if result < 0, errno == EINTR { continue }
                guard result > 0 else { throw systemError(errno, "could not write \(destinationPath)") }
                written += result
            }
            remaining -= count
        }
        guard remaining == 0 else {
            throw DownloadError(.writeFailed, "\(source) ended before its size while copying it into \(destinationPath)")
        }
    }

    /// Sets a file's size (pieces are written at their offsets into a file of the final size).
    static func truncate(_ path: String, to size: Int64) throws(DownloadError) {
        guard Glibc.truncate(path, off_t(size)) == 0 else { throw systemError(errno, "could not size \(path)") }
    }

    static func systemError(_ code: Int32, _ message: String) -> DownloadError {
        DownloadError(
            code == ENOSPC || code == EDQUOT ? .diskFull : .writeFailed,
            "\(message): \(String(cString: strerror(code)))", systemErrno: code)
    }
}
