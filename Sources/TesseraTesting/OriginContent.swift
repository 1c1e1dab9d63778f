/// The bytes ``LoopbackOrigin`` serves for generated resources, computed from the path and a
/// version number, so a test knows any file's content without storing it.
///
/// Byte `i` is a pseudo-random 64 KiB block chosen by the path and version, XOR-ed with an
/// 8-byte pattern that depends on `i / 65536`: a byte written at the wrong offset, a spliced
/// second version or a repeated block never looks right.
public struct OriginContent: Sendable, Hashable {
    static let blockSize = 65_536

    /// The path the content belongs to.
    public let path: String
    /// The version; ``LoopbackOrigin/changeContent(at:)`` increments it.
    public let version: Int
    private let seed: UInt64
    private let block: [UInt64]

    /// A short hexadecimal name of the path and version, stable across processes.
    public var fingerprint: String { String(seed, radix: 16) }

    /// The content of `path` at `version`.
    public init(path: String, version: Int = 0) {
        self.path = path
        self.version = version
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in path.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        seed = hash ^ (UInt64(truncatingIfNeeded: version) &* 0x9E37_79B9_7F4A_7C15)
        var state = seed
        block = (0..<(Self.blockSize / 8)).map { _ in Self.splitMix(&state) }
    }

    private static func splitMix(_ state: inout UInt64) -> UInt64 {
        state = state &+ 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private func pattern(forBlock index: Int64) -> UInt64 {
        var state = seed ^ (UInt64(bitPattern: index) &* 0xD6E8_FEB8_6659_FD93)
        return Self.splitMix(&state)
    }

    /// Writes the bytes at `offset..<offset + buffer.count` into `buffer`.
    public func fill(_ buffer: UnsafeMutableRawBufferPointer, from offset: Int64) {
        var position = offset
        var written = 0
        let blockBytes = Int64(Self.blockSize)
        block.withUnsafeBytes { blockRaw in
            while written < buffer.count {
                let blockIndex = position / blockBytes
                let inBlock = Int(position % blockBytes)
                let count = min(buffer.count - written, Self.blockSize - inBlock)
                let pattern = pattern(forBlock: blockIndex)
                let destination = buffer.baseAddress! + written
                let source = blockRaw.baseAddress! + inBlock
                if inBlock % 8 == 0 && count % 8 == 0 {
                    // The fast path: whole aligned words.
                    let words = count / 8
                    for word in 0..<words {
                        let value = source.loadUnaligned(fromByteOffset: word * 8, as: UInt64.self) ^ pattern
                        destination.storeBytes(of: value, toByteOffset: word * 8, as: UInt64.self)
                    }
                } else {
                    for index in 0..<count {
                        let position = inBlock + index
                        let patternByte = UInt8(truncatingIfNeeded: pattern >> UInt64((position % 8) * 8))
                        let byte = source.load(fromByteOffset: index, as: UInt8.self) ^ patternByte
                        destination.storeBytes(of: byte, toByteOffset: index, as: UInt8.self)
                    }
                }
                written += count
                position += Int64(count)
            }
        }
    }

    /// The bytes in `range`.
    public func bytes(_ range: Range<Int64>) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Int(range.count)) { buffer, count in
            fill(UnsafeMutableRawBufferPointer(buffer), from: range.lowerBound)
            count = Int(range.count)
        }
    }

    /// Whether the file at `filePath` holds exactly the first `size` bytes of this content
    /// (or, with `offset`, bytes `offset..<offset + size`), compared in chunks. With
    /// `fileOffset`, the bytes are looked for at that position of a larger file instead, and
    /// what follows them does not matter.
    public func matchesFile(atPath filePath: String, size: Int64, offset: Int64 = 0, fileOffset: Int64? = nil) -> Bool {
        guard let handle = fopen(filePath, "rb") else { return false }
        defer { fclose(handle) }
        if let fileOffset, fseeko(handle, off_t(fileOffset), SEEK_SET) != 0 { return false }
        let chunk = 1 << 20
        var expected = [UInt8](repeating: 0, count: chunk)
        var actual = [UInt8](repeating: 0, count: chunk)
        var position: Int64 = 0
        while position < size {
            let count = Int(min(Int64(chunk), size - position))
            let read = actual.withUnsafeMutableBytes { fread($0.baseAddress, 1, count, handle) }
            guard read == count else { return false }
            expected.withUnsafeMutableBytes { fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<count]), from: offset + position) }
            let same = expected.withUnsafeBytes { a in actual.withUnsafeBytes { b in memcmp(a.baseAddress!, b.baseAddress!, count) == 0 } }
            guard same else { return false }
            position += Int64(count)
        }
        // Nothing may follow a whole file.
        return fileOffset != nil || fgetc(handle) == EOF
    }
}


extension OriginContent {
    /// ``matchesFile(atPath:size:offset:)`` on a thread of its own, so comparing a large file
    /// never blocks the cooperative thread pool that other tasks (and transfers) need.
    public func verifyFile(atPath filePath: String, size: Int64, offset: Int64 = 0, fileOffset: Int64? = nil) async -> Bool {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: matchesFile(atPath: filePath, size: size, offset: offset, fileOffset: fileOffset))
            }
            thread.name = "tessera-verify"
            thread.start()
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation
