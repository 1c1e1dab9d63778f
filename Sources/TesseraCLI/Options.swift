import ArgumentParser
import Foundation
import Logging
import Tessera

/// What to download: inputs on the command line and in a file.
package struct InputOptions: ParsableArguments {
    /// The defaults (argument-parser fills the options in).
    package init() {}

    @Argument(help: "URLs (plain files, .mpd, .m3u8, .meta4/.metalink) or PLUGIN:KEY (playurl:1001).")
    var inputs: [String] = []

    @Option(name: [.customShort("i"), .customLong("input-file")], help: ArgumentHelp("Read inputs from a file, one per line ('#' starts a comment; - for standard input).", valueName: "file"))
    var inputFile: String?

    @Option(name: [.customShort("f"), .customLong("format")], help: ArgumentHelp("Which variants to take: best, worst, all, or ids joined by '+'.", valueName: "selector"))
    package var format: String?

    @Option(name: .customLong("plugin-arg"), help: ArgumentHelp("An argument for a plugin, e.g. playurl:api=https://…/{cid}.", valueName: "plugin:key=value"))
    var pluginArguments: [String] = []

    /// The inputs from the arguments and the file, in order.
    func allInputs() throws -> [String] {
        var all = inputs
        if let inputFile {
            let bytes: [UInt8]
            if inputFile == "-" {
                bytes = [UInt8](FileHandle.standardInput.readDataToEndOfFile())
            } else {
                // The system's own words (No such file or directory, Permission denied, Is a directory).
                var info = stat()
                let problem: Int32? =
                    if stat(inputFile, &info) != 0 { errno }
                    else if info.st_mode & S_IFMT == S_IFDIR { EISDIR }
                    else if access(inputFile, R_OK) != 0 { errno }
                    else { nil }
                guard problem == nil, let contents = FileOperations.contents(inputFile) else {
                    throw ValidationError("cannot read the input file \(inputFile): \(String(cString: strerror(problem ?? EIO)))")
                }
                bytes = contents
            }
            all += InputList.lines(bytes)
        }
        guard !all.isEmpty else { throw ValidationError("give at least one input (a URL or PLUGIN:KEY), or -i FILE") }
        return all
    }

    package func parsedPluginArguments() throws -> PluginArguments {
        var arguments = PluginArguments()
        for text in pluginArguments {
            do { try arguments.add(text) } catch { throw ValidationError(error.message) }
        }
        return arguments
    }

    func formatSelector() throws -> FormatSelector? {
        guard let format else { return nil }
        do { return try FormatSelector(format) } catch { throw ValidationError(error.message) }
    }
}

/// How to reach servers.
package struct NetworkOptions: ParsableArguments {
    /// The defaults (argument-parser fills the options in).
    package init() {}

    @Option(name: .customLong("limit-rate"), help: ArgumentHelp("A rate limit for all transfers together, e.g. 500K or 2M.", valueName: "rate"))
    package var limitRate: String?

    @Option(help: "Attempts per segment before a task fails.")
    var retries: Int?

    @Option(name: .customLong("network-wait"), help: ArgumentHelp("How long a task waits for a host it cannot reach (refused, no route, no name) before it fails; 0 fails at once, -1 waits as long as it takes.", valueName: "seconds"))
    var networkWait: Int = 30

    @Option(name: .customLong("manifest-timeout"), help: ArgumentHelp("The longest a manifest, an API answer or a key may take to arrive, whole.", valueName: "seconds"))
    var manifestTimeout: Int = 60

    /// `--manifest-timeout` as a duration.
    package var documentTimeout: Duration { .seconds(manifestTimeout) }

    @Option(name: .customLong("header"), help: ArgumentHelp("A header field for every request (repeatable).", valueName: "'name: value'"))
    var headers: [String] = []

    @Option(name: .customLong("user-agent"), help: "The User-Agent to send.")
    var userAgent: String?

    @Option(help: ArgumentHelp("A proxy (http://host:port, socks5h://host:port); '' for none. Default: the *_proxy variables.", valueName: "url"))
    var proxy: String?

    func rateLimit() throws -> Int64? {
        guard let limitRate else { return nil }
        guard let rate = ByteCount.parse(limitRate), rate > 0 else {
            throw ValidationError("--limit-rate takes a size per second such as 500K or 2M, not \"\(limitRate)\"")
        }
        return rate
    }

    package func headerFields() throws -> HTTPHeaders {
        var fields = HTTPHeaders()
        for text in headers {
            guard let colon = text.firstIndex(of: ":") else {
                throw ValidationError("--header takes 'Name: value', not \"\(text)\"")
            }
            let name = text[..<colon].trimmingCharacters(in: .whitespaces)
            let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, !name.contains(" "), !value.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                throw ValidationError("--header \"\(text)\" cannot be sent")
            }
            fields.add(name: name, value: value)
        }
        return fields
    }

    package func validate() throws {
        _ = try rateLimit()
        _ = try headerFields()
        if let retries, retries < 1 { throw ValidationError("--retries must be at least 1") }
        if manifestTimeout < 1 { throw ValidationError("--manifest-timeout must be at least 1 second") }
    }
}

/// Where the store is, for the commands that download nothing (`list`, `pause`, `remove`).
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("state-dir"), help: ArgumentHelp("Where the task store and the segment cache live (default: $XDG_DATA_HOME/tessera).", valueName: "dir"))
    var stateDirectory: String?

    /// The same place as the downloading commands' options.
    func state() throws -> StateOptions {
        try StateOptions.parse(stateDirectory.map { ["--state-dir", $0] } ?? [])
    }
}

/// Where things go.
package struct StateOptions: ParsableArguments {
    /// The defaults (argument-parser fills the options in).
    package init() {}

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("Where the task store and the segment cache live (default: $XDG_DATA_HOME/tessera).", valueName: "dir"))
    var stateDirectory: String?

    @Flag(name: .customLong("no-cache"), help: "Do not use (or fill) the segment cache.")
    var noCache = false

    /// The state directory, absolute.
    var directory: String {
        if let stateDirectory { return absolute(stateDirectory) }
        return (SQLiteDownloadStore.defaultPath as NSString).deletingLastPathComponent
    }
}

/// How to report.
package struct DisplayOptions: ParsableArguments {
    /// The defaults (argument-parser fills the options in).
    package init() {}

    @Flag(help: "One JSON object per line per event; the last line is a summary.")
    package var json = false

    @Flag(name: [.short, .long], help: "Errors only, on standard error (the exit status tells the rest).")
    package var quiet = false

    @Flag(name: .shortAndLong, help: "More on standard error: -v what the manager decides, -vv every transfer.")
    var verbose: Int

    /// The library's log level for these options.
    var logLevel: Logger.Level { verbose >= 2 ? .debug : verbose == 1 ? .info : .warning }
}

/// An absolute, standardised path.
package func absolute(_ path: String) -> String {
    let expanded = (path as NSString).expandingTildeInPath
    let full = expanded.hasPrefix("/") ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
    return (full as NSString).standardizingPath
}

/// How `get` records live streams (an HLS playlist without `#EXT-X-ENDLIST`, a dynamic MPD).
package struct LiveOptions: ParsableArguments {
    /// The defaults (argument-parser fills the options in).
    package init() {}

    @Option(
        name: .customLong("live-duration"),
        help: ArgumentHelp("A live stream's recording ends once this much media is recorded (otherwise when the stream ends, or on Ctrl-C).", valueName: "seconds"))
    var liveDuration: Double?

    @Flag(name: .customLong("live-from-start"), help: "Begin a live recording at the oldest segment the stream still offers, not at the live edge.")
    var liveFromStart = false

    @Option(
        name: .customLong("live-stall-timeout"),
        help: ArgumentHelp("A live stream that publishes no new segment for this long is taken as ended (default: 6 target durations, at least 30).", valueName: "seconds"))
    var liveStallTimeout: Double?

    package func validate() throws {
        if let liveDuration, !(liveDuration > 0) || !liveDuration.isFinite { throw ValidationError("--live-duration must be a number of seconds above 0") }
        if let liveStallTimeout, !(liveStallTimeout > 0) || !liveStallTimeout.isFinite {
            throw ValidationError("--live-stall-timeout must be a number of seconds above 0")
        }
    }

    /// The manager's live policy for these options.
    func apply(to policy: inout LiveRecordingPolicy) {
        if liveFromStart { policy.start = .oldest }
        if let liveDuration { policy.maxDuration = .nanoseconds(Int64(min(liveDuration, 1e9) * 1e9)) }
        if let liveStallTimeout { policy.stallTimeout = .nanoseconds(Int64(min(liveStallTimeout, 1e9) * 1e9)) }
    }
}
