import Foundation
import Tessera
import TesseraEvents

/// How a run reports: a live board on a terminal, a line per state change otherwise, or JSON
/// lines. Every method may be called from any task; output is serialised.
package final class Display: Sendable {
    package enum Mode: Sendable {
        case live, lines, json, quiet
    }

    package let mode: Mode
    private let state = Locked(State())

    private struct State {
        /// The columns each line of the board on screen took, top to bottom.
        var drawn: [Int] = []
        /// The terminal's width when it was drawn.
        var drawnWidth = 0
        var finished: Set<DownloadTaskID> = []
        var finishedGroups: Set<String> = []
        /// Errors a run ended with, held until the task's next state: its line when it ends
        /// there (failed, invalid), a line of their own when it goes on (waiting to retry).
        var endingErrors: [DownloadTaskID: DownloadError] = [:]
    }

    package init(json: Bool, quiet: Bool) {
        if json {
            mode = .json
        } else if quiet {
            mode = .quiet
        } else {
            mode = isatty(STDOUT_FILENO) != 0 && ProcessInfo.processInfo.environment["TERM"] != "dumb" ? .live : .lines
        }
    }

    // MARK: Events

    func handle(_ event: DownloadEvent) {
        switch mode {
        case .json:
            if let object = JSONEvent.object(for: event) { emitJSON(object) }
        case .lines:
            if let line = Self.line(for: event) { write(line) }
        case .live:
            if case .taskStateChanged(let info, _) = event {
                let ending = state.withLock { $0.endingErrors.removeValue(forKey: info.id) }
                if info.state.isFinal {
                    permanent(Self.finishedLine(info))
                } else if let ending {
                    permanent("✗ \(info.title): \(ending.message)")
                }
            } else if case .groupUpdated(let group) = event, group.state == .completed || group.state == .failed {
                let first = state.withLock { $0.finishedGroups.insert(group.key).inserted }
                if first {
                    let mark = group.state == .completed ? "✓" : "✗"
                    permanent("\(mark) group \(group.title) — \(Self.count(group.childCount, "task")), \(ByteCount.format(group.rollUp.bytesDone))")
                }
            } else if case .notice(let notice) = event {
                permanent("! \(notice.message)")
            } else if case .taskError(let id, let error, let willRetry) = event, !willRetry {
                // (The task's state changes next: its final line tells the error, once.)
                state.withLock { $0.endingErrors[id] = error }
            }
        case .quiet:
            if case .taskError(let id, let error, false) = event { standardError("tessera: \(id): \(error.message)") }
        }
    }

    /// An input that could not become a task: always one line, on standard error (and in JSON).
    package func inputError(_ input: String, _ error: DownloadError) {
        if mode == .json {
            emitJSON(["type": "input_error", "input": input, "code": error.code.description, "message": error.message])
        }
        standardError("tessera: \(input): \(error.message)")
    }

    /// The live board: one line per running task and per group with running children, and a
    /// footer for the whole run. The terminal's width is read at every redraw.
    func redraw(tasks: [DownloadTaskInfo], groups: [DownloadGroupInfo]) {
        guard mode == .live else { return }
        var rows: [BoardRow] = []
        for group in groups where group.state == .downloading || group.state == .waiting || group.state == .recording {
            rows.append(Self.progressRow(
                title: "▸ group \(group.title) (\(Self.count(group.childCount, "task")))", done: group.rollUp.bytesDone,
                total: group.rollUp.bytesTotal, speed: group.rollUp.bytesPerSecond, eta: group.rollUp.eta, state: group.state.rawValue))
        }
        let running = tasks.filter { $0.state.isRunning || $0.state.isInterrupted }
        for task in running.prefix(20) {
            if let live = task.live, task.state == .downloading {
                rows.append(Self.liveRow(title: task.title, done: task.bytesDone, speed: task.bytesPerSecond, live: live))
                continue
            }
            rows.append(Self.progressRow(
                title: task.title, done: task.bytesDone, total: task.bytesTotal, speed: task.bytesPerSecond,
                eta: task.eta, state: task.state.description, segments: (task.segmentsDone, task.segmentsTotal),
                estimated: task.bytesTotalIsEstimate))
        }
        let width = TerminalText.terminalWidth()
        var lines = rows.map { Terminal.clean($0.render(width: width)) }
        lines.append(TerminalText.shortened(Terminal.clean(Self.footer(tasks, running: running)), to: max(1, width - 1), keepingEnd: false))
        state.withLock { state in
            var text = Self.clearBoard(&state, width: width)
            for line in lines { text += line + "\n" }
            state.drawn = lines.map(TerminalText.width)
            state.drawnWidth = width
            Terminal.writeRaw(text)
        }
    }

    /// The footer: the whole run at a glance (the counts, speed, bytes, ETA: what a narrow
    /// terminal cuts comes last).
    static func footer(_ tasks: [DownloadTaskInfo], running: [DownloadTaskInfo]) -> String {
        let waiting = tasks.filter { $0.state == .waiting }.count
        let finished = tasks.filter(\.state.isFinal).count
        let speed = running.reduce(0) { $0 + $1.bytesPerSecond }
        let done = tasks.map(\.bytesDone).saturatingSum()
        let totals = tasks.map(\.bytesTotal)
        var footer = "  \(finished) of \(tasks.count) done, \(running.count) running"
        if running.count > 20 { footer += " (\(running.count - 20) not shown)" }
        if waiting > 0 { footer += ", \(waiting) waiting" }
        footer += "  ⇣ \(ByteCount.speed(speed))  \(ByteCount.format(done))"
        if !totals.contains(nil) {
            let total = totals.map { $0 ?? 0 }.saturatingSum()
            footer += " / \(ByteCount.format(total))"
            if total > done, let eta = Duration.estimate(remaining: total - done, bytesPerSecond: speed) {
                footer += "  ETA \(ByteCount.duration(eta))"
            }
        }
        return footer
    }

    /// Moves the cursor to where the board starts and clears it (the rows its lines take now:
    /// a terminal that reflows wraps them when it narrows); the board is then forgotten.
    private static func clearBoard(_ state: inout State, width: Int) -> String {
        guard !state.drawn.isEmpty else { return "" }
        let rows = width == state.drawnWidth ? state.drawn.count : TerminalText.rows(state.drawn, columns: width)
        state.drawn = []
        return "\r\u{1B}[\(rows)A\u{1B}[J"
    }

    func summary(_ object: [String: Any], text: String) {
        switch mode {
        case .json: emitJSON(object)
        case .live, .lines: permanent(text)
        case .quiet: break
        }
    }

    // MARK: Output

    /// A line above the live board (or just a line).
    package func permanent(_ line: String) {
        state.withLock { state in
            var text = mode == .live ? Self.clearBoard(&state, width: TerminalText.terminalWidth()) : ""
            text += Terminal.cleanLines(line) + "\n"
            Terminal.writeRaw(text)
        }
    }

    func write(_ line: String) {
        state.withLock { _ in Terminal.outLines(line) }
    }

    func emitJSON(_ object: [String: Any]) {
        guard let data = try? Terminal.jsonData(object) else { return }
        state.withLock { _ in FileHandle.standardOutput.write(data + Data("\n".utf8)) }
    }

    func standardError(_ line: String) {
        Terminal.err(line)
    }

    // MARK: Lines

    static func progressRow(
        title: String, done: Int64, total: Int64?, speed: Double, eta: Duration?, state: String, segments: (Int, Int)? = nil,
        estimated: Bool = false
    ) -> BoardRow {
        let percent: String
        if let total, !estimated || segments == nil {
            percent = total > 0 ? String(format: "%5.1f%%", min(100, Double(done) / Double(total) * 100)) : "100.0%"
        } else if let (finished, count) = segments, count > 0 {
            // No byte total yet (HLS, a server that sends no length): count segments instead.
            percent = String(format: "%5.1f%%", Double(finished) / Double(count) * 100)
        } else {
            percent = "   -  "
        }
        // An estimated total (segment sizes still unknown) is marked as such.
        var amount = ByteCount.format(done) + (total.map { " / " + (estimated ? "~" : "") + ByteCount.format($0) } ?? "")
        if total == nil || estimated, let (finished, count) = segments, count > 1 { amount += " (\(finished)/\(count) seg)" }
        return BoardRow(
            percent: percent, amount: amount, rate: speed > 0 ? ByteCount.speed(speed) : "-",
            eta: eta.map { "ETA " + ByteCount.duration($0) } ?? "", title: title,
            status: state == "downloading" ? "" : " [\(state)]")
    }

    /// A live recording's row: `● REC`, the bytes and the media recorded, the speed, how many
    /// segments it is behind the live edge, and its gaps.
    static func liveRow(title: String, done: Int64, speed: Double, live: LiveRecordingInfo) -> BoardRow {
        var status = ""
        if live.gaps > 0 { status = " [\(count(live.gaps, "gap")), \(seconds(live.gapSeconds)) lost]" }
        return BoardRow(
            percent: " ● REC", amount: "\(ByteCount.format(done))  \(seconds(live.recordedSeconds)) rec", rate: speed > 0 ? ByteCount.speed(speed) : "-",
            eta: "\(live.segmentsBehindLiveEdge) behind", title: title, status: status)
    }

    /// A length of media: `45.0 s`, `12m05s`, `1h02m03s`.
    static func seconds(_ value: Double) -> String {
        guard value.isFinite, value >= 0 else { return "-" }
        if value < 60 { return String(format: "%.1f s", value) }
        let whole = Int(value.rounded(.down))
        let (hours, minutes, rest) = (whole / 3600, whole / 60 % 60, whole % 60)
        return hours > 0 ? String(format: "%dh%02dm%02ds", hours, minutes, rest) : String(format: "%dm%02ds", minutes, rest)
    }

    /// What a finished live recording says: `recorded 1m23s, ended: stream ended, 1 gap (4.0 s lost)`.
    static func liveSummary(_ live: LiveRecordingInfo) -> String {
        let ending: String =
            switch live.ending {
            case .streamEnded: "the stream ended"
            case .durationReached: "the duration was reached"
            case .stalled: "the stream stalled"
            case .stopped: "ended by request"
            case nil: "not ended"
            }
        var text = "recorded \(seconds(live.recordedSeconds)) (\(count(live.segmentsRecorded, "segment"))), \(ending)"
        if live.gaps > 0 { text += ", \(count(live.gaps, "gap")) (\(seconds(live.gapSeconds)) lost)" }
        return text
    }

    /// `count` and `noun`, in the plural when it is not 1.
    static func count(_ count: Int, _ noun: String) -> String {
        "\(count) \(noun)\(count == 1 ? "" : "s")"
    }

    static func finishedLine(_ info: DownloadTaskInfo) -> String {
        switch info.state {
        case .completed:
            return "✓ \(info.title) — \(ByteCount.format(info.bytesDone))" + (info.live.map { ", " + liveSummary($0) } ?? "")
        default:
            return "✗ \(info.title) — \(info.state)" + (info.error.map { ": \($0.message)" } ?? "")
        }
    }

    static func line(for event: DownloadEvent) -> String? {
        switch event {
        case .taskStateChanged(let info, _):
            // A live stream downloading is being recorded.
            var line = "\(info.live != nil && info.state == .downloading ? "recording" : info.state.description) \(info.id)"
            if info.state == .completed { line += " (\(ByteCount.format(info.bytesDone))" + (info.live.map { ", " + liveSummary($0) } ?? "") + ")" }
            if info.state == .failed || info.state == .invalid || info.state.isInterrupted, let error = info.error {
                line += ": \(error.message)"
            }
            return line
        case .taskError(let id, let error, let willRetry):
            return willRetry ? "retrying \(id): \(error.message)" : nil
        case .notice(let notice):
            return "notice: \(notice.message)"
        case .groupUpdated(let group) where group.state == .completed || group.state == .failed:
            return "group \(group.key) \(group.state) (\(Self.count(group.childCount, "task")), \(ByteCount.format(group.rollUp.bytesDone)))"
        default:
            return nil
        }
    }
}

/// The JSON lines of `--json` (the schema is in docs/json-events.md): `TesseraServer`'s
/// ``EventJSON``, which `tessera serve`'s `/events` sends too (with a few keys more).
enum JSONEvent {
    static func object(for event: DownloadEvent) -> [String: Any]? {
        EventJSON.commandLineObject(for: event).foundationObject as? [String: Any]
    }

    static func error(_ error: DownloadError) -> [String: Any] {
        EventJSON.error(error).foundationObject as? [String: Any] ?? [:]
    }

    static func live(_ live: LiveRecordingInfo) -> [String: Any] {
        EventJSON.live(live).foundationObject as? [String: Any] ?? [:]
    }
}

/// One line for any error: a `DownloadError`'s message, or the error's own description.
package func describe(_ error: any Error) -> String {
    if let error = error as? DownloadError { return error.message }
    return (error as? LocalizedError)?.errorDescription ?? "\(error)"
}
