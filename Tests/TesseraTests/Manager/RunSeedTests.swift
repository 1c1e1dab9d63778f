import Testing
@testable import Tessera

/// A run's seed for its retry jitter mixes the task's identity, as its text, into the
/// configured seed (tests) or the process's: the same task and seed give the same jitter.
@Suite struct RunSeedTests {
    /// The mix of `id.description`'s bytes, as the seed was first defined.
    static func reference(_ id: DownloadTaskID, _ configured: UInt64) -> UInt64 {
        var seed = configured
        for byte in id.description.utf8 { seed = (seed ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return seed
    }

    @Test(arguments: [
        DownloadTaskID(entityType: "direct", entityKey: "https://example.com/a.bin"),
        DownloadTaskID(entityType: "dash", entityKey: "https://example.com/m.mpd", variantKey: "1080p"),
        DownloadTaskID(entityType: "x", entityKey: "k#with:separators", variantKey: "v#2"),
        DownloadTaskID(entityType: "ümlaut", entityKey: "ключ", variantKey: ""),
    ])
    func theSeedMixesTheIdentitysText(_ id: DownloadTaskID) {
        for configured: UInt64 in [0, 1, 0xDEAD_BEEF, .max] {
            #expect(TaskRun.baseSeed(for: id, configured: configured) == Self.reference(id, configured))
        }
    }

    @Test func anotherIdentityGivesAnotherSeed() {
        let a = DownloadTaskID(entityType: "direct", entityKey: "a"), b = DownloadTaskID(entityType: "direct", entityKey: "b")
        let variant = DownloadTaskID(entityType: "direct", entityKey: "a", variantKey: "v")
        #expect(TaskRun.baseSeed(for: a, configured: 7) != TaskRun.baseSeed(for: b, configured: 7))
        #expect(TaskRun.baseSeed(for: a, configured: 7) != TaskRun.baseSeed(for: variant, configured: 7))
    }
}
