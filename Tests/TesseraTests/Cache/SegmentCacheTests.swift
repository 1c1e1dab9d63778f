import Foundation
import Testing
import TesseraTesting
@testable import Tessera

@Suite struct SegmentCacheTests {
    let directory = TemporaryDirectory("cache")

    func file(_ name: String, _ bytes: [UInt8]) throws -> String {
        let path = directory.file("source-" + name)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func insertedEntriesAreFoundAndPlaced() throws {
        defer { directory.cleanUp() }
        let cache = try SegmentCache(directory: directory.file("c"))
        let bytes = (0..<5000).map { UInt8($0 % 251) }
        let entry = try cache.insert("key-1", from: try file("a", bytes))
        #expect(entry.size == 5000)
        #expect(cache.entryCount == 1 && cache.totalBytes == 5000)
        let hit = try #require(cache.lookup("key-1", expectedSize: 5000))
        try cache.place(hit, at: directory.file("out/placed"))
        #expect(fileBytes(directory.file("out/placed")) == bytes)
        #expect(cache.lookup("other") == nil)
    }

    @Test func lookupsAreCountedAsHitsAndMisses() throws {
        defer { directory.cleanUp() }
        let cache = try SegmentCache(directory: directory.file("c"))
        try cache.insert("key", from: try file("k", [1, 2, 3]))
        #expect(cache.lookupCounts == (0, 0))
        #expect(cache.lookup("key") != nil)
        #expect(cache.lookup("absent") == nil)
        // An entry that fails its check is a miss too.
        #expect(cache.lookup("key", expectedSize: 4) == nil)
        #expect(cache.lookupCounts == (1, 2))
    }

    @Test func aHitCanBePlacedAtAnOffset() throws {
        defer { directory.cleanUp() }
        let cache = try SegmentCache(directory: directory.file("c"))
        let entry = try cache.insert("piece", from: try file("p", [9, 9, 9]))
        try Data([0, 0, 0, 0, 0, 0]).write(to: URL(fileURLWithPath: directory.file("whole")))
        try cache.place(entry, at: directory.file("whole"), offset: 2)
        #expect(fileBytes(directory.file("whole")) == [0, 0, 9, 9, 9, 0])
    }

    @Test func theFileNameIsTheKeysHashNotTheKey() throws {
        defer { directory.cleanUp() }
        let cache = try SegmentCache(directory: directory.file("c"))
        let entry = try cache.insert("../../etc/passwd", from: try file("a", [1]))
        #expect(entry.path.hasPrefix(directory.file("c") + "/"))
        #expect(!entry.path.contains(".."))
        #expect((entry.path as NSString).lastPathComponent == SegmentCache.name(for: "../../etc/passwd"))
    }

    @Test func aWrongSizeIsEvicted() throws {
        defer { directory.cleanUp() }
        let cache = try SegmentCache(directory: directory.file("c"))
        let entry = try cache.insert("k", from: try file("a", [1, 2, 3, 4]))
        // Appending to the entry (or a hard-linked output) changes its size.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: entry.path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([5]))
        try handle.close()
        #expect(cache.lookup("k") == nil)
        #expect(cache.entryCount == 0)
        #expect(!FileManager.default.fileExists(atPath: entry.path))
    }

    @Test func anExpectedSizeThatDiffersIsAMissAndEvicts() throws {
        defer { directory.cleanUp() }
        let cache = try SegmentCache(directory: directory.file("c"))
        try cache.insert("k", from: try file("a", [1, 2, 3]))
        #expect(cache.lookup("k", expectedSize: 4) == nil)
        #expect(!cache.contains("k"))
    }

    @Test func corruptBytesAreCaughtByTheChecksum() throws {
        defer { directory.cleanUp() }
        let cache = try SegmentCache(directory: directory.file("c"))
        let bytes: [UInt8] = Array("hello world".utf8)
        let checksum = Checksum.compute(.sha256, bytes: bytes)
        let entry = try cache.insert(checksum.description, from: try file("a", bytes), checksum: checksum)
        #expect(cache.lookup(checksum.description) != nil)
        // Same size, one byte flipped.
        try Data(Array("hellO world".utf8)).write(to: URL(fileURLWithPath: entry.path))
        #expect(cache.lookup(checksum.description) == nil)
        #expect(cache.entryCount == 0)
    }

    @Test func leastRecentlyUsedEntriesGoFirstOverTheBudget() throws {
        defer { directory.cleanUp() }
        let cache = try SegmentCache(directory: directory.file("c"), byteBudget: 3000)
        for name in ["a", "b", "c"] {
            try cache.insert(name, from: try file(name, [UInt8](repeating: 1, count: 1000)))
        }
        _ = cache.lookup("a")  // a is now the most recently used
        try cache.insert("d", from: try file("d", [UInt8](repeating: 2, count: 1000)))
        #expect(cache.contains("a") && cache.contains("c") && cache.contains("d"))
        #expect(!cache.contains("b"), "b was the least recently used")
        #expect(cache.totalBytes == 3000)
        // An entry larger than the budget is kept alone.
        try cache.insert("huge", from: try file("huge", [UInt8](repeating: 3, count: 5000)))
        #expect(cache.entryCount == 1 && cache.contains("huge"))
    }

    @Test func aReopenedCacheKnowsItsEntriesAndTheirOrder() throws {
        defer { directory.cleanUp() }
        do {
            let cache = try SegmentCache(directory: directory.file("c"), byteBudget: 10_000)
            for name in ["old", "mid", "new"] {
                try cache.insert(name, from: try file(name, [UInt8](repeating: 7, count: 1000)))
                usleep(20_000)  // distinct modification times: they keep the order across a reopen
            }
            _ = cache.lookup("old")
        }
        let reopened = try SegmentCache(directory: directory.file("c"), byteBudget: 2000)
        #expect(reopened.entryCount == 3 && reopened.totalBytes == 3000)
        try reopened.insert("next", from: try file("next", [UInt8](repeating: 8, count: 500)))
        // "mid" and "new" are older than the touched "old": the budget keeps the freshest.
        #expect(reopened.contains("old") && reopened.contains("next"))
        #expect(!reopened.contains("mid"))
    }

    @Test func halfWrittenEntriesAreRemovedWhenTheCacheOpens() throws {
        defer { directory.cleanUp() }
        let root = directory.file("c")
        let cache = try SegmentCache(directory: root)
        let entry = try cache.insert("k", from: try file("a", [1, 2]))
        // A crash between the data's rename and its record's: no record.
        try FileManager.default.removeItem(atPath: entry.path + ".json")
        // A record whose data is gone, and a stray temporary file.
        let orphan = SafePath.join(root, "ab/" + String(repeating: "ab", count: 32) + ".json")
        try FileManager.default.createDirectory(atPath: SafePath.join(root, "ab"), withIntermediateDirectories: true)
        try Data("{}".utf8).write(to: URL(fileURLWithPath: orphan))
        try Data([1]).write(to: URL(fileURLWithPath: SafePath.join(root, "tmp/stray")))
        let reopened = try SegmentCache(directory: root)
        #expect(reopened.entryCount == 0)
        #expect(!FileManager.default.fileExists(atPath: entry.path))
        #expect(!FileManager.default.fileExists(atPath: orphan))
        #expect(!FileManager.default.fileExists(atPath: SafePath.join(root, "tmp/stray")))
    }
}
