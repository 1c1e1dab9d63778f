import Foundation
import Synchronization
import Tessera
import TesseraTesting

/// One file of the demo: where it lives on the origin and what goes wrong with it.
struct DemoFile: Sendable {
    var name: String
    var path: String
    var size: Int64
    var story: String

    static func catalogue(on origin: LoopbackOrigin) -> [DemoFile] {
        let files = [
            DemoFile(name: "small.bin", path: "/bytes/65536/small.bin", size: 65_536, story: "plain"),
            DemoFile(name: "large.bin", path: "/bytes/67108864/large.bin", size: 67_108_864, story: "plain, 64 MiB"),
            DemoFile(name: "dropped.bin", path: "/bytes/33554432/dropped.bin", size: 33_554_432,
                     story: "connection drops at 12 MiB, resumed with Range + If-Range"),
            DemoFile(name: "busy.bin", path: "/bytes/4194304/busy.bin", size: 4_194_304,
                     story: "503 + Retry-After: 1 first, then served"),
            DemoFile(name: "changed.bin", path: "/bytes/16777216/changed.bin", size: 16_777_216,
                     story: "drops at 5 MiB, then changes: restarted, never spliced"),
            DemoFile(name: "slow.bin", path: "/bytes/6291456/slow.bin", size: 6_291_456,
                     story: "throttled to 3 MiB/s by the origin"),
        ]
        origin.inject(.dropConnection(afterBytes: 12 << 20), at: files[2].path, times: 1)
        origin.inject(.status(503, retryAfter: "1"), at: files[3].path, times: 1)
        origin.inject(.dropConnection(afterBytes: 5 << 20), at: files[4].path, times: 1)
        origin.inject(.throttle(bytesPerSecond: 3 << 20), at: files[5].path)
        return files
    }

    /// Downloads with a small retry loop (the task manager will own this policy).
    func download(with engine: CurlEngine, into directory: String, origin: LoopbackOrigin, board: ProgressBoard) async -> DemoOutcome {
        let destination = (directory as NSString).appendingPathComponent(name)
        let started = ContinuousClock.now
        var checkpoint: TransferCheckpoint?
        var notes: [String] = []
        for attempt in 1...5 {
            do {
                let result = try await engine.transfer(.download(origin.url(path), to: destination, resume: checkpoint)) { progress in
                    board.update(name, written: progress.bytesWritten)
                }
                board.update(name, written: result.bytesWritten, state: "done")
                if result.resumedFrom > 0 { notes.append("resumed at \(Format.bytes(result.resumedFrom))") }
                if result.restarted { notes.append("restarted: content changed") }
                let verified = await origin.content(at: path).verifyFile(atPath: destination, size: size)
                return DemoOutcome(name: name, story: story, bytes: result.bytesWritten, elapsed: ContinuousClock.now - started,
                                   attempts: attempt, notes: notes, verified: verified)
            } catch let error as DownloadError {
                notes.append("attempt \(attempt): \(error.code)")
                checkpoint = error.checkpoint
                board.update(name, written: checkpoint?.bytesWritten ?? 0, state: "retrying")
                if name == "changed.bin", attempt == 1 { origin.changeContent(at: path) }
                let wait = error.retryAfter ?? .milliseconds(200)
                try? await Task.sleep(for: wait)
            } catch {
                notes.append("\(error)")
                break
            }
        }
        board.update(name, written: 0, state: "failed")
        return DemoOutcome(name: name, story: story, bytes: 0, elapsed: ContinuousClock.now - started,
                           attempts: 5, notes: notes, verified: false)
    }
}

struct DemoOutcome: Sendable {
    var name: String
    var story: String
    var bytes: Int64
    var elapsed: Duration
    var attempts: Int
    var notes: [String]
    var verified: Bool

    static func table(_ outcomes: [DemoOutcome]) -> String {
        var rows = [["file", "bytes", "time", "speed", "attempts", "verified", "what happened"]]
        for outcome in outcomes {
            let seconds = max(0.001, Double(outcome.elapsed.components.seconds) + Double(outcome.elapsed.components.attoseconds) / 1e18)
            rows.append([
                outcome.name, Format.bytes(outcome.bytes), String(format: "%.2f s", seconds),
                Format.bytes(Int64(Double(outcome.bytes) / seconds)) + "/s", "\(outcome.attempts)",
                outcome.verified ? "yes" : "NO", ([outcome.story] + outcome.notes).joined(separator: "; "),
            ])
        }
        let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            let cells = zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }
            return String(cells.joined(separator: "  ").reversed().drop(while: { $0 == " " }).reversed())
        }.joined(separator: "\n")
    }
}

/// Progress of every file, drawn as one line per file (redrawn in place on a terminal).
final class ProgressBoard: Sendable {
    private struct Line {
        var written: Int64 = 0
        var size: Int64
        var state = "downloading"
    }

    private let order: [String]
    private let lines: Mutex<[String: Line]>
    private let drawn = Mutex(0)
    private let isTerminal = isatty(STDOUT_FILENO) != 0

    init(files: [DemoFile]) {
        order = files.map(\.name)
        lines = Mutex(Dictionary(uniqueKeysWithValues: files.map { ($0.name, Line(size: $0.size)) }))
    }

    func update(_ name: String, written: Int64, state: String? = nil) {
        let changed = lines.withLock { lines -> String? in
            lines[name]?.written = written
            guard let state, lines[name]?.state != state else { return nil }
            lines[name]?.state = state
            return state
        }
        if let changed, !isTerminal { print("\(name): \(changed) (\(Format.bytes(written)))") }
    }

    func render(final: Bool = false) {
        guard isTerminal else { return }
        let snapshot = lines.withLock { $0 }
        var text = drawn.withLock { count in count > 0 ? "\u{1B}[\(count)A" : "" }
        for name in order {
            guard let line = snapshot[name] else { continue }
            let fraction = line.size > 0 ? Double(line.written) / Double(line.size) : 1
            let bar = String(repeating: "#", count: Int(fraction * 24)).padding(toLength: 24, withPad: ".", startingAt: 0)
            let percent = String(format: "%5.1f%%", fraction * 100)
            text += "\u{1B}[2K  \(name.padding(toLength: 12, withPad: " ", startingAt: 0)) [\(bar)] \(percent)  "
                + "\(Format.bytes(line.written)) / \(Format.bytes(line.size))  \(line.state)\n"
        }
        drawn.withLock { $0 = order.count }
        print(text, terminator: "")
        fflush(nil)
    }
}

enum Format {
    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }
}
