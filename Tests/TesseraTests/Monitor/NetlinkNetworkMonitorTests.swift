import Foundation
import Synchronization
import Testing

@testable import Tessera
import TesseraTesting

#if canImport(Glibc)
import Glibc
#endif

/// The netlink monitor on this machine's kernel, and its life cycle (thread, descriptors).
@Suite("NetlinkNetworkMonitor", .serialized, .timeLimit(.minutes(2)))
struct NetlinkNetworkMonitorTests {
    private typealias Support = MonitorTestSupport

    // MARK: The real network

    @Test(
        "reports this machine online through its interfaces",
        .enabled(if: !MonitorTestSupport.routableInterfacesFromIP().isEmpty, "no routable interface, or no ip tool"))
    func reportsTheMachineOnline() throws {
        let expected = Support.routableInterfacesFromIP()
        let monitor = NetlinkNetworkMonitor()
        defer { monitor.stop() }
        #expect(monitor.isObserving)
        let status = monitor.currentStatus
        #expect(status.isOnline)
        // A subset: the event test may add an interface meanwhile.
        #expect(expected.isSubset(of: status.interfaces), "ip: \(expected.sorted()), monitor: \(status)")
        #expect(status.interfaces == status.interfaces.sorted())
        #expect(!status.interfaces.contains("lo"))
        #expect(status.isMetered == NetlinkNetworkMonitor.looksLikeMobileBroadband(status.interfaces))
    }

    @Test(
        "sees an interface come and go",
        .enabled(if: MonitorTestSupport.ipTool != nil, "needs the ip tool"),
        .enabled(if: MonitorTestSupport.hasNetAdmin, "needs CAP_NET_ADMIN"))
    func seesAnInterfaceComeAndGo() async throws {
        let monitor = NetlinkNetworkMonitor()
        defer { monitor.stop() }
        guard monitor.isObserving else { try Test.cancel("no netlink socket here") }
        let recorder = StatusRecorder(monitor.statusUpdates())
        defer { recorder.cancel() }

        // A virtual interface that is running once up: `dummy` where the module exists, `ifb`
        // otherwise. A name of our own, so that runs in parallel cannot meet.
        let name = "tessera-" + String(UInt32.random(in: 0..<0xF_FFFF), radix: 16)
        var failures: [String] = []
        let created = ["dummy", "ifb"].contains { type in
            let result = Support.ip("link", "add", name, "type", type)
            if result.status != 0 { failures.append("\(type): \(result.output)") }
            return result.status == 0
        }
        guard created else { try Test.cancel("cannot add a virtual interface here: \(failures)") }
        defer { Support.ip("link", "del", name) }

        let address = "198.51.100.\(Int.random(in: 1...254))/32"  // TEST-NET-2, never routed
        let added = Support.ip("addr", "add", address, "dev", name)
        try #require(added.status == 0, "\(added.output)")
        let up = Support.ip("link", "set", name, "up")
        try #require(up.status == 0, "\(up.output)")

        #expect(await recorder.waitForValue { $0.isOnline && $0.interfaces.contains(name) }, "\(recorder.values)")
        #expect(monitor.currentStatus.interfaces.contains(name))
        let seenAt = recorder.values.count

        let deleted = Support.ip("link", "del", name)
        try #require(deleted.status == 0, "\(deleted.output)")
        #expect(
            await MonitorTestSupport.waitUntil(timeout: .seconds(10)) {
                recorder.values.dropFirst(seenAt).contains { !$0.interfaces.contains(name) }
            }, "\(recorder.values)")
        #expect(!monitor.currentStatus.interfaces.contains(name))
        #expect(zip(recorder.values, recorder.values.dropFirst()).allSatisfy { $0 != $1 })
    }

    @Test("the socket is a route netlink socket on the link and address groups")
    func socketJoinsTheRightGroups() throws {
        let monitor = NetlinkNetworkMonitor()
        defer { monitor.stop() }
        guard monitor.isObserving else { try Test.cancel("no netlink socket here") }
        let socket = try #require(monitor._descriptors?.socket)
        let identity = try #require(Support.descriptorIdentity(socket))
        // "socket:[inode] " → the row of /proc/net/netlink with that inode.
        let inode = try #require(identity.split(separator: "[").last?.split(separator: "]").first.map(String.init))
        let table = try String(contentsOfFile: "/proc/net/netlink", encoding: .utf8)
        let row = try #require(
            table.split(separator: "\n").map { $0.split(separator: " ") }.first { $0.last.map(String.init) == inode })
        #expect(row[1] == "0", "protocol NETLINK_ROUTE")
        #expect(UInt32(row[3], radix: 16) == 0x111, "RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR")
        let flags = fcntl(socket, F_GETFD)
        #expect(flags >= 0 && flags & FD_CLOEXEC != 0)
    }

    // MARK: Blind monitors

    @Test("a socket that cannot be opened leaves the monitor blind: online, for good")
    func openFailureMakesItBlind() async {
        let scans = ScanCounter()
        let monitor = NetlinkNetworkMonitor(
            isMetered: { _ in true },
            openSocket: {
                errno = EACCES
                return -1
            },
            scan: {
                scans.count.add(1, ordering: .relaxed)
                return []
            })
        #expect(!monitor.isObserving)
        #expect(monitor.currentStatus == .online)
        #expect(monitor._descriptors == nil)
        #expect(monitor._readerThreadID == nil)
        let recorder = StatusRecorder(monitor.statusUpdates())
        monitor.stop()
        #expect(await recorder.waitForEnd())
        #expect(recorder.values.isEmpty)
        #expect(scans.count.load(ordering: .relaxed) == 0)
    }

    @Test("a socket that fails later turns the monitor blind: online, once")
    func socketFailureMakesItBlind() async {
        let netlink = ScriptedNetlink(.offline)
        let monitor = netlink.makeMonitor()
        #expect(monitor.isObserving)
        #expect(monitor.currentStatus == .offline)
        let recorder = StatusRecorder(monitor.statusUpdates())

        netlink.closeTestEnd()  // the monitor's end hangs up
        #expect(await recorder.waitForValues(1))
        #expect(monitor.currentStatus == .online)
        #expect(await MonitorTestSupport.waitUntil { !monitor._isWatchingSocket })
        monitor.stop()
        #expect(await recorder.waitForEnd())
        #expect(recorder.values == [.online])
    }

    // MARK: Bursts

    @Test("a burst of messages costs one rescan")
    func burstsAreCoalesced() async throws {
        let netlink = ScriptedNetlink(.offline)
        let monitor = netlink.makeMonitor()
        defer {
            netlink.release()
            monitor.stop()
            netlink.closeTestEnd()
        }
        let initialScans = netlink.scans  // the one at start

        // Hold the reader inside a rescan while the burst queues up behind it.
        netlink.hold()
        #expect(netlink.send(messages: 1) == 1)
        #expect(await MonitorTestSupport.waitUntil { netlink.waitingScans == 1 })
        let burst = netlink.send(messages: 8)
        #expect(burst >= 2, "the socket queued \(burst)")
        netlink.release()

        #expect(await MonitorTestSupport.waitUntil { netlink.scans >= initialScans + 2 })
        // No third scan follows: absence, which only watching for a while can show.
        #expect(await consistently(for: .milliseconds(200)) { netlink.scans == initialScans + 2 },
            "\(burst) messages in one burst, \(netlink.scans - initialScans) scans")
    }

    // MARK: Stopping

    @Test("stop ends the thread and closes both descriptors, promptly")
    func stopReleasesThreadAndDescriptors() async throws {
        let monitor = NetlinkNetworkMonitor()
        guard monitor.isObserving else { try Test.cancel("no netlink socket here") }
        let descriptors = try #require(monitor._descriptors)
        #expect(await MonitorTestSupport.waitUntil { monitor._readerThreadID != nil })
        let thread = try #require(monitor._readerThreadID)
        let socket = try #require(Support.descriptorIdentity(descriptors.socket))
        let wakeup = try #require(Support.descriptorIdentity(descriptors.wakeup))
        #expect(socket.hasPrefix("socket:["))
        #expect(wakeup.hasPrefix("anon_inode:[eventfd]"))
        #expect(Support.threadExists(thread))
        // Stop it where it spends its life: blocked in poll(2).
        #expect(await MonitorTestSupport.waitUntil { Support.isBlockedInPoll(thread) ?? true })

        let elapsed = ContinuousClock().measure { monitor.stop() }
        #expect(elapsed < .milliseconds(500), "stop took \(elapsed)")
        #expect(monitor._readerThreadID == nil)
        // Closed (or, if another test opened one since, a different descriptor at that number).
        #expect(Support.descriptorIdentity(descriptors.socket) != socket)
        #expect(Support.descriptorIdentity(descriptors.wakeup) != wakeup)
        #expect(await MonitorTestSupport.waitUntil(timeout: .seconds(20)) { !Support.threadExists(thread) })
    }

    @Test("dropping the last reference stops the monitor")
    func deinitStops() async throws {
        var monitor: NetlinkNetworkMonitor? = NetlinkNetworkMonitor()
        guard monitor?.isObserving == true else { try Test.cancel("no netlink socket here") }
        let descriptors = try #require(monitor?._descriptors)
        let socket = Support.descriptorIdentity(descriptors.socket)
        #expect(await MonitorTestSupport.waitUntil { monitor?._readerThreadID != nil })
        let thread = try #require(monitor?._readerThreadID)
        let recorder = StatusRecorder(try #require(monitor).statusUpdates())

        monitor = nil
        #expect(await recorder.waitForEnd())
        #expect(Support.descriptorIdentity(descriptors.socket) != socket)
        #expect(await MonitorTestSupport.waitUntil(timeout: .seconds(20)) { !Support.threadExists(thread) })
    }

    @Test("50 monitors started and stopped leave no descriptor behind")
    func noDescriptorLeaks() throws {
        let before = Support.openDescriptorCount()
        var identities: [(fd: Int32, identity: String?)] = []
        for _ in 0..<50 {
            let monitor = NetlinkNetworkMonitor()
            guard monitor.isObserving else { try Test.cancel("no netlink socket here") }
            let descriptors = try #require(monitor._descriptors)
            // The socket's identity (its inode) is never reused soon; an eventfd's id is (the
            // kernel hands out the smallest free one), so a leaked wake-up descriptor is caught
            // by the count below instead.
            identities.append((descriptors.socket, Support.descriptorIdentity(descriptors.socket)))
            monitor.stop()
        }
        let after = Support.openDescriptorCount()
        // Each monitor's own descriptors are gone…
        for (fd, identity) in identities {
            #expect(identity != nil)
            #expect(Support.descriptorIdentity(fd) != identity, "descriptor \(fd) still open")
        }
        // …and so the count is back: a leak of one descriptor a monitor would add 50, while tests
        // running in parallel (other suites) may open or close a few meanwhile.
        #expect(after - before < 50, "\(before) descriptors before, \(after) after")
    }
}

private final class ScanCounter: Sendable {
    let count = Synchronization.Atomic(0)
}
