#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One entry of `getifaddrs(3)`: an interface's flags and one of its addresses (an interface
/// appears once per address, and once more for its link-layer entry).
struct InterfaceAddress: Sendable, Hashable {
    /// What kind of address the entry holds.
    enum Family: Sendable, Hashable {
        /// An IPv4 address (any, including 169.254/16: the kernel saw fit to configure it).
        case ipv4
        /// An IPv6 address; `linkLocal` for fe80::/10, which does not reach beyond the link.
        case ipv6(linkLocal: Bool)
        /// No address, or one of another family (the `AF_PACKET` link-layer entry).
        case other
    }

    var name: String
    var isUp: Bool
    var isRunning: Bool
    var isLoopback: Bool
    var family: Family

    init(name: String, isUp: Bool = true, isRunning: Bool = true, isLoopback: Bool = false, family: Family) {
        self.name = name
        self.isUp = isUp
        self.isRunning = isRunning
        self.isLoopback = isLoopback
        self.family = family
    }

    /// Whether the entry makes the machine online: a non-loopback interface that is up and
    /// running (`IFF_UP`, `IFF_RUNNING`: administratively up, and the driver has a carrier),
    /// with an IPv4 address or an IPv6 address that is not link-local.
    var connects: Bool {
        guard isUp, isRunning, !isLoopback else { return false }
        switch family {
        case .ipv4: return true
        case .ipv6(let linkLocal): return !linkLocal
        case .other: return false
        }
    }

    /// The machine's interface addresses now, or `nil` when `getifaddrs(3)` fails.
    static func scan() -> [InterfaceAddress]? {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return nil }
        defer { freeifaddrs(list) }
        var entries: [InterfaceAddress] = []
        var cursor = list
        while let entry = cursor {
            cursor = entry.pointee.ifa_next
            guard let name = entry.pointee.ifa_name else { continue }
            let flags = entry.pointee.ifa_flags
            entries.append(
                InterfaceAddress(
                    name: String(cString: name),
                    isUp: flags & UInt32(IFF_UP) != 0,
                    isRunning: flags & UInt32(IFF_RUNNING) != 0,
                    isLoopback: flags & UInt32(IFF_LOOPBACK) != 0,
                    family: family(of: entry.pointee.ifa_addr)
                ))
        }
        return entries
    }

    private static func family(of address: UnsafeMutablePointer<sockaddr>?) -> Family {
        guard let address else { return .other }
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return .ipv4
        case AF_INET6:
            let bytes = UnsafeRawPointer(address).withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                $0.pointee.sin6_addr.__in6_u.__u6_addr8
            }
            return .ipv6(linkLocal: bytes.0 == 0xfe && bytes.1 & 0xc0 == 0x80)
        default:
            return .other
        }
    }
}

extension NetworkStatus {
    /// The status `entries` describe: online through the interfaces with an entry that
    /// ``InterfaceAddress/connects`` (sorted by name, each once), metered as `isMetered` says of
    /// those names (never when offline).
    init(entries: [InterfaceAddress], isMetered: ([String]) -> Bool) {
        let names = Set(entries.lazy.filter(\.connects).map(\.name)).sorted()
        self.init(isOnline: !names.isEmpty, isMetered: !names.isEmpty && isMetered(names), interfaces: names)
    }
}
