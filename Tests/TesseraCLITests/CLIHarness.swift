import Foundation
import Testing
import Tessera
import TesseraTesting

/// Runs the built `tessera` executable (next to the test bundle) as a user would.
struct CLI {
    struct Result {
        var status: Int32
        var output: String
        var errors: String

        /// The JSON lines of `--json` output.
        var jsonLines: [[String: Any]] {
            output.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
            }
        }

        /// The whole output as one JSON object (`resolve --json`, `list --json`).
        var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(output.utf8))) as? [String: Any]
        }
    }

    let directory: String
    /// Whether `get` merges tracks and parts (ffmpeg): off unless a test asks, since most
    /// fixtures serve bytes that are not media and compare the files byte for byte.
    var merges = false

    init() {
        directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("tessera-cli-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    var downloads: String { directory + "/downloads" }
    var state: String { directory + "/state" }

    func cleanUp() { try? FileManager.default.removeItem(atPath: directory) }

    static var executable: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("tessera")
    }

    /// Puts the built `tessera` at `path` (a test's own installation): a hard link where the file
    /// system allows, else a copy written through a descriptor closed on `exec`. A copy made
    /// through a descriptor without that flag is inherited by whatever process another test starts
    /// meanwhile, and running the copy then fails with "Text file busy" for as long as that
    /// process lives (a clean clone's CI saw it).
    static func install(at path: String) throws {
        if link(executable.path, path) == 0 { return }
        let bytes = try Data(contentsOf: executable)
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        try FileHandle(fileDescriptor: descriptor, closeOnDealloc: false).write(contentsOf: bytes)
    }

    /// The usual options for a test run: downloads and state in the test's directory, no proxy.
    func standard(_ arguments: [String]) -> [String] {
        guard let command = arguments.first, ["get", "cache", "resume"].contains(command) else { return arguments }
        var added: [String] = []
        // (-o is a directory only when its value is not a template, and deprecated so.)
        let outputIsDirectory = zip(arguments, arguments.dropFirst()).contains { ["-o", "--output"].contains($0) && !$1.contains("%(") }
        if !outputIsDirectory, !arguments.contains(where: { ["-d", "--dir", "-P", "--paths"].contains($0) }) { added += ["-d", downloads] }
        if !arguments.contains("--state-dir") { added += ["--state-dir", state] }
        if !arguments.contains("--proxy") { added += ["--proxy", ""] }
        if command == "get" || command == "resume", !merges, !arguments.contains("--no-merge") { added.append("--no-merge") }
        return arguments + added
    }

    /// Starts `tessera` and returns the running process (its output collected into files).
    /// With `newProcessGroup`, it leads a process group of its own, as a shell starts a
    /// foreground job: a signal to the group reaches it and whatever it did not move out.
    /// `executable`: another `tessera` than the one built beside the tests (a copy of it).
    func start(
        _ arguments: [String], environment: [String: String] = [:], newProcessGroup: Bool = false, executable: String = Self.executable.path
    ) throws -> (SpawnedProcess, String, String) {
        var env = childEnvironment()
        // No configuration file of the machine's user changes what a test runs.
        env["XDG_CONFIG_HOME"] = directory + "/no-config-home"
        for (key, value) in environment { env[key] = value }
        env["TERM"] = "dumb"
        let out = directory + "/out-\(UUID().uuidString)", err = directory + "/err-\(UUID().uuidString)"
        let outFile = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        let errFile = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        defer {
            if outFile >= 0 { close(outFile) }
            if errFile >= 0 { close(errFile) }
        }
        guard outFile >= 0, errFile >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let process = try SpawnedProcess(
            executable, standard(arguments), environment: env, directory: directory, input: .null,
            output: .descriptor(outFile), error: .descriptor(errFile), newProcessGroup: newProcessGroup)
        return (process, out, err)
    }

    /// Runs `tessera` to its end (or kills it after `timeout`).
    func run(
        _ arguments: [String], environment: [String: String] = [:], timeout: Duration = .seconds(120), executable: String = Self.executable.path
    ) async throws -> Result {
        let (process, out, err) = try start(arguments, environment: environment, executable: executable)
        if await !process.exited(within: timeout) {
            process.terminate()
            Issue.record("tessera \(arguments.joined(separator: " ")) did not finish in \(timeout)")
        }
        let termination = await process.ended()
        return Result(
            status: termination.status,
            output: fileText(out),
            errors: fileText(err))
    }
}
