import Testing
@testable import Tessera

/// The work files' names stay what earlier versions gave them (a journal is found again after
/// an upgrade), however they are computed.
@Suite struct FileLayoutNamesTests {
    @Test(arguments: [
        DownloadTaskID(entityType: "direct", entityKey: "http://127.0.0.1:8080/a.bin"),
        DownloadTaskID(entityType: "hls", entityKey: "http://example.test/master.m3u8", variantKey: "best"),
        DownloadTaskID(entityType: "Ünïcode type", entityKey: "key#with:marks", variantKey: "v#1"),
    ])
    func aTasksFileNameIsTheHashOfItsText(_ id: DownloadTaskID) {
        let hex = String(FNV.hash(id.description.utf8), radix: 16)
        let expected = SafePath.sanitizedFileName(id.entityType, fallback: "task") + "-" + String(repeating: "0", count: 16 - hex.count) + hex
        #expect(FileLayout.fileName(for: id) == expected)
    }

    @Test func theWorkDirectoryIsUnderTheRoot() {
        #expect(FileLayout(root: "/srv/downloads").workDirectory == "/srv/downloads/.tessera/work")
        #expect(FileLayout(root: "/srv/downloads").journalBase(of: DownloadTaskID(entityType: "direct", entityKey: "k"), epoch: 3)
            .hasPrefix("/srv/downloads/.tessera/work/direct-"))
    }

    @Test(arguments: [("bytes", true), ("Bytes", true), ("none, BYTES", true), ("none", false), ("byte", false), ("", false), ("bytexs", false)])
    func acceptRangesMentionsBytesInAnyCase(_ value: String, _ expected: Bool) {
        #expect(CurlTransfer.mentionsBytes(value) == expected)
    }
}
