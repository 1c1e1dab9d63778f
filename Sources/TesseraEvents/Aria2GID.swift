import Tessera

/// aria2's download identifier: 16 lowercase hexadecimal digits.
///
/// Tessera identifies a task by its entity (``DownloadTaskID``: `type:key#variant`) and a group
/// by its aggregation key. Their GIDs are derived from those, so they are stable: the same task
/// has the same GID after a restart of the daemon, and adding the same input again returns the
/// known task's GID. A GID is the 64-bit FNV-1a hash of `task:<id>` (or `group:<key>`), in hex.
public enum Aria2GID {
    /// The GID of a task.
    public static func of(_ id: DownloadTaskID) -> String {
        hash("task:" + id.description)
    }

    /// The GID of a group.
    public static func of(group key: String) -> String {
        hash("group:" + key)
    }

    /// Whether `text` has a GID's shape (aria2 also accepts a unique prefix; Tessera does not).
    public static func isValid(_ text: String) -> Bool {
        text.utf8.count == 16 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    static func hash(_ text: String) -> String {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            value ^= UInt64(byte)
            value = value &* 0x0000_0100_0000_01b3
        }
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
