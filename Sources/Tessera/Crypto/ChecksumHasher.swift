import COpenSSL

/// Computes a ``Checksum`` over bytes that arrive in pieces, e.g. as a download writes them,
/// with OpenSSL's `EVP_MD_CTX`.
///
/// Feed the bytes with `update(_:)` in order, then call
/// ``finalize()`` once. A hasher has a single owner and is not `Sendable`; it frees its OpenSSL
/// context when released.
///
/// ```swift
/// let hasher = ChecksumHasher(.sha256)
/// for chunk in chunks { hasher.update(chunk) }
/// let checksum = hasher.finalize()
/// ```
package final class ChecksumHasher {
    /// The hash function.
    package let algorithm: Checksum.Algorithm
    private let context: OpaquePointer
    private var finalized = false

    /// Creates a hasher for `algorithm`.
    ///
    /// Traps if libcrypto cannot provide the algorithm, which happens only with a crypto
    /// library that is broken or restricted by policy (e.g. MD5 in a FIPS-only configuration).
    package init(_ algorithm: Checksum.Algorithm) {
        self.algorithm = algorithm
        guard let context = EVP_MD_CTX_new() else {
            fatalError("OpenSSL could not allocate a digest context")
        }
        guard EVP_DigestInit_ex(context, algorithm.openSSLDigest, nil) == 1 else {
            let reason = OpenSSLErrorQueue.drain()
            EVP_MD_CTX_free(context)
            fatalError("OpenSSL cannot compute \(algorithm): \(reason ?? "unknown error")")
        }
        self.context = context
    }

    deinit {
        EVP_MD_CTX_free(context)
    }

    /// Adds `bytes` to the hash.
    ///
    /// - Precondition: ``finalize()`` has not been called.
    package func update(_ bytes: UnsafeRawBufferPointer) {
        precondition(!finalized, "ChecksumHasher.update called after finalize")
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        guard EVP_DigestUpdate(context, base, bytes.count) == 1 else {
            fatalError("OpenSSL failed to hash bytes: \(OpenSSLErrorQueue.drain() ?? "unknown error")")
        }
    }

    /// Adds `bytes` to the hash.
    ///
    /// - Precondition: ``finalize()`` has not been called.
    package func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Adds any collection of bytes: contiguous storage directly, anything else copied through
    /// a small buffer.
    func update(contentsOf bytes: some Collection<UInt8>) {
        let handled: Void? = bytes.withContiguousStorageIfAvailable { update(UnsafeRawBufferPointer($0)) }
        guard handled == nil else { return }
        var buffer = [UInt8]()
        buffer.reserveCapacity(min(bytes.count, 64 << 10))
        for byte in bytes {
            buffer.append(byte)
            if buffer.count == 64 << 10 {
                update(buffer)
                buffer.removeAll(keepingCapacity: true)
            }
        }
        update(buffer)
    }

    /// Finishes the hash and returns the checksum of all bytes added.
    ///
    /// - Precondition: ``finalize()`` has not been called before; a hasher is used once.
    package func finalize() -> Checksum {
        precondition(!finalized, "ChecksumHasher.finalize called twice")
        finalized = true
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &digest, &length) == 1 else {
            fatalError("OpenSSL failed to finish a hash: \(OpenSSLErrorQueue.drain() ?? "unknown error")")
        }
        precondition(Int(length) == algorithm.digestLength, "OpenSSL's \(algorithm) digest has \(length) bytes")
        return Checksum(algorithm, digest: Array(digest.prefix(Int(length))))
    }
}

/// A hasher has one owner at a time; sharing it between tasks would interleave updates.
@available(*, unavailable)
extension ChecksumHasher: Sendable {}

extension Checksum.Algorithm {
    /// libcrypto's digest for the algorithm.
    var openSSLDigest: OpaquePointer? {
        switch self {
        case .md5: EVP_md5()
        case .sha1: EVP_sha1()
        case .sha256: EVP_sha256()
        case .sha384: EVP_sha384()
        case .sha512: EVP_sha512()
        }
    }
}

/// This thread's OpenSSL error queue.
enum OpenSSLErrorQueue {
    /// Empties the queue, so a failure of ours does not linger into libcurl's TLS code on the
    /// same thread, and returns the text of the earliest error, `nil` when there was none.
    static func drain() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        let code = tessera_ossl_drain_errors(&buffer, buffer.count)
        guard code != 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
