import ArgumentParser
import Foundation
import Tessera

/// What the task commands share: finding tasks by key and reaching a running `tessera`.
struct TaskSelection {
    /// The tasks `keys` name: a task ID (`type:key#variant`), an entity key, or a piece of an ID
    /// that only one task has.
    static func resolve(_ keys: [String], among known: [DownloadTaskID]) throws -> [DownloadTaskID] {
        var ids: [DownloadTaskID] = []
        for key in keys {
            let matches = matches(key, among: known)
            guard !matches.isEmpty else { throw DownloadError(.invalidState, "no task matches \"\(key)\" (see `tessera list`)") }
            guard matches.count == 1 else {
                throw DownloadError(.invalidState, "\"\(key)\" matches \(matches.count) tasks: \(matches.prefix(5).map(\.description).joined(separator: ", "))")
            }
            if !ids.contains(matches[0]) { ids.append(matches[0]) }
        }
        return ids
    }

    /// The tasks `key` names: those whose ID or entity key it is, else those whose ID holds it.
    static func matches(_ key: String, among known: [DownloadTaskID]) -> [DownloadTaskID] {
        let exact = known.filter { $0.description == key || $0.entityKey == key }
        return exact.isEmpty ? known.filter { $0.description.contains(key) } : exact
    }

    /// Opens a session when no other `tessera` holds the state directory; `nil` when one does.
    static func openUnlessBusy(_ settings: Session.Settings) async throws -> Session? {
        do {
            return try await Session.open(settings)
        } catch where StateLock.isBusy(error) {
            return nil
        }
    }

    /// Leaves a command per key (one for every unfinished task with `all`) for the running
    /// `tessera`, which finds the tasks among its own (those it added a moment ago too), and
    /// waits for it to take each. Returns the keys it did not take because it ended first:
    /// nobody will apply those, and the caller does, on the store it can open now. Throws when
    /// it did not take one within ``CommandMailbox/deliveryTimeout`` (that one is taken back:
    /// nothing happens to it), and exits with 1 when it refused one (a key that names no task)
    /// or took one and ended (killed) before it answered.
    static func post(
        _ action: String, _ keys: [String], all: Bool = false, state: StateOptions, deleteFiles: Bool = false
    ) async throws -> [String] {
        let mailbox = CommandMailbox(stateDirectory: state.directory)
        var posted: [(key: String, path: String, reply: String)] = []
        for key in all ? [""] : keys {
            let reply = mailbox.replyPath()
            let command = CommandMailbox.Command(action: action, id: key, deleteFiles: deleteFiles, reply: reply, all: all)
            posted.append((key, try mailbox.post(command), reply))
        }
        let deadline = ContinuousClock.now + CommandMailbox.deliveryTimeout
        var left: [String] = [], unanswered: [String] = [], failed = false, toldFinishing = false
        for (key, path, reply) in posted {
            defer { unlink(reply) }
            switch try await mailbox.delivery(of: path, until: deadline) {
            case .taken:
                // Applied (or refused, and why) and answered at once; a tessera killed after it
                // took the command gives no answer, and what it did, if anything, is in the store.
                guard let answer = try await mailbox.answer(at: reply, until: max(deadline, .now + .seconds(10))) else {
                    let ended = !StateLock.isHeld(directory: state.directory)
                    Terminal.err(
                        "tessera: the tessera running on \(state.directory) took \(action) of \(all ? "every unfinished task" : key) and "
                            + (ended ? "ended before it answered" : "has not answered") + "; see `tessera list`, and run the command again if it is not done")
                    failed = true
                    continue
                }
                if answer.waitForEnd == true {
                    // Finishing (merging): it starts nothing more; done here once it has ended.
                    if !toldFinishing {
                        toldFinishing = true
                        Terminal.err("tessera: the tessera running on \(state.directory) is finishing; \(action) waits for it to end, then runs here (Ctrl-C stops waiting)")
                    }
                    try await mailbox.holderEnd()
                    left.append(key)
                    continue
                }
                for error in answer.errors { Terminal.err("tessera: \(error["message"] ?? "refused")") }
                failed = failed || !answer.errors.isEmpty
                for id in answer.ids { Terminal.out("\(action) sent to the running tessera: \(id)") }
            case .holderEnded: left.append(key)
            case .unanswered: unanswered.append(all ? "every unfinished task" : key)
            }
        }
        guard unanswered.isEmpty else {
            throw DownloadError(
                .invalidState,
                "the tessera running on \(state.directory) did not take \(action) of \(unanswered.joined(separator: ", ")) "
                    + "within \(CommandMailbox.deliveryTimeout); nothing was done to \(unanswered.count == 1 ? "it" : "them")")
        }
        if failed { throw ExitCode(1) }
        return left
    }

    /// Opens the store when no other `tessera` holds it; otherwise sends the command to the one
    /// that does (``post(_:_:all:state:deleteFiles:)``). Returns the session and the keys left to
    /// do on it (the ones the running tessera did not take because it ended first), or `nil`
    /// when the running tessera took them all.
    static func openOrSend(
        _ action: String, _ keys: [String], all: Bool = false, settings: Session.Settings, state: StateOptions, deleteFiles: Bool = false
    ) async throws -> (session: Session, keys: [String])? {
        var keys = keys
        for _ in 0..<attempts {
            if let session = try await openUnlessBusy(settings) { return (session, keys) }
            keys = try await post(action, keys, all: all, state: state, deleteFiles: deleteFiles)
            if keys.isEmpty { return nil }
        }
        throw changedHands(state)
    }

    /// How often a command goes to the running `tessera` again when the one it went to ended
    /// first and another took the state directory before this process could.
    static let attempts = 3

    /// What is said when every attempt found another `tessera` that ended before it took the
    /// command.
    static func changedHands(_ state: StateOptions) -> DownloadError {
        DownloadError(.invalidState, "the state directory \(state.directory) changed hands \(attempts) times while the command waited; run it again")
    }
}

/// `tessera pause`.
struct PauseCommand: AsyncParsableCommand {
    static let configuration = CommandMain.subcommand(CommandConfiguration(
        commandName: "pause", abstract: "Pause tasks (in a running tessera too); `resume` or `get` continues them."))

    @Argument(help: "Task IDs, entity keys, or a piece of an ID (see `tessera list`).")
    var keys: [String]

    @OptionGroup var store: StoreOptions

    func run() async throws {
        try await TaskCommand.run(action: "pause", keys: keys, state: try store.state())
    }
}

/// `tessera resume`.
struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandMain.subcommand(CommandConfiguration(
        commandName: "resume", abstract: "Continue tasks from the store (all unfinished ones with --all) and follow them."))

    @Argument(help: "Task IDs, entity keys, or a piece of an ID (see `tessera list`).")
    var keys: [String] = []

    @Flag(help: "Every task that is not finished.")
    var all = false

    @OptionGroup var download: DownloadOptions
    @OptionGroup var network: NetworkOptions
    @OptionGroup var state: StateOptions
    @OptionGroup var output: DisplayOptions
    @OptionGroup var merge: MergeOptions

    func validate() throws {
        if keys.isEmpty && !all { throw ValidationError("name tasks to resume, or --all") }
    }

    func run() async throws {
        BatchScheduling.applyToProcess()
        let settings = Session.Settings(
            downloadRoot: download.root, jobs: download.jobs, segments: download.segments,
            connectionsPerFile: download.connectionsPerFile, network: network, state: state,
            outputTemplate: download.template, merging: merge.policy)
        // Through the running tessera when one holds the store; here when it ends first.
        let opened: (session: Session, keys: [String])?
        do {
            opened = try await TaskSelection.openOrSend("resume", keys, all: all, settings: settings, state: state)
        } catch let error as DownloadError {
            Terminal.err("tessera: \(error.message)")
            throw ExitCode(1)
        }
        guard let (session, keys) = opened else { return }
        let display = Display(json: output.json, quiet: output.quiet)
        do {
            try await session.manager.restore(resuming: false)
            // Subscribed after the restore: the events are this run's, not the store's history.
            let watch = CommandRun.Watch(manager: session.manager, display: display)
            let infos = await session.manager.checkAll()
            let ids = all ? infos.filter { !$0.state.isFinal }.map(\.id) : try TaskSelection.resolve(keys, among: infos.map(\.id))
            for id in ids { try await session.manager.resume(id) }
            let commandRun = CommandRun(session: session, display: display)
            let outcome = await commandRun.run(ids, watch: watch, inputErrors: 0)
            await commandRun.summarize(outcome)
            await session.close()
            if outcome.exitCode != 0 { throw ExitCode(outcome.exitCode) }
        } catch let error as DownloadError {
            display.standardError("tessera: \(error.message)")
            await session.close()
            throw ExitCode(1)
        }
    }
}

/// `tessera remove`.
struct RemoveCommand: AsyncParsableCommand {
    static let configuration = CommandMain.subcommand(CommandConfiguration(
        commandName: "remove", abstract: "Remove tasks and their partial files (and their outputs with --delete-files)."))

    @Argument(help: "Task IDs, entity keys, or a piece of an ID (see `tessera list`).")
    var keys: [String]

    @Flag(name: .customLong("delete-files"), help: "Delete the finished outputs too.")
    var deleteFiles = false

    @OptionGroup var store: StoreOptions

    func run() async throws {
        try await TaskCommand.run(action: "remove", keys: keys, state: try store.state(), deleteFiles: deleteFiles)
    }
}

/// `pause` and `remove`: on the store, or through the running `tessera`.
enum TaskCommand {
    static func run(action: String, keys: [String], state: StateOptions, deleteFiles: Bool = false) async throws {
        do {
            let settings = Session.Settings(network: try NetworkOptions.parse([]), state: state)
            // Through the running tessera when one holds the store; here when it ends first.
            guard let (session, keys) = try await TaskSelection.openOrSend(
                action, keys, settings: settings, state: state, deleteFiles: deleteFiles)
            else { return }
            try await apply(action, keys, on: session, deleteFiles: deleteFiles)
        } catch let error as DownloadError {
            Terminal.err("tessera: \(error.message)")
            throw ExitCode(1)
        }
    }

    /// `pause` or `remove` on a store this process holds.
    private static func apply(_ action: String, _ keys: [String], on session: Session, deleteFiles: Bool) async throws {
        do {
            try await session.manager.restore(resuming: false)
            let ids = try TaskSelection.resolve(keys, among: await session.manager.checkAll().map(\.id))
            for id in ids {
                if action == "pause" {
                    await session.manager.stop(id)
                    Terminal.out("paused \(id)")
                } else {
                    await session.manager.remove(id, deletingFiles: deleteFiles)
                    Terminal.out("removed \(id)")
                }
            }
            // Let a removal delete its files before the process ends.
            try await Task.sleep(for: .milliseconds(200))
        } catch {
            await session.close()
            throw error
        }
        await session.close()
    }
}

/// `tessera plugins`.
struct PluginsCommand: ParsableCommand {
    static let configuration = CommandMain.subcommand(CommandConfiguration(commandName: "plugins", abstract: "List the entity plugins and what they accept."))

    @Flag(help: "One JSON document.")
    var json = false

    func run() throws {
        let registry = makeRegistry()
        let rows = registry.matchers.map { matcher -> [String: Any] in
            ["plugin": matcher.plugin, "summary": matcher.summary, "priority": matcher.priority, "accepts": matcher.rules.map(describe)]
        }
        if json {
            try Terminal.json(["plugins": rows, "entityTypes": registry.entityTypeNames], pretty: true)
            return
        }
        for matcher in registry.matchers {
            Terminal.out("\(matcher.plugin.padding(toLength: 10, withPad: " ", startingAt: 0)) \(matcher.summary)")
            Terminal.out("           accepts: \(matcher.rules.map(describe).joined(separator: "; "))")
        }
    }

    func describe(_ rule: EntityMatcher.Rule) -> String {
        switch rule {
        case .scheme(let scheme): "\(scheme):KEY"
        case .urlPattern(let pattern): "URLs matching \(pattern)"
        case .pathExtensions(let extensions): "URLs whose path ends in \(extensions.map { "." + $0 }.joined(separator: " or "))"
        case .contentType(let types): "Content-Type \(types.joined(separator: ", "))"
        case .anyURL: "any http(s) URL"
        }
    }
}
