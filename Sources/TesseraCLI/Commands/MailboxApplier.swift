import Foundation
import Tessera

/// What the `tessera` holding a state directory does with the commands other processes leave in
/// its mailbox (``CommandMailbox``): `pause`, `resume`, `remove` and a second `get`'s inputs.
/// `get`, `cache` and `resume` apply them while their run lasts, and `tessera serve` for as
/// long as it serves. Every command is answered (``CommandMailbox/Reply``), so its sender says
/// what became of it.
package struct MailboxApplier: Sendable {
    let session: Session
    /// Why this process takes no commands (a fleet worker: its tasks are the fleet's); each is
    /// answered with it. `nil`: they are applied.
    let refusal: String?
    /// This process is finishing (a `get` merging, or pausing after Ctrl-C) and starts nothing
    /// more: each command is answered with ``CommandMailbox/Reply/waitForEnd``, and its sender
    /// does it itself once this process has ended.
    let deferring: Bool
    /// An input of a handed-over `get` that could not be used, as this process tells it too.
    let inputError: @Sendable (String, DownloadError) -> Void

    package init(
        session: Session, refusal: String? = nil, deferring: Bool = false,
        inputError: @escaping @Sendable (String, DownloadError) -> Void = { _, _ in }
    ) {
        self.session = session
        self.refusal = refusal
        self.deferring = deferring
        self.inputError = inputError
    }

    /// Applies the commands waiting and answers each; returns the tasks they started or resumed.
    package func applyWaiting() async -> [DownloadTaskID] {
        var started: [DownloadTaskID] = []
        for command in CommandMailbox(stateDirectory: session.stateDirectory).take() {
            for id in await apply(command) where !started.contains(id) { started.append(id) }
        }
        return started
    }

    /// Takes the mailbox's commands four times a second until the calling task is cancelled.
    package func serve() async {
        while !Task.isCancelled {
            _ = await applyWaiting()
            try? await Task.sleep(for: .milliseconds(250))
        }
    }

    /// Applies one command and answers it; returns the tasks it started or resumed.
    func apply(_ command: CommandMailbox.Command) async -> [DownloadTaskID] {
        if deferring {
            answer(command, ids: [], errors: [], waitForEnd: true)
            return []
        }
        if let refusal {
            let subjects = command.action == "add" ? command.inputs ?? [] : [command.id]
            answer(command, ids: [], errors: subjects.map { ["input": $0, "message": refusal] })
            return []
        }
        if command.action == "add" { return await add(command) }
        guard ["pause", "resume", "remove"].contains(command.action) else {
            answer(command, ids: [], errors: [["input": command.id, "message": "this tessera does not know the command \"\(command.action)\""]])
            return []
        }
        // Found among this process's tasks, the ones added a moment ago (not in the store yet) too.
        let known = await session.manager.checkAll()
        let ids: [DownloadTaskID]
        do {
            ids = command.all == true
                ? known.filter { !$0.state.isFinal }.map(\.id) : try TaskSelection.resolve([command.id], among: known.map(\.id))
        } catch {
            answer(command, ids: [], errors: [["input": command.id, "message": (error as? DownloadError)?.message ?? "\(error)"]])
            return []
        }
        var started: [DownloadTaskID] = []
        for id in ids {
            switch command.action {
            case "pause":
                await session.manager.stop(id)
            case "resume":
                if (try? await session.manager.resume(id)) != nil { started.append(id) }
            default:
                await session.manager.remove(id, deletingFiles: command.deleteFiles ?? false)
            }
        }
        // Answered once the store says so: what the sender runs next (`tessera list`) sees it.
        await session.manager.flushStore()
        answer(command, ids: ids, errors: [])
        return started
    }

    /// Another `get` on this state directory handed its inputs over: they become tasks of this
    /// process, and the other process hears which (it follows them in the store).
    private func add(_ command: CommandMailbox.Command) async -> [DownloadTaskID] {
        var arguments = PluginArguments()
        var errors: [[String: String]] = []
        for text in command.pluginArguments ?? [] {
            do { try arguments.add(text) } catch { errors.append(["input": text, "message": error.message]) }
        }
        let format = command.format.flatMap { try? FormatSelector($0) }
        let resolver = InputResolver(registry: session.registry, context: session.resolveContext, arguments: arguments, format: format)
        var ids: [DownloadTaskID] = []
        for text in command.inputs ?? [] {
            do {
                for entity in try await resolver.entities(for: text) {
                    let info = command.cacheOnly == true
                        ? try await session.manager.startCache(entity) : try await session.manager.start(entity)
                    if !ids.contains(info.id) { ids.append(info.id) }
                }
            } catch {
                errors.append(["input": text, "message": error.message])
                inputError(text, error)
            }
        }
        await session.manager.flushStore()
        answer(command, ids: ids, errors: errors)
        return ids
    }

    /// Writes the answer where the sender waits for it (whole, by a rename).
    private func answer(_ command: CommandMailbox.Command, ids: [DownloadTaskID], errors: [[String: String]], waitForEnd: Bool? = nil) {
        guard let reply = command.reply else { return }
        let answer = CommandMailbox.Reply(ids: ids.map(\.description), errors: errors, downloadRoot: session.downloadRoot, waitForEnd: waitForEnd)
        guard let data = try? JSONEncoder().encode(answer) else { return }
        try? CommandMailbox.writeWhole(data, to: reply)
    }
}
