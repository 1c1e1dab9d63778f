import COpenSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// AES-128 in CBC mode with PKCS#7 padding, the encryption of HLS segments under
/// `#EXT-X-KEY:METHOD=AES-128` (RFC 8216 §4.3.2.4, §5.2), on OpenSSL's libcrypto.
///
/// Each segment is encrypted on its own, so decrypt whole segments: ``decrypt(_:key:iv:)`` in
/// memory or ``decryptFile(at:to:key:iv:)`` from disk. When the playlist's `EXT-X-KEY` has no
/// `IV` attribute, the IV is the segment's media sequence number, ``sequenceIV(_:)``.
package enum AES128CBC {
    /// The key, IV and block size in bytes.
    package static let blockSize = 16

    /// Decrypts a whole segment with a 16-byte `key` and a 16-byte `iv`, and removes the
    /// PKCS#7 padding.
    ///
    /// - Throws: ``DownloadError/Code/cryptoFailure`` when the key or IV is not 16 bytes, when
    ///   `input` is empty or not a multiple of 16 bytes, or when the padding is invalid after
    ///   decryption, which almost always means the key or IV is wrong or the segment is corrupt.
    package static func decrypt(_ input: [UInt8], key: [UInt8], iv: [UInt8]) throws(DownloadError) -> [UInt8] {
        let cipher = try CBCCipher(encrypting: false, key: key, iv: iv)
        try checkCiphertextLength(Int64(input.count), of: "the segment")
        return try cipher.run(input)
    }

    /// Decrypts the segment in the file at `inputPath` into the file at `outputPath` (created, or
    /// truncated when it exists), streaming through 1 MiB buffers so memory stays constant
    /// whatever the size.
    ///
    /// On failure the output file is removed, so no half-decrypted file is left behind.
    ///
    /// - Throws: ``DownloadError/Code/cryptoFailure`` as ``decrypt(_:key:iv:)`` does;
    ///   ``DownloadError/Code/writeFailed`` or ``DownloadError/Code/diskFull`` when a file
    ///   cannot be read or written; ``DownloadError/Code/invalidRequest`` when both paths name
    ///   the same file.
    package static func decryptFile(
        at inputPath: String, to outputPath: String, key: [UInt8], iv: [UInt8]
    ) throws(DownloadError) {
        let cipher = try CBCCipher(encrypting: false, key: key, iv: iv)
        let input = try CryptoFileDescriptor.openForReading(inputPath)
        let inputStatus = try input.status()
        try checkCiphertextLength(Int64(inputStatus.st_size), of: inputPath)
        var outputStatus = stat()
        if stat(outputPath, &outputStatus) == 0, outputStatus.st_dev == inputStatus.st_dev,
            outputStatus.st_ino == inputStatus.st_ino
        {
            throw DownloadError(.invalidRequest, "cannot decrypt \(inputPath) into itself (\(outputPath))")
        }

        let output = try CryptoFileDescriptor.createForWriting(outputPath)
        let chunk = CryptoFileDescriptor.chunkSize
        let inputBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 64)
        let outputBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk + 2 * blockSize, alignment: 64)
        defer {
            inputBuffer.deallocate()
            outputBuffer.deallocate()
        }
        do throws(DownloadError) {
            var offset: Int64 = 0
            while true {
                let count = try input.readFully(into: inputBuffer, at: offset)
                if count == 0 { break }
                offset += Int64(count)
                let produced = try cipher.update(
                    UnsafeRawBufferPointer(rebasing: inputBuffer[..<count]), into: outputBuffer)
                try output.writeAll(UnsafeRawBufferPointer(rebasing: outputBuffer[..<produced]))
            }
            // The file may have changed since it was measured.
            try checkCiphertextLength(offset, of: inputPath)
            let produced = try cipher.finish(into: outputBuffer)
            try output.writeAll(UnsafeRawBufferPointer(rebasing: outputBuffer[..<produced]))
            try output.close()
        } catch {
            try? output.close()
            _ = unlink(outputPath)
            throw error
        }
    }

    /// Encrypts `input` (any length, empty included) with PKCS#7 padding: the output is 1 to 16
    /// bytes longer, a multiple of 16. For tests and fixtures; Tessera itself only decrypts.
    ///
    /// - Throws: ``DownloadError/Code/cryptoFailure`` when the key or IV is not 16 bytes.
    package static func encrypt(_ input: [UInt8], key: [UInt8], iv: [UInt8]) throws(DownloadError) -> [UInt8] {
        let cipher = try CBCCipher(encrypting: true, key: key, iv: iv)
        return try cipher.run(input)
    }

    /// The IV HLS uses when `EXT-X-KEY` has no `IV` attribute: the segment's media sequence
    /// number as a 16-byte big-endian integer (RFC 8216 §5.2).
    package static func sequenceIV(_ mediaSequence: UInt64) -> [UInt8] {
        var iv = [UInt8](repeating: 0, count: blockSize)
        for index in 0..<8 {
            iv[blockSize - 1 - index] = UInt8(truncatingIfNeeded: mediaSequence >> (8 * UInt64(index)))
        }
        return iv
    }

    /// PKCS#7-padded CBC ciphertext is a non-empty whole number of blocks.
    private static func checkCiphertextLength(_ length: Int64, of subject: String) throws(DownloadError) {
        guard length > 0, length % Int64(blockSize) == 0 else {
            throw DownloadError(
                .cryptoFailure,
                "cannot decrypt \(subject) with AES-128-CBC: it is \(length) bytes, not a non-empty multiple of 16; "
                    + "the segment is truncated or not encrypted")
        }
    }
}

/// One AES-128-CBC encryption or decryption in an `EVP_CIPHER_CTX`, freed (and its key material
/// wiped by OpenSSL) when released. Single owner.
private final class CBCCipher {
    private let context: OpaquePointer
    private let encrypting: Bool

    init(encrypting: Bool, key: [UInt8], iv: [UInt8]) throws(DownloadError) {
        guard key.count == AES128CBC.blockSize else {
            throw DownloadError(.cryptoFailure, "an AES-128 key is 16 bytes, got \(key.count)")
        }
        guard iv.count == AES128CBC.blockSize else {
            throw DownloadError(.cryptoFailure, "an AES-128-CBC IV is 16 bytes, got \(iv.count)")
        }
        guard let context = EVP_CIPHER_CTX_new() else {
            throw DownloadError(.cryptoFailure, "OpenSSL could not allocate a cipher context")
        }
        self.context = context
        self.encrypting = encrypting
        // Padding (PKCS#7) is on by default.
        guard EVP_CipherInit_ex(context, EVP_aes_128_cbc(), nil, key, iv, encrypting ? 1 : 0) == 1 else {
            throw Self.failure("set up AES-128-CBC")
        }
    }

    deinit {
        EVP_CIPHER_CTX_free(context)
    }

    /// Runs all of `input` through the cipher and finishes.
    func run(_ input: [UInt8]) throws(DownloadError) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: input.count + 2 * AES128CBC.blockSize)
        let result = input.withUnsafeBytes { source in
            output.withUnsafeMutableBytes { target -> Result<Int, DownloadError> in
                do throws(DownloadError) {
                    let produced = try update(source, into: target)
                    let last = try finish(into: UnsafeMutableRawBufferPointer(rebasing: target[produced...]))
                    return .success(produced + last)
                } catch {
                    return .failure(error)
                }
            }
        }
        output.removeLast(output.count - (try result.get()))
        return output
    }

    /// Feeds `input` in; writes what the cipher releases to `output`, which must have room for
    /// `input.count + 16` bytes, and returns its length.
    func update(
        _ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws(DownloadError) -> Int {
        precondition(output.count >= input.count + AES128CBC.blockSize, "the output buffer is too small")
        guard let source = input.baseAddress, let target = output.baseAddress else { return 0 }
        // OpenSSL takes `int` lengths; feed very large inputs in parts.
        let part = 1 << 30
        var consumed = 0
        var produced = 0
        while consumed < input.count {
            let length = min(part, input.count - consumed)
            var written: Int32 = 0
            guard
                EVP_CipherUpdate(
                    context, target.advanced(by: produced).assumingMemoryBound(to: UInt8.self), &written,
                    source.advanced(by: consumed).assumingMemoryBound(to: UInt8.self), Int32(length)) == 1
            else { throw Self.failure(encrypting ? "encrypt" : "decrypt") }
            consumed += length
            produced += Int(written)
        }
        return produced
    }

    /// Finishes: writes the last block (encrypting) or the last block without its padding
    /// (decrypting) to `output`, which must have room for 16 bytes, and returns its length.
    func finish(into output: UnsafeMutableRawBufferPointer) throws(DownloadError) -> Int {
        precondition(output.count >= AES128CBC.blockSize, "the output buffer is too small")
        var written: Int32 = 0
        guard EVP_CipherFinal_ex(context, output.baseAddress!.assumingMemoryBound(to: UInt8.self), &written) == 1
        else {
            if encrypting { throw Self.failure("encrypt") }
            let reason = OpenSSLErrorQueue.drain().map { " (OpenSSL: \($0))" } ?? ""
            throw DownloadError(
                .cryptoFailure,
                "AES-128-CBC decryption found invalid padding: "
                    + "the key or IV is wrong, or the segment is corrupt\(reason)")
        }
        return Int(written)
    }

    /// An error for a failed OpenSSL call, with OpenSSL's reason; empties the error queue.
    private static func failure(_ action: String) -> DownloadError {
        let reason = OpenSSLErrorQueue.drain() ?? "unknown error"
        return DownloadError(.cryptoFailure, "OpenSSL could not \(action): \(reason)")
    }
}
