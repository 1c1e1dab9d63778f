import Foundation
import Synchronization
import Testing
import Tessera

@testable import Tessera
import TesseraTesting

#if canImport(Glibc)
import Glibc
#endif

/// Helpers for the network monitor tests, kept under one name so they cannot clash with others.
enum MonitorTestSupport {
    /// Polls `condition` every 5 ms until it holds or `timeout` passes (`eventually` of
    /// `TesseraTesting`).
    static func waitUntil(timeout: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
        await eventually(within: timeout, every: .milliseconds(5), condition)
    }

    // MARK: Statuses and the interfaces that give them

    static let wired = NetworkStatus(isOnline: true, interfaces: ["eth0"])
    static let mobile = NetworkStatus(isOnline: true, isMetered: true, interfaces: ["wwan0"])
    static let offline = NetworkStatus.offline

    /// Interface entries that ``NetworkStatus/init(entries:isMetered:)`` turns into `status`
    /// under the default metered predicate (which `wired` and `mobile` agree with).
    static func entries(for status: NetworkStatus) -> [InterfaceAddress] {
        var entries = [
            InterfaceAddress(name: "lo", isLoopback: true, family: .ipv4),
            InterfaceAddress(name: "lo", isLoopback: true, family: .ipv6(linkLocal: false)),
        ]
        for name in status.isOnline ? status.interfaces : [] {
            entries.append(InterfaceAddress(name: name, family: .other))
            entries.append(InterfaceAddress(name: name, family: .ipv4))
            entries.append(InterfaceAddress(name: name, family: .ipv6(linkLocal: true)))
        }
        return entries
    }

    // MARK: Descriptors and threads

    /// How many descriptors the process has open.
    static func openDescriptorCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    }

    /// What descriptor `fd` refers to (`socket:[inode]`, or `anon_inode:[eventfd]` with the
    /// eventfd's id), or `nil` when it is closed: tells a descriptor from a later one that
    /// reuses its number.
    static func descriptorIdentity(_ fd: Int32) -> String? {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)") else {
            return nil
        }
        let info = fileText("/proc/self/fdinfo/\(fd)")
        let id = info.split(separator: "\n").first { $0.hasPrefix("eventfd-id:") } ?? ""
        return target + " " + id.filter { !$0.isWhitespace }
    }

    /// Whether thread `tid` of this process still exists.
    static func threadExists(_ tid: pid_t) -> Bool {
        FileManager.default.fileExists(atPath: "/proc/self/task/\(tid)")
    }

    /// Whether thread `tid` of this process is blocked in poll(2) or ppoll(2), from the system
    /// call `/proc/self/task/<tid>/syscall` names; `nil` where that cannot be read or told.
    static func isBlockedInPoll(_ tid: pid_t) -> Bool? {
        guard let text = try? String(contentsOfFile: "/proc/self/task/\(tid)/syscall", encoding: .utf8) else { return nil }
        // "running", or the number of the call it is blocked in, followed by its arguments.
        guard let number = text.split(separator: " ").first.flatMap({ Int($0) }) else { return false }
        #if arch(x86_64)
        return number == 7 || number == 271  // poll, ppoll
        #elseif arch(arm64)
        return number == 73  // ppoll
        #else
        return nil
        #endif
    }

    // MARK: The `ip` tool

    static let ipTool: String? = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// Runs `ip arguments…`; its exit status and its output (standard output and error).
    @discardableResult
    static func ip(_ arguments: String...) -> (status: Int32, output: String) {
        guard let ipTool else { return (-1, "no ip tool") }
        let captured: SpawnedProcess.Captured
        do { captured = try SpawnedProcess.capture(ipTool, arguments, mergingErrors: true) } catch { return (-1, "\(error)") }
        return (captured.termination?.status ?? -1, String(decoding: captured.output, as: UTF8.self))
    }

    /// Whether the process has CAP_NET_ADMIN (needed to add interfaces).
    static var hasNetAdmin: Bool {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let mask = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return mask & (1 << 12) != 0
    }

    /// The interfaces `ip` reports up with a carrier and an IPv4 or global IPv6 address: what
    /// the monitor should find, told independently of it.
    static func routableInterfacesFromIP() -> Set<String> {
        let links = ip("-o", "link", "show", "up").output.split(separator: "\n").compactMap { line -> String? in
            // "4: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu …" (a veth shows "name@peer").
            let fields = line.split(separator: " ")
            guard fields.count > 2, fields[2].contains("LOWER_UP"), !fields[2].contains("LOOPBACK") else { return nil }
            return String(fields[1].dropLast().split(separator: "@").first ?? "")
        }
        let addressed = (ip("-o", "-4", "addr", "show").output + ip("-o", "-6", "addr", "show", "scope", "global").output)
            .split(separator: "\n").compactMap { line -> String? in
                let fields = line.split(separator: " ")
                return fields.count > 1 ? String(fields[1]) : nil
            }
        // Less the event test's own interfaces, which may come and go (in another test process).
        return Set(links).intersection(addressed).filter { !$0.hasPrefix("tessera-") }
    }
}

/// Records what a status stream yields, on a task of its own.
final class StatusRecorder: Sendable {
    private struct State {
        var values: [NetworkStatus] = []
        var ended = false
    }

    private let state = Locked(State())
    private let task = Locked<Task<Void, Never>?>(nil)

    init(_ stream: AsyncStream<NetworkStatus>) {
        let task = Task { [self] in
            for await status in stream {
                state.withLock { $0.values.append(status) }
            }
            state.withLock { $0.ended = true }
        }
        self.task.withLock { $0 = task }
    }

    var values: [NetworkStatus] { state.withLock { $0.values } }
    var ended: Bool { state.withLock { $0.ended } }

    /// Waits until the stream has yielded at least `count` statuses.
    func waitForValues(_ count: Int, timeout: Duration = .seconds(30)) async -> Bool {
        await MonitorTestSupport.waitUntil(timeout: timeout) { values.count >= count }
    }

    /// Waits until a yielded status satisfies `predicate`.
    func waitForValue(timeout: Duration = .seconds(30), where predicate: (NetworkStatus) -> Bool) async -> Bool {
        await MonitorTestSupport.waitUntil(timeout: timeout) { values.contains(where: predicate) }
    }

    /// Waits until the stream ends.
    func waitForEnd(timeout: Duration = .seconds(30)) async -> Bool {
        await MonitorTestSupport.waitUntil(timeout: timeout) { ended }
    }

    /// Stops recording (ends the iteration by cancelling its task).
    func cancel() {
        task.withLock { $0?.cancel() }
    }
}

/// Stands in for the netlink socket and for `getifaddrs`: a Unix socket pair whose one end the
/// monitor reads, and a scripted interface list. ``post(_:)`` changes the list and sends a
/// message, as the kernel does when an interface changes.
final class ScriptedNetlink: Sendable {
    private struct Script {
        var entries: [InterfaceAddress]
        var scans = 0
    }

    private let script: Locked<Script>
    private let held = Synchronization.Atomic(false)
    private let heldScans = Synchronization.Atomic(0)
    /// The end the monitor owns (and closes when it stops).
    let monitorEnd: Int32
    /// The end the test writes to.
    let testEnd: Int32

    init(_ status: NetworkStatus = MonitorTestSupport.wired) {
        script = Locked(Script(entries: MonitorTestSupport.entries(for: status)))
        var pair: [Int32] = [-1, -1]
        let result = socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair)
        precondition(result == 0, "socketpair: \(errno)")
        monitorEnd = pair[0]
        testEnd = pair[1]
    }

    /// How many times the monitor read the interfaces.
    var scans: Int { script.withLock { $0.scans } }

    /// The scripted `getifaddrs`; the count and the list are read together, so once ``scans``
    /// has grown the list that scan returned is fixed.
    func scan() -> [InterfaceAddress]? {
        if held.load(ordering: .acquiring) {
            heldScans.add(1, ordering: .relaxed)
            while held.load(ordering: .acquiring) { usleep(1_000) }
            heldScans.subtract(1, ordering: .relaxed)
        }
        return script.withLock { script in
            script.scans += 1
            return script.entries
        }
    }

    /// A monitor reading this stand-in.
    func makeMonitor(
        isMetered: @escaping NetlinkNetworkMonitor.MeteredPredicate = NetlinkNetworkMonitor.looksLikeMobileBroadband
    ) -> NetlinkNetworkMonitor {
        NetlinkNetworkMonitor(isMetered: isMetered, openSocket: { monitorEnd }, scan: { [self] in scan() })
    }

    /// Makes the interfaces describe `status`, sends `messages` messages, and waits until the
    /// monitor has read the interfaces again.
    @discardableResult
    func post(_ status: NetworkStatus, messages: Int = 1) async -> Bool {
        await post(entries: MonitorTestSupport.entries(for: status), messages: messages)
    }

    /// Makes the interfaces `entries`, sends `messages` messages, and waits until the monitor
    /// has read the interfaces again.
    @discardableResult
    func post(entries: [InterfaceAddress], messages: Int = 1) async -> Bool {
        let before = script.withLock { script in
            script.entries = entries
            return script.scans
        }
        var byte: UInt8 = 1
        for _ in 0..<messages {
            guard Glibc.send(testEnd, &byte, 1, Int32(MSG_NOSIGNAL)) == 1 else { return false }
        }
        return await MonitorTestSupport.waitUntil { scans > before }
    }

    /// Makes the next scans wait (inside the monitor's reading thread) until ``release()``.
    func hold() {
        held.store(true, ordering: .releasing)
    }

    /// Lets held scans go on.
    func release() {
        held.store(false, ordering: .releasing)
    }

    /// How many scans are waiting for ``release()``.
    var waitingScans: Int { heldScans.load(ordering: .relaxed) }

    /// Sends `count` messages without waiting for the monitor; how many it could send (the
    /// socket queues a few only).
    func send(messages count: Int) -> Int {
        var byte: UInt8 = 1
        var sent = 0
        while sent < count, Glibc.send(testEnd, &byte, 1, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) == 1 { sent += 1 }
        return sent
    }

    /// Closes the test's end (the monitor sees the socket hang up).
    func closeTestEnd() {
        close(testEnd)
    }
}
