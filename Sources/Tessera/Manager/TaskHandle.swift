/// A task as the manager and its scheduler know it inside: a number given when the task is added
/// (or restored), never given again by the same manager. Hashing and comparing it costs what an
/// integer's does, where a ``DownloadTaskID`` hashes its three strings (a URL, for a plain
/// download) at every lookup.
struct TaskHandle: Hashable, Comparable, Sendable, CustomStringConvertible {
    let raw: Int

    init(_ raw: Int) { self.raw = raw }

    static func < (lhs: TaskHandle, rhs: TaskHandle) -> Bool { lhs.raw < rhs.raw }

    var description: String { "#\(raw)" }
}
