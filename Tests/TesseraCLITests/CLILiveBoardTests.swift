import Foundation
import Testing
import Tessera
import TesseraTesting

/// The live board in a real terminal: `tessera get` inside tmux, read back with
/// `capture-pane -J` (wrapped lines joined), at 120 and 60 columns and across a resize.
@Suite(.timeLimit(.minutes(3))) struct CLILiveBoardTests {
    /// A tmux server of its own (its own socket), killed at the end.
    struct Tmux {
        let socket = "tessera-test-\(UUID().uuidString.prefix(8))"

        @discardableResult
        func run(_ arguments: [String]) throws -> String {
            // Output to a file, not a pipe: the tmux server the first command forks keeps the
            // client's descriptors, so a pipe would not reach its end while the server runs.
            let output = NSTemporaryDirectory() + "/tmux-\(UUID().uuidString)"
            let file = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard file >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            defer { try? FileManager.default.removeItem(atPath: output) }
            do {
                defer { close(file) }
                let process = try SpawnedProcess(
                    "/usr/bin/env", ["tmux", "-L", socket] + arguments, output: .descriptor(file), error: .null)
                process.waitUntilExit()
            }
            return fileText(output)
        }

        /// Starts the server with its session (the client exits once the server it forks runs).
        func startSession(_ arguments: [String]) throws {
            let process = try SpawnedProcess(
                "/usr/bin/env", ["tmux", "-L", socket, "new-session", "-d"] + arguments, output: .null, error: .null)
            process.waitUntilExit()
        }

        /// The pane's lines, wrapped ones joined, trailing blank lines dropped.
        func capture() throws -> [String] {
            var lines = try run(["capture-pane", "-p", "-J", "-t", "board"]).components(separatedBy: "\n")
            while let last = lines.last, last.trimmingCharacters(in: .whitespaces).isEmpty { lines.removeLast() }
            return lines
        }

        func kill() { _ = try? run(["kill-server"]) }

        /// Reads the pane until `condition` holds of its lines (or `timeout` passes): whether it
        /// did, and the lines read last.
        func pane(within timeout: Duration, until condition: ([String]) -> Bool) async -> (met: Bool, lines: [String]) {
            var lines: [String] = []
            let met = await eventually(within: timeout) {
                lines = (try? capture()) ?? []
                return condition(lines)
            }
            return (met, lines)
        }

        /// Starts `tessera ARGUMENTS` (with `cli`'s standard options) in the session "board", 120
        /// columns by 30 lines, as a terminal of its own; its exit status is printed as `EXIT N`.
        /// (Without LeakSanitizer, as every program a test starts: see `childEnvironment`.)
        func startTessera(_ cli: CLI, _ arguments: [String]) throws {
            let command = ([CLI.executable.path] + cli.standard(arguments))
                .map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
            try startSession([
                "-s", "board", "-x", "120", "-y", "30",
                "env TERM=xterm-256color LSAN_OPTIONS=detect_leaks=0 \(command); echo EXIT $?; sleep 60",
            ])
        }
    }

    static var hasTmux: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux") || FileManager.default.isExecutableFile(atPath: "/usr/local/bin/tmux")
    }

    /// Columns a line takes (the test's own count: two for the wide characters the board may show).
    static func columns(_ line: String) -> Int {
        line.unicodeScalars.reduce(0) { total, scalar in
            total + ((0x1100...0x115F).contains(scalar.value) || (0x2E80...0xA4CF).contains(scalar.value)
                || (0xAC00...0xD7A3).contains(scalar.value) || (0xFF00...0xFF60).contains(scalar.value) ? 2 : 1)
        }
    }

    @Test(.enabled(if: hasTmux)) func theBoardFitsTheTerminalAndFollowsAResize() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let tmux = Tmux()
        defer { tmux.kill() }
        try await withLoopbackOrigin { origin in
            // Two files that take a while, one with a long name that cannot fit 60 columns.
            let long = "/bytes/4000000/a-rather-long-file-name-that-says-a-lot-about-what-it-holds-2026.iso"
            let short = "/bytes/4000000/short.bin"
            origin.inject(.throttle(bytesPerSecond: 250_000), at: long)
            origin.inject(.throttle(bytesPerSecond: 250_000), at: short)
            try tmux.startTessera(cli, ["get", origin.url(long).absoluteString, origin.url(short).absoluteString])

            // At 120 columns: one row per file, the footer, nothing wider than the terminal.
            var (drawn, lines) = await tmux.pane(within: .seconds(30)) { lines in
                lines.contains { $0.contains("ETA") && $0.contains("short.bin") } && lines.contains { $0.contains("done") }
            }
            #expect(drawn, "\(lines)")
            #expect(lines.allSatisfy { Self.columns($0) < 120 }, "\(lines)")
            #expect(lines.filter { $0.contains("short.bin") }.count == 1, "\(lines)")
            #expect(lines.contains { $0.contains("a-rather-long-file-name") && $0.contains("2026.iso") }, "the whole name fits: \(lines)")

            // At 60 columns: the board is redrawn at the new width, once (no pile of old boards),
            // the long name shortened in its middle, and every line still one row.
            try tmux.run(["resize-window", "-t", "board", "-x", "60", "-y", "30"])
            let narrowed: Bool
            (narrowed, lines) = await tmux.pane(within: .seconds(10)) { lines in
                let rows = lines.filter { $0.contains("short.bin") || $0.contains("…") || $0.contains("done") }
                return !rows.isEmpty && rows.allSatisfy { Self.columns($0) < 60 }
            }
            #expect(narrowed, "\(lines)")
            // Over the next redraws (four a second): still one row per file and one footer,
            // nothing wider than the terminal.
            let steady = await consistently(for: .seconds(1.5), every: .milliseconds(100)) {
                lines = (try? tmux.capture()) ?? []
                return lines.filter { $0.contains("short.bin") }.count == 1
                    && lines.filter { $0.contains("done") && $0.contains("running") }.count == 1
                    && lines.allSatisfy { Self.columns($0) < 60 }
            }
            #expect(steady, "\(lines)")
            let longRow = lines.first { $0.contains("a-rather") || $0.contains("2026.iso") }
            #expect(longRow.map { $0.contains("…") } == true, "the long name is shortened in the middle: \(lines)")
            #expect(lines.contains { $0.contains("%") }, "the percent stays: \(lines)")
        }
    }

    /// A file that fails is told once above the board, by its name (then once in the summary),
    /// not a second time by its task's identity.
    @Test(.enabled(if: hasTmux)) func aFailedFileIsToldOnceAboveTheBoardByItsName() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let tmux = Tmux()
        defer { tmux.kill() }
        try await withLoopbackOrigin { origin in
            let arguments = ["get", origin.url("/bytes/1000/good.bin").absoluteString, origin.url("/missing.bin").absoluteString]
            try tmux.startTessera(cli, arguments)
            let (ended, lines) = await tmux.pane(within: .seconds(30)) { $0.contains { $0.hasPrefix("EXIT") } }
            #expect(ended, "\(lines)")
            #expect(lines.contains("EXIT 1"), "\(lines)")
            // (The status with its reason: the temporary directory's random name, on the summary's
            // path line, may hold "404" too.)
            let told = lines.filter { $0.contains("404 Not Found") }
            #expect(told.count == 2, "once as it fails, once in the summary: \(lines)")
            #expect(told.first?.hasPrefix("✗ missing.bin") == true, "\(lines)")
            #expect(!lines.contains { $0.contains("direct:") }, "\(lines)")
        }
    }

    @Test(.enabled(if: hasTmux)) func aRecordingShowsWhatItRecordedHowFarBehindAndItsGaps() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let tmux = Tmux()
        defer { tmux.kill() }
        try await withLoopbackOrigin { origin in
            // A live stream of one-second segments (generated bytes: --no-merge), a window of three.
            var options = LiveStreamFixture.Options()
            options.window = 3
            options.ends = false
            let stream = LiveStreamFixture(LiveMedia.generated(segments: 120, bytesPerSegment: 50_000, segmentDuration: 1), options: options)
            let url = stream.install(on: origin, at: "/tv/")
            try tmux.startTessera(cli, ["get", url.absoluteString])
            var (recording, lines) = await tmux.pane(within: .seconds(30)) { lines in
                lines.contains { $0.contains("● REC") && $0.contains(" rec") && $0.contains("behind") && $0.contains("muxed") }
            }
            #expect(recording, "\(lines)")
            // The playlist stays away for five seconds: what left the window meanwhile is a gap.
            origin.inject(.stall(.seconds(5), afterBytes: nil), at: "/tv/muxed.m3u8", times: 1)
            let gapped: Bool
            (gapped, lines) = await tmux.pane(within: .seconds(30)) { lines in
                lines.contains { $0.contains("● REC") && $0.contains("1 gap,") && $0.contains("lost]") }
            }
            #expect(gapped, "\(lines)")
            #expect(lines.allSatisfy { Self.columns($0) < 120 }, "\(lines)")
            #expect(!lines.contains { $0.contains("%") }, "a recording has no percent: \(lines)")
        }
    }
}
