import Testing

@testable import Tessera

/// How the netlink monitor turns interface entries (what `getifaddrs` lists) into a status.
@Suite("NetlinkNetworkMonitor: status from interfaces")
struct NetlinkInterfaceStatusTests {
    private let loopback = [
        InterfaceAddress(name: "lo", isLoopback: true, family: .other),
        InterfaceAddress(name: "lo", isLoopback: true, family: .ipv4),
        InterfaceAddress(name: "lo", isLoopback: true, family: .ipv6(linkLocal: false)),
    ]

    private func status(_ entries: [InterfaceAddress]) -> NetworkStatus {
        NetworkStatus(entries: entries, isMetered: NetlinkNetworkMonitor.looksLikeMobileBroadband)
    }

    @Test func loopbackOnlyIsOffline() {
        #expect(status(loopback) == .offline)
        #expect(status([]) == .offline)
    }

    @Test func upAndRunningWithIPv4IsOnline() {
        let entries =
            loopback + [
                InterfaceAddress(name: "eth0", family: .other),
                InterfaceAddress(name: "eth0", family: .ipv4),
            ]
        #expect(status(entries) == NetworkStatus(isOnline: true, isMetered: false, interfaces: ["eth0"]))
    }

    @Test func upButNotRunningIsOffline() {
        // Up with no carrier (cable out, Wi-Fi not associated).
        #expect(status(loopback + [InterfaceAddress(name: "eth0", isRunning: false, family: .ipv4)]) == .offline)
        // Down (only IFF_UP tells it is meant to be used).
        #expect(status(loopback + [InterfaceAddress(name: "eth0", isUp: false, family: .ipv4)]) == .offline)
    }

    @Test func linkLocalIPv6OnlyIsOffline() {
        let entries = loopback + [InterfaceAddress(name: "eth0", family: .ipv6(linkLocal: true))]
        #expect(status(entries) == .offline)
    }

    @Test func globalIPv6IsOnline() {
        let entries =
            loopback + [
                InterfaceAddress(name: "eth0", family: .ipv6(linkLocal: true)),
                InterfaceAddress(name: "eth0", family: .ipv6(linkLocal: false)),
            ]
        #expect(status(entries) == NetworkStatus(isOnline: true, interfaces: ["eth0"]))
    }

    @Test func linkLayerEntryAloneIsOffline() {
        #expect(status(loopback + [InterfaceAddress(name: "eth0", family: .other)]) == .offline)
    }

    @Test func interfacesAreSortedAndListedOnce() {
        let entries =
            loopback + [
                InterfaceAddress(name: "wlan0", family: .ipv4),
                InterfaceAddress(name: "wlan0", family: .ipv6(linkLocal: false)),
                InterfaceAddress(name: "eth0", family: .ipv4),
                InterfaceAddress(name: "eth1", isRunning: false, family: .ipv4),
                InterfaceAddress(name: "docker0", family: .ipv4),
            ]
        #expect(status(entries).interfaces == ["docker0", "eth0", "wlan0"])
    }

    @Test func defaultMeteredPredicate() {
        let metered = NetlinkNetworkMonitor.looksLikeMobileBroadband
        #expect(metered(["wwan0"]))
        #expect(metered(["wwp0s20f0u6"]))
        #expect(metered(["rmnet_data0", "ppp0"]))
        // Any other interface online: the system routes through it, taken as unmetered.
        #expect(!metered(["eth0", "wwan0"]))
        // USB tethering cannot be told from a USB Ethernet adapter by name.
        #expect(!metered(["usb0"]))
        #expect(!metered(["enx001122334455"]))
        #expect(!metered(["wlan0"]))
        #expect(!metered([]))

        let mobile = loopback + [InterfaceAddress(name: "wwan0", family: .ipv4)]
        #expect(status(mobile) == NetworkStatus(isOnline: true, isMetered: true, interfaces: ["wwan0"]))
        let both = mobile + [InterfaceAddress(name: "eth0", family: .ipv4)]
        #expect(status(both) == NetworkStatus(isOnline: true, isMetered: false, interfaces: ["eth0", "wwan0"]))
    }

    @Test func customMeteredPredicate() {
        let entries = loopback + [InterfaceAddress(name: "wlan0", family: .ipv4)]
        let seen = NetworkStatus(entries: entries) { names in names == ["wlan0"] }
        #expect(seen == NetworkStatus(isOnline: true, isMetered: true, interfaces: ["wlan0"]))
        // Offline is never metered, and the predicate is not asked.
        let offline = NetworkStatus(entries: loopback) { _ in
            Issue.record("asked about an offline machine")
            return true
        }
        #expect(offline == .offline)
    }

    @Test func monitorAppliesItsMeteredPredicate() async {
        let netlink = ScriptedNetlink(MonitorTestSupport.wired)
        let monitor = netlink.makeMonitor { names in names.contains("eth0") }
        defer {
            monitor.stop()
            netlink.closeTestEnd()
        }
        #expect(monitor.currentStatus == NetworkStatus(isOnline: true, isMetered: true, interfaces: ["eth0"]))
        await netlink.post(NetworkStatus(isOnline: true, interfaces: ["wlan0"]))
        #expect(await MonitorTestSupport.waitUntil { monitor.currentStatus.interfaces == ["wlan0"] })
        #expect(monitor.currentStatus == NetworkStatus(isOnline: true, isMetered: false, interfaces: ["wlan0"]))
    }

    @Test func realScanListsLoopback() throws {
        let entries = try #require(InterfaceAddress.scan())
        #expect(entries.contains { $0.name == "lo" && $0.isLoopback && $0.family == .ipv4 })
        #expect(!entries.contains { $0.isLoopback && $0.connects })
    }
}
