import Foundation

/// Which task holds each output path, so two tasks never write the same file: shared by a
/// manager and its runs (a lock, no actor hop), so a run names the file it just finished itself.
///
/// A task claims a path when its manifest names its outputs and again when a response names
/// one (`Content-Disposition`, the URL after redirects); the first of `name`, `name.1`,
/// `name.2`, … that no other task holds wins (``claimFirstFree(_:for:releasing:taken:path:)``).
final class OutputClaims: Sendable {
    /// By handle, not by ``DownloadTaskID``: 8 bytes a path, not three strings' 48 (a list of
    /// 100,000 files claims 100,000 paths).
    private let holders = Locked<[String: TaskHandle]>([:])

    /// The task holding `path`, if any.
    func holder(of path: String) -> TaskHandle? {
        holders.withLock { $0[path] }
    }

    /// `path` is `id`'s (whoever held it before).
    func claim(_ path: String, for id: TaskHandle) {
        holders.withLock { $0[path] = id }
    }

    /// `id` lets go of `path` (if it holds it).
    func release(_ path: String, of id: TaskHandle) {
        holders.withLock { holders in
            if holders[path] == id { holders[path] = nil }
        }
    }

    /// `id` lets go of every path it holds (the task is removed).
    func releaseAll(of id: TaskHandle) {
        holders.withLock { holders in
            holders = holders.filter { $0.value != id }
        }
    }

    /// Claims for `id` the first of `original`, `original.1`, `original.2`, … whose path (as
    /// `path` makes it) no other task holds and that is not in `taken`, letting go of `current`
    /// first (the path the output had). Returns the name and its path.
    func claimFirstFree(
        _ original: String, for id: TaskHandle, releasing current: String?, taken: Set<String>,
        path: (String) -> String
    ) -> (name: String, path: String) {
        holders.withLock { holders in
            var candidate = original
            var candidatePath = path(candidate)
            // The name held already (a server naming the file as its URL does): kept as it is.
            if let current, candidatePath == current, holders[current] == id, !taken.contains(current) {
                return (candidate, candidatePath)
            }
            if let current, holders[current] == id { holders[current] = nil }
            var number = 0
            while true {
                if holders[candidatePath] == nil || holders[candidatePath] == id, !taken.contains(candidatePath) {
                    holders[candidatePath] = id
                    return (candidate, candidatePath)
                }
                number += 1
                candidate = Self.numbered(original, number)
                candidatePath = path(candidate)
            }
        }
    }

    /// `name.ext` → `name.1.ext` (in the last path component, shortened to leave room for the
    /// number when it must be).
    static func numbered(_ name: String, _ number: Int) -> String {
        let slash = name.lastIndex(of: "/").map { name.index(after: $0) } ?? name.startIndex
        let directory = name[..<slash]
        let file = SafePath.fitted(String(name[slash...]), reserving: ".\(number)".utf8.count)
        if let dot = file.lastIndex(of: "."), dot != file.startIndex {
            return directory + file[..<dot] + ".\(number)" + file[dot...]
        }
        return directory + file + ".\(number)"
    }
}
