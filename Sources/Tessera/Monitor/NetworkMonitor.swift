/// Whether the machine is online, and on what kind of network.
public struct NetworkStatus: Sendable, Hashable, CustomStringConvertible {
    /// Whether an interface other than loopback is up and has an address.
    public var isOnline: Bool
    /// Whether the network is metered (mobile data, a tethered phone).
    public var isMetered: Bool
    /// The interfaces that make the machine online, by name.
    public var interfaces: [String]

    /// Creates a status.
    public init(isOnline: Bool, isMetered: Bool = false, interfaces: [String] = []) {
        self.isOnline = isOnline
        self.isMetered = isMetered
        self.interfaces = interfaces
    }

    /// Online on an unmetered network.
    public static let online = NetworkStatus(isOnline: true)
    /// Offline.
    public static let offline = NetworkStatus(isOnline: false)

    public var description: String {
        guard isOnline else { return "offline" }
        let via = interfaces.isEmpty ? "" : " via \(interfaces.joined(separator: ", "))"
        return (isMetered ? "online (metered)" : "online") + via
    }
}

/// Tells a ``DownloadTaskManager`` when the network goes away and comes back.
///
/// Every implementation must satisfy these rules, which the shared conformance tests check:
/// - ``currentStatus`` is cheap and never blocks.
/// - ``statusUpdates()`` gives each caller its own stream; it yields only changes (never the same
///   status twice in a row), in order, and ends when the monitor is stopped.
/// - A monitor that cannot observe the network reports ``NetworkStatus/online`` and never
///   changes, so downloads are never held back by a blind monitor.
public protocol NetworkMonitor: Sendable {
    /// The status now.
    var currentStatus: NetworkStatus { get }
    /// Every change from now on.
    func statusUpdates() -> AsyncStream<NetworkStatus>
}

/// A monitor whose status is set by hand: for tests, and for applications that learn the
/// network's state elsewhere (a platform API, a user setting).
public final class ManualNetworkMonitor: NetworkMonitor {
    private let broadcaster: StatusBroadcaster

    /// Starts with `status`.
    public init(_ status: NetworkStatus = .online) {
        broadcaster = StatusBroadcaster(status)
    }

    public var currentStatus: NetworkStatus { broadcaster.current }

    public func statusUpdates() -> AsyncStream<NetworkStatus> { broadcaster.subscribe() }

    /// Changes the status (and tells the subscribers when it differs).
    public func set(_ status: NetworkStatus) { broadcaster.publish(status) }
}
