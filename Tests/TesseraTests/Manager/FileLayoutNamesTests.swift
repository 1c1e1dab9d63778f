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

    /// The names as earlier versions wrote them (FNV-1a, 64 bits, of `type:key[#variant]`, in 16
    /// lowercase hex digits, leading zeros kept), written out: a change to the hash or to how its
    /// digits are written would lose every journal of an upgraded installation.
    @Test func theNamesAreTheOnesEarlierVersionsWrote() {
        #expect(FileLayout.fileName(for: DownloadTaskID(entityType: "direct", entityKey: "http://127.0.0.1:8080/a.bin"))
            == "direct-f65926a55e56c830")
        #expect(FileLayout.fileName(for: DownloadTaskID(entityType: "hls", entityKey: "http://example.test/master.m3u8", variantKey: "best"))
            == "hls-8e35e918ed11ef79")
        #expect(FileLayout.fileName(for: DownloadTaskID(entityType: "direct", entityKey: "http://h/1000")) == "direct-00c1e1bd252debce")
        // Bytes read one by one (a sequence with no buffer) hash as bytes read as a buffer.
        let text = "direct:http://h/1000"
        #expect(FNV.hash(text.utf8.lazy.map { $0 }) == 0x00c1_e1bd_252d_ebce)
        #expect(FNV.hash(text.utf8) == 0x00c1_e1bd_252d_ebce)
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
