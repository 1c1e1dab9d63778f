import CTesseraSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The file-system steps of assembling outputs, as system calls with ``DownloadError``s.
enum FileOperations {
    static func createDirectory(_ path: String) throws(DownloadError) {
        guard !path.isEmpty else { return }
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw DownloadError(.writeFailed, "could not create the directory \(path): \(error.localizedDescription)")
        }
    }

    static func createParent(of path: String) throws(DownloadError) {
        try createDirectory((path as NSString).deletingLastPathComponent)
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
        guard Glibc.rename(source, destination) == 0 else {
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
                let result = buffer.withUnsafeBytes { write(output, $0.baseAddress! + written, count - written) }
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
