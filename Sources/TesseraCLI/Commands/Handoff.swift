import ArgumentParser
import Foundation
import Tessera

/// `get` (or `cache`) while another `tessera` holds the state directory: the inputs go to the
/// running one through the command mailbox (it resolves and starts them, as its own), and this
/// process follows their tasks in the store until each has settled, then exits as `get` would
/// have (0 all completed, 1 a failure, 7 paused or waiting, 130 Ctrl-C here).
struct Handoff {
    let inputs: [String]
    let pluginArguments: [String]
    let format: String?
    let cacheOnly: Bool
    let state: StateOptions
    let downloadRoot: String
    let display: Display

    /// How long the running tessera may take to take the inputs (it looks for commands four
    /// times a second, and resolves each input before it answers).
    static let replyTimeout: Duration = .seconds(120)

    /// `nil` when the running tessera ended before it took the inputs: nobody will, and the
    /// caller runs them itself (it can open the store now); otherwise the exit code.
    func run() async throws -> Int32? {
        let mailbox = CommandMailbox(stateDirectory: state.directory)
        let reply = mailbox.replyPath()
        defer { try? FileManager.default.removeItem(atPath: reply) }
        let posted = try mailbox.post(.init(
            action: "add", id: "", inputs: inputs, pluginArguments: pluginArguments, format: format, cacheOnly: cacheOnly,
            reply: reply))
        let interrupt = InterruptSignal.shared
        interrupt.install()
        let deadline = ContinuousClock.now + Self.replyTimeout
        let stopping = { interrupt.fired }
        switch try await mailbox.delivery(of: posted, until: deadline, stopping: stopping) {
        case .taken: break
        case .holderEnded: return interrupt.fired ? 130 : nil
        case .unanswered:
            if interrupt.fired { return 130 }
            display.standardError("tessera: the tessera running on \(state.directory) did not take the inputs within \(Self.replyTimeout); nothing was added")
            return 1
        }
        guard let answer = try await mailbox.answer(at: reply, until: deadline, stopping: stopping) else {
            if interrupt.fired { return 130 }
            // Taken, but not answered: what became of the inputs is in the running tessera's
            // store; they are not run a second time here.
            let ended = !StateLock.isHeld(directory: state.directory)
            display.standardError(
                "tessera: the tessera running on \(state.directory) took the inputs and "
                    + (ended ? "ended before it answered" : "did not answer within \(Self.replyTimeout)") + "; see `tessera list`")
            return 1
        }
        if answer.waitForEnd == true {
            // Finishing (merging): it starts nothing more; the inputs run here once it has ended.
            say("the tessera running on \(state.directory) is finishing; the inputs run here once it has ended")
            try await mailbox.holderEnd(stopping: stopping)
            return interrupt.fired ? 130 : nil
        }
        for error in answer.errors {
            display.standardError("tessera: \(error["input"] ?? "?"): \(error["message"] ?? "?")")
        }
        let ids = answer.ids.compactMap(DownloadTaskID.init)
        // Nothing taken (every input refused, or none stood for a download): nothing to follow.
        if ids.isEmpty { return answer.errors.isEmpty ? 0 : 1 }
        say("handed \(Display.count(ids.count, "task")) to the tessera running on \(state.directory)"
            + (answer.downloadRoot == downloadRoot ? "" : " (it downloads into \(answer.downloadRoot))"))
        let settled = try await follow(ids, interrupt: interrupt)
        if interrupt.fired { return 130 }
        let failed = settled.contains { $0.state == .failed || $0.state == .invalid }
        let completed = settled.filter { $0.state == .completed }.count
        say("\(completed) of \(ids.count) completed")
        if failed || !answer.errors.isEmpty || settled.count < ids.count { return 1 }
        return completed == ids.count ? 0 : 7
    }

    /// A line of what happens (not with `--quiet`; `--json` gets it as a `handoff` object).
    private func say(_ line: String) {
        switch display.mode {
        case .quiet: break
        case .json: display.emitJSON(["type": "handoff", "message": line])
        case .lines, .live: display.write(line)
        }
    }

    /// Reads the store until every task has settled (or is gone, or the running tessera ended),
    /// writing a line per state change.
    private func follow(_ ids: [DownloadTaskID], interrupt: InterruptSignal) async throws -> [TaskRecord] {
        let store = try SQLiteDownloadStore(path: state.directory + "/tessera.sqlite")
        var last: [DownloadTaskID: DownloadTaskState] = [:]
        while !interrupt.fired {
            let records = try await store.loadAll().map(\.task).filter { ids.contains($0.id) }
            for record in records where last[record.id] != record.state {
                last[record.id] = record.state
                say("\(record.state) \(record.id)")
            }
            let running = StateLock.isHeld(directory: state.directory)
            if records.allSatisfy({ $0.state.isFinal || $0.state == .paused }) || !running {
                return records
            }
            try await Task.sleep(for: .milliseconds(250))
        }
        return []
    }
}
