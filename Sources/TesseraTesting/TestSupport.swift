import Foundation
import Tessera

/// A fresh directory under the system's temporary directory (or `$TESSERA_TEST_TMPDIR`, to put
/// test files on a RAM disk), removed by ``cleanUp()``.
public struct TemporaryDirectory: Sendable {
    /// The directory's absolute path.
    public let path: String

    /// Creates `<tmp>/<name>-<UUID>`.
    public init(_ name: String = "tessera-test") {
        let base = ProcessInfo.processInfo.environment["TESSERA_TEST_TMPDIR"] ?? NSTemporaryDirectory()
        path = (base as NSString).appendingPathComponent("\(name)-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// The path of `name` inside the directory.
    public func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    /// Every regular file under the directory, relative to it, sorted (the manager's `.tessera`
    /// work area left out).
    public var files: [String] { filesUnder(path) }

    /// Removes the directory and everything in it.
    public func cleanUp() { try? FileManager.default.removeItem(atPath: path) }
}

/// Every regular file under `directory`, relative to it, sorted (the manager's `.tessera` work
/// area left out).
public func filesUnder(_ directory: String) -> [String] {
    guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [] }
    var files: [String] = []
    while let name = enumerator.nextObject() as? String {
        if name.hasPrefix(".tessera") { continue }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: (directory as NSString).appendingPathComponent(name), isDirectory: &isDirectory),
            !isDirectory.boolValue
        {
            files.append(name)
        }
    }
    return files.sorted()
}

/// The whole file, or `nil` when it cannot be read. Tests read files with this (or
/// ``fileText(_:)``), not with Foundation's `FileManager.contents(atPath:)`,
/// `Data(contentsOf:)` or `String(contentsOfFile:)`: on Linux those leak 4 KiB for every empty
/// file they read, and `make check` runs with LeakSanitizer.
public func fileContents(_ path: String) -> [UInt8]? {
    FileOperations.contents(path)
}

/// The file as UTF-8 text; empty when it cannot be read (see ``fileContents(_:)``).
public func fileText(_ path: String) -> String {
    fileContents(path).map { String(decoding: $0, as: UTF8.self) } ?? ""
}

/// The size of the file at `path`, or `nil` when there is none.
public func fileSize(_ path: String) -> Int64? {
    (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value
}

extension CurlEngine.Configuration {
    /// For talking to a ``LoopbackOrigin``: no proxy from the environment, short timeouts; as
    /// many engine threads as `TESSERA_TEST_ENGINE_THREADS` says (1 without it: `make test` runs
    /// the suites again with 2, as the `tessera` command runs).
    public static func forTests() -> CurlEngine.Configuration {
        var configuration = CurlEngine.Configuration()
        configuration.threads = ProcessInfo.processInfo.environment["TESSERA_TEST_ENGINE_THREADS"].flatMap { Int($0) } ?? 1
        configuration.proxy = .none
        configuration.connectTimeout = .seconds(5)
        configuration.lowSpeedTime = .seconds(10)
        return configuration
    }
}

/// An executable of the package (a sample, a command line) run to its end, as its tests do.
public struct ExecutableRun: Sendable {
    /// The exit status; `nil` when it had to be killed after the timeout.
    public var status: Int32?
    /// Standard output and standard error, interleaved as written.
    public var output: String

    /// The built product `name` next to the running test bundle (`swift build --build-tests`
    /// builds every executable product there).
    public static func builtProduct(_ name: String) -> URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent(name)
    }

    /// Runs `executable` with `arguments` (and `NO_PROXY=127.0.0.1`), collecting its output;
    /// after `timeout` it is terminated and ``status`` is `nil`.
    public static func run(
        _ executable: URL, _ arguments: [String], environment extra: [String: String] = [:], timeout: Duration = .seconds(120)
    ) async throws -> ExecutableRun {
        var environment = childEnvironment(adding: extra)
        environment["NO_PROXY"] = environment["NO_PROXY"] ?? "127.0.0.1"
        let finalEnvironment = environment
        let captured = try await onThread {
            try SpawnedProcess.capture(executable.path, arguments, environment: finalEnvironment, mergingErrors: true, timeout: timeout)
        }
        return ExecutableRun(status: captured.termination?.status, output: String(decoding: captured.output, as: UTF8.self))
    }
}

/// The environment for a program a test starts: this process's, with `extra` on top, and
/// LeakSanitizer off in the child (`LSAN_OPTIONS=detect_leaks=0`; no effect unless it was built
/// with `--sanitize=address`, as by `make check`). A program that exits while its tasks are
/// suspended leaves their async frames allocated, and Swift's task allocator hides the references
/// to them from LeakSanitizer, which then calls what they hold leaks. The test process's own
/// leak check stays on.
public func childEnvironment(adding extra: [String: String] = [:]) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["LSAN_OPTIONS"] = "detect_leaks=0"
    for (key, value) in extra { environment[key] = value }
    return environment
}

/// Runs `body` on a thread of its own (it may block) while the caller's task waits without
/// holding a thread of the cooperative pool.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// A TCP socket bound to 127.0.0.1 on a port the system chose, for tests that need a raw
/// listener (an answer `LoopbackOrigin` will not send, a port nobody serves, a parser that must
/// never connect).
public struct LoopbackSocket: Sendable {
    /// The descriptor; close it with ``close()``.
    public let descriptor: Int32
    /// The port it is bound to.
    public let port: Int

    /// Binds a new socket, listening (with a backlog of 16) when `listening`.
    public init(listening: Bool = true) throws {
        let descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound, !listening || listen(descriptor, 16) == 0 else {
            Glibc.close(descriptor)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Closes the socket (a thread blocked in `accept` on it returns).
    public func close() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        Glibc.close(descriptor)
    }
}
