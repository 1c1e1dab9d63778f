import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// The journal: what is on disk, read back after a crash.
@Suite struct TaskJournalTests {
    let validator = ResourceValidator(etag: "\"abc\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", lastModifiedIsStrong: true)

    @Test func aSegmentResumesFromItsContiguousBytesOfAVersionARangeCanName() {
        var record = TaskJournal.Output()
        record.partials[2] = validator
        record.ranges.insert(1_000..<1_600)
        record.ranges.insert(1_700..<2_000)
        // From its start, up to the first hole.
        #expect(record.resumablePrefix(ofSegment: 2, at: 1_000, size: nil) == TransferCheckpoint(bytesWritten: 600, validator: validator))
        // All of it on disk: the last byte is still asked for.
        #expect(record.resumablePrefix(ofSegment: 2, at: 1_000, size: 400)?.bytesWritten == 399)
        // Nothing at its start, no validator for it, or one a range cannot name: from scratch.
        #expect(record.resumablePrefix(ofSegment: 2, at: 900, size: nil) == nil)
        #expect(record.resumablePrefix(ofSegment: 3, at: 1_000, size: nil) == nil)
        record.partials[2] = ResourceValidator(etag: "W/\"weak\"")
        #expect(record.resumablePrefix(ofSegment: 2, at: 1_000, size: nil) == nil)
    }

    @Test func aCommittedRecordReadsBackWhole() throws {
        let directory = TemporaryDirectory("journal")
        defer { directory.cleanUp() }
        let base = directory.file("task")
        let journal = TaskJournal(basePath: base, commitInterval: .zero)
        journal.update(0) { record in
            record.size = 1_000_000
            record.validator = validator
            record.partials[7] = validator
        }
        journal.recordWritten(0, 0..<4096)
        journal.recordWritten(0, 8192..<10_000)
        journal.recordSize(1, segment: 3, size: 512)
        journal.recordSize(1, segment: 4, size: 0)
        journal.commit()
        journal.close()
        let loaded = TaskJournal.load(from: base)
        #expect(loaded[0]?.size == 1_000_000)
        #expect(loaded[0]?.validator == validator)
        #expect(loaded[0]?.ranges.ranges == [0..<4096, 8192..<10_000])
        #expect(loaded[0]?.partials == [7: validator])
        #expect(loaded[1]?.sizes == [3: 512, 4: 0])
    }

    @Test func aTornSnapshotFallsBackToTheOtherOne() throws {
        let directory = TemporaryDirectory("journal-torn")
        defer { directory.cleanUp() }
        let base = directory.file("task")
        let journal = TaskJournal(basePath: base, commitInterval: .zero)
        journal.recordWritten(0, 0..<100)
        journal.commit()  // sequence 1 -> .b
        journal.recordWritten(0, 100..<200)
        journal.commit()  // sequence 2 -> .a
        journal.close()
        #expect(TaskJournal.load(from: base)[0]?.ranges.ranges == [0..<200])
        // A kill in the middle of the newest write: its last bytes never made it (the file keeps
        // what was there before, here the zeros of its room).
        var newest = try #require(FileOperations.contents(base + ".a"))
        let length = try #require((1...newest.count).first { TaskJournal.decode(Array(newest[0..<$0])) != nil })
        for index in length - 5..<length { newest[index] = 0 }
        try Data(newest).write(to: URL(fileURLWithPath: base + ".a"))
        #expect(TaskJournal.load(from: base)[0]?.ranges.ranges == [0..<100], "the older, whole snapshot wins")
        // A flipped byte is caught by the checksum too.
        var older = try #require(FileOperations.contents(base + ".b"))
        let olderLength = try #require((1...older.count).first { TaskJournal.decode(Array(older[0..<$0])) != nil })
        older[olderLength / 2] ^= 0x40
        try Data(older).write(to: URL(fileURLWithPath: base + ".b"))
        #expect(TaskJournal.load(from: base).isEmpty, "no valid record: nothing is trusted")
    }

    @Test func aShorterSnapshotOverALongerOneReadsAsItself() throws {
        let directory = TemporaryDirectory("journal-shorter")
        defer { directory.cleanUp() }
        let base = directory.file("task")
        let journal = TaskJournal(basePath: base, commitInterval: .zero)
        // Many ranges, then one: the snapshot files are written in place, never cut.
        for start in stride(from: Int64(0), to: 40_000, by: 200) { journal.recordWritten(0, start..<start + 100) }
        journal.commit()
        journal.commit()
        for start in stride(from: Int64(100), to: 40_000, by: 200) { journal.recordWritten(0, start..<start + 100) }
        journal.commit()
        journal.close()
        #expect(TaskJournal.load(from: base)[0]?.ranges.ranges == [0..<40_000])
    }

    @Test func bothSnapshotFilesHaveTheirRoomFromTheFirstCommit() throws {
        let directory = TemporaryDirectory("journal-room")
        defer { directory.cleanUp() }
        let base = directory.file("task")
        let journal = TaskJournal(basePath: base, commitInterval: .zero)
        journal.recordWritten(0, 0..<100)
        journal.commit()
        // A disk that fills up after the first commit cannot refuse the next ones: both files
        // exist and hold their room already.
        for suffix in [".a", ".b"] {
            #expect((FileOperations.size(base + suffix) ?? 0) >= TaskJournal.reserveStep, "\(suffix)")
        }
        journal.close()
    }

    @Test func aTornSizeEntryIsIgnoredAndTheNextAppendReplacesIt() throws {
        let directory = TemporaryDirectory("journal-sizes")
        defer { directory.cleanUp() }
        let base = directory.file("task")
        let first = TaskJournal(basePath: base, commitInterval: .zero)
        first.recordSize(0, segment: 0, size: 100)
        first.recordSize(0, segment: 1, size: 200)
        first.commit()
        first.close()
        // Half an entry, as a kill mid-append leaves it.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: base + ".sizes"))
        handle.seekToEndOfFile()
        handle.write(Data([1, 2, 3, 4, 5, 6, 7]))
        handle.closeFile()
        #expect(TaskJournal.load(from: base)[0]?.sizes == [0: 100, 1: 200])
        let second = TaskJournal(basePath: base, outputs: TaskJournal.load(from: base), commitInterval: .zero)
        second.recordSize(0, segment: 2, size: 300)
        second.commit()
        second.close()
        #expect(TaskJournal.load(from: base)[0]?.sizes == [0: 100, 1: 200, 2: 300])
    }

    @Test func nothingIsWrittenUntilTheFirstCommitAndRemoveLeavesNothing() throws {
        let directory = TemporaryDirectory("journal-lazy")
        defer { directory.cleanUp() }
        let base = directory.file("task")
        let journal = TaskJournal(basePath: base, commitInterval: .seconds(3600))
        journal.update(0) { $0.size = 10 }
        #expect(!FileOperations.exists(base + ".a") && !FileOperations.exists(base + ".b"))
        journal.commit()
        #expect(FileOperations.exists(base + ".b"))
        journal.remove()
        #expect(!FileOperations.exists(base + ".a") && !FileOperations.exists(base + ".b") && !FileOperations.exists(base + ".sizes"))
        #expect(TaskJournal.load(from: base).isEmpty)
    }

    @Test func hostileRecordsAreRefusedNotTrusted() {
        #expect(TaskJournal.decode(Array("TSJ1".utf8) + [UInt8](repeating: 0xFF, count: 40)) == nil)
        #expect(TaskJournal.decode([]) == nil)
        // A valid record claiming a range that ends before it starts is refused.
        var writer = ByteWriter()
        writer.bytes += Array("TSJ1".utf8)
        writer.append(UInt64(1))
        writer.append(UInt32(1))
        writer.append(UInt32(0))
        writer.append(UInt64(bitPattern: -1))
        writer.append(nil as ResourceValidator?)
        writer.append(UInt32(1))
        writer.append(UInt64(100))
        writer.append(UInt64(50))
        writer.append(UInt32(0))
        writer.append(FNV.hash(writer.bytes))
        #expect(TaskJournal.decode(writer.bytes) == nil)
    }
}
