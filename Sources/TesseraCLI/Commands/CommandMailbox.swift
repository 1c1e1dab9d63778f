import Foundation
import Tessera

/// Commands for the `tessera` that holds the state directory, as files in `<state>/commands`.
///
/// A command is delivered once or not at all: the holder claims a file by renaming it before it
/// reads it, and the process that left it takes it back (``withdraw(_:)``) by deleting it when
/// the holder ends first or does not take it in time. Whichever comes first wins; the other
/// finds no file. So a command is never told as sent when nobody took it, and never left behind
/// for a later run to apply long after its sender gave up on it.
struct CommandMailbox {
    struct Command: Codable {
        var action: String
        /// `pause`, `resume`, `remove`: the task as the user named it (an ID, an entity key or
        /// a unique piece of an ID), found among the running tessera's tasks.
        var id: String
        var deleteFiles: Bool?
        /// `add`: inputs as `get` takes them, with its plugin arguments, format and mode.
        var inputs: [String]?
        var pluginArguments: [String]?
        var format: String?
        var cacheOnly: Bool?
        /// Where the running tessera writes its ``Reply``.
        var reply: String?
        /// `resume`: every unfinished task (`id` is empty).
        var all: Bool?
    }

    /// What the running tessera did with a command: the tasks it applied it to (for an `add`,
    /// the tasks it follows now), and what it could not do (by input or task ID).
    struct Reply: Codable {
        var ids: [String]
        var errors: [[String: String]]
        var downloadRoot: String
        /// The running tessera is finishing (merging, pausing after Ctrl-C) and starts nothing
        /// more: the sender waits for it to end, then does the command itself.
        var waitForEnd: Bool?
    }

    /// How a command left in the mailbox ended.
    enum Delivery: Equatable {
        /// The running tessera took it.
        case taken
        /// The running tessera ended before it took it; taken back: nobody will apply it.
        case holderEnded
        /// The running tessera did not take it in time; taken back: nobody will apply it.
        case unanswered
    }

    /// How old a command may be and still be applied (ten minutes): its sender waits far less
    /// (``Handoff/replyTimeout``, ``deliveryTimeout``), so an older one was left by a process
    /// that was killed while it waited.
    static let staleAfter: TimeInterval = 600

    /// How long `pause`, `resume` and `remove` wait for the running tessera to take a command
    /// (it looks four times a second while it runs tasks). `TESSERA_TEST_COMMAND_TIMEOUT`
    /// (seconds) shortens it for the tests of a holder that never answers.
    static let deliveryTimeout: Duration = .seconds(
        ProcessInfo.processInfo.environment["TESSERA_TEST_COMMAND_TIMEOUT"].flatMap(Int.init) ?? 60)

    let stateDirectory: String
    let directory: String

    init(stateDirectory: String) {
        self.stateDirectory = stateDirectory
        directory = stateDirectory + "/commands"
    }

    /// Where the answer to a command is awaited: beside it, by a name of its own.
    func replyPath() -> String {
        directory + "/\(UUID().uuidString).reply"
    }

    /// Reads the answer at `path`, once it is there whole.
    static func reply(at path: String) -> Reply? {
        FileOperations.contents(path).flatMap { try? JSONDecoder().decode(Reply.self, from: Data($0)) }
    }

    /// Leaves a command; returns its file.
    func post(_ command: Command) throws -> String {
        if let problem = writableDirectoryProblem(directory) {
            throw DownloadError(.storeFailure, "cannot leave a command in \(directory): \(problem)")
        }
        // Named by the time it was left (then a UUID): taken in the order they were left.
        let microseconds = String(UInt64(max(0, Date().timeIntervalSince1970 * 1e6)))
        let path = directory + "/" + String(repeating: "0", count: max(0, 20 - microseconds.count)) + microseconds + "-\(UUID().uuidString).json"
        try Self.writeWhole(JSONEncoder().encode(command), to: path)
        return path
    }

    /// Takes back a command left at `path`: `true` when it was still waiting (nobody will
    /// apply it now), `false` when the running tessera had taken it.
    func withdraw(_ path: String) -> Bool {
        unlink(path) == 0
    }

    /// Waits until the running tessera takes the command left at `path`. When it ends first
    /// (the state directory's lock is free), `deadline` passes or `stopping()` (Ctrl-C here)
    /// says so, the command is taken back, unless it was taken in the meantime.
    func delivery(
        of path: String, until deadline: ContinuousClock.Instant, stopping: () -> Bool = { false }
    ) async throws -> Delivery {
        while true {
            if access(path, F_OK) != 0 { return .taken }
            let ended = !StateLock.isHeld(directory: stateDirectory)
            if ended || ContinuousClock.now >= deadline || stopping() {
                guard withdraw(path) else { return .taken }
                return ended ? .holderEnded : .unanswered
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Waits for the answer at `reply` to a command the running tessera took: `nil` when it
    /// ended without one (killed), gave none by `deadline`, or `stopping()` said so first.
    func answer(
        at reply: String, until deadline: ContinuousClock.Instant, stopping: () -> Bool = { false }
    ) async throws -> Reply? {
        while true {
            if let answer = Self.reply(at: reply) { return answer }
            // (Looked for once more after the end is seen: it may have answered, then ended.)
            if !StateLock.isHeld(directory: stateDirectory) || ContinuousClock.now >= deadline || stopping() {
                return Self.reply(at: reply)
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Waits (without a limit: a merge may take minutes) until the running tessera has ended,
    /// or `stopping()` (Ctrl-C here) says so.
    func holderEnd(stopping: () -> Bool = { false }) async throws {
        while StateLock.isHeld(directory: stateDirectory), !stopping() {
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Writes `data` at `path` whole: a reader sees nothing there, or all of it.
    static func writeWhole(_ data: Data, to path: String) throws {
        let temporary = path + ".tmp"
        try data.write(to: URL(fileURLWithPath: temporary))
        try FileManager.default.moveItem(atPath: temporary, toPath: path)
    }

    /// Takes (and deletes) the commands waiting, in the order they were left. Each is claimed by a rename
    /// before it is read: one its sender takes back at the same moment is either here or
    /// withdrawn, never both. A command older than ``staleAfter`` is dropped unapplied, and so
    /// are the leftovers of a sender or holder killed halfway.
    func take() -> [Command] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        var commands: [Command] = []
        let now = Date().timeIntervalSince1970
        for name in names.sorted() {
            let path = directory + "/" + name
            guard name.hasSuffix(".json") else {
                // (A `.reply` its sender was killed before it deleted, too.)
                if name.hasSuffix(".tmp") || name.hasSuffix(".taken") || name.hasSuffix(".reply"),
                   let age = Self.age(of: path, now: now), age > Self.staleAfter {
                    unlink(path)
                }
                continue
            }
            let claimed = path + ".taken"
            guard rename(path, claimed) == 0 else { continue }
            defer { unlink(claimed) }
            guard let age = Self.age(of: claimed, now: now), age <= Self.staleAfter,
                  let data = FileOperations.contents(claimed),
                  let command = try? JSONDecoder().decode(Command.self, from: Data(data))
            else { continue }
            commands.append(command)
        }
        return commands
    }

    /// Seconds since the file at `path` was last written (a rename keeps it).
    private static func age(of path: String, now: TimeInterval) -> TimeInterval? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return now - (TimeInterval(info.st_mtim.tv_sec) + TimeInterval(info.st_mtim.tv_nsec) / 1e9)
    }
}
