import Foundation
import Testing
import TesseraTesting

extension OriginTests {
    @Suite("OriginContent")
    struct OriginContentTests {
        static let block: Int64 = 65_536

        @Test("the same path and version give the same bytes in every instance")
        func deterministic() {
            let first = OriginContent(path: "/bytes/300000/a.bin")
            let second = OriginContent(path: "/bytes/300000/a.bin", version: 0)
            #expect(first.bytes(0..<300_000) == second.bytes(0..<300_000))
            #expect(first.fingerprint == second.fingerprint)
            #expect(first == second)
            // Not trivially constant: the bytes vary, and a block differs from the next one.
            let bytes = first.bytes(0..<(2 * Self.block))
            #expect(Set(bytes).count > 200)
            #expect(Array(bytes[0..<Int(Self.block)]) != Array(bytes[Int(Self.block)...]))
        }

        @Test("different paths and different versions give different bytes")
        func pathsAndVersionsDiffer() {
            let range: Range<Int64> = 0..<200_000
            let a = OriginContent(path: "/a").bytes(range)
            let b = OriginContent(path: "/b").bytes(range)
            let a1 = OriginContent(path: "/a", version: 1).bytes(range)
            let a2 = OriginContent(path: "/a", version: 2).bytes(range)
            #expect(a != b)
            #expect(a != a1)
            #expect(a1 != a2)
            // Differ everywhere, not in a byte or two: few positions agree by chance.
            let agreeing = zip(a, a1).filter { $0 == $1 }.count
            #expect(agreeing < range.count / 64)
        }

        @Test(
            "bytes(a..<b) equals the slice of a larger bytes(0..<n), across block boundaries",
            arguments: [
                0..<0, 0..<1, 3..<11, 7..<8, 1..<65_537, 65_530..<65_542, 65_535..<65_537,
                65_536..<65_544, 65_537..<131_075, 131_069..<200_003, 5..<262_139, 196_607..<262_144,
            ] as [Range<Int64>]
        )
        func slices(range: Range<Int64>) {
            let content = OriginContent(path: "/bytes/262144/slices.bin", version: 3)
            let whole = content.bytes(0..<262_144)
            let slice = content.bytes(range)
            #expect(slice.count == range.count)
            #expect(slice == Array(whole[Int(range.lowerBound)..<Int(range.upperBound)]))
        }

        @Test("fill writes the same bytes as bytes(_:) at unaligned offsets")
        func fillMatchesBytes() {
            let content = OriginContent(path: "/fill")
            let expected = content.bytes(65_533..<(65_533 + 70_001))
            var buffer = [UInt8](repeating: 0, count: 70_001)
            buffer.withUnsafeMutableBytes { content.fill($0, from: 65_533) }
            #expect(buffer == expected)
        }

        @Test("matchesFile accepts the content and rejects flipped, truncated, longer and shifted files")
        func matchesFile() throws {
            let size: Int64 = 200_000
            let content = OriginContent(path: "/bytes/200000/match.bin")
            let bytes = content.bytes(0..<size)
            let scratch = try TemporaryDirectory()
            defer { scratch.cleanUp() }

            let correct = try scratch.write("correct", bytes)
            #expect(content.matchesFile(atPath: correct, size: size))

            for position in [0, 65_535, 65_536, 150_001, Int(size) - 1] {
                var flipped = bytes
                flipped[position] ^= 0x01
                let path = try scratch.write("flipped-\(position)", flipped)
                #expect(!content.matchesFile(atPath: path, size: size), "flipped byte at \(position)")
            }

            let truncated = try scratch.write("truncated", Array(bytes.dropLast()))
            #expect(!content.matchesFile(atPath: truncated, size: size))

            let longer = try scratch.write("longer", bytes + [0])
            #expect(!content.matchesFile(atPath: longer, size: size))

            let shiftedBy1 = try scratch.write("shifted-1", content.bytes(1..<(size + 1)))
            #expect(!content.matchesFile(atPath: shiftedBy1, size: size))

            let shiftedByBlock = try scratch.write("shifted-block", content.bytes(Self.block..<(Self.block + size)))
            #expect(!content.matchesFile(atPath: shiftedByBlock, size: size))
            // The same file is right at the offset it was taken from.
            #expect(content.matchesFile(atPath: shiftedByBlock, size: size, offset: Self.block))

            // Another version of the same path is not this content.
            let otherVersion = try scratch.write("version-1", OriginContent(path: content.path, version: 1).bytes(0..<size))
            #expect(!content.matchesFile(atPath: otherVersion, size: size))

            #expect(!content.matchesFile(atPath: scratch.url.appendingPathComponent("missing").path, size: size))
            let empty = try scratch.write("empty", [])
            #expect(content.matchesFile(atPath: empty, size: 0))
        }

        @Test("fingerprint depends on path and version")
        func fingerprint() throws {
            let v0 = OriginContent(path: "/f", version: 0)
            let v1 = OriginContent(path: "/f", version: 1)
            let v2 = OriginContent(path: "/f", version: 2)
            #expect(v0.fingerprint == OriginContent(path: "/f").fingerprint)
            #expect(Set([v0.fingerprint, v1.fingerprint, v2.fingerprint]).count == 3)
            #expect(v0.fingerprint != OriginContent(path: "/g").fingerprint)
            #expect(!v0.fingerprint.isEmpty)
            #expect(v0.fingerprint.allSatisfy { $0.isHexDigit })
        }
    }
}
