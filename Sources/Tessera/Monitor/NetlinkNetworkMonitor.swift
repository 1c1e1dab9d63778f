import CTesseraSystem
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The Linux ``NetworkMonitor``: listens to the kernel's routing netlink socket and rereads the
/// interfaces whenever a link or an address changes.
///
/// The monitor joins the `RTMGRP_LINK`, `RTMGRP_IPV4_IFADDR` and `RTMGRP_IPV6_IFADDR` multicast
/// groups of a `NETLINK_ROUTE` socket and reads it on a thread of its own. It does not parse the
/// messages: after each wake-up it drains every message pending (so a burst, such as an
/// interface coming up with several addresses, costs one rescan) and computes the status afresh
/// from `getifaddrs(3)`:
/// - **online** when an interface other than loopback is up and running (`IFF_UP` and
///   `IFF_RUNNING`) and has an IPv4 address or an IPv6 address that is not link-local
///   (fe80::/10);
/// - ``NetworkStatus/interfaces`` names those interfaces, sorted;
/// - ``NetworkStatus/isMetered`` is what the `isMetered` predicate given to ``init(isMetered:)``
///   says of those names. Linux has no notion of a metered link (NetworkManager keeps its own,
///   over D-Bus), so the default, ``looksLikeMobileBroadband(_:)``, guesses from the names.
///
/// If the socket cannot be opened (no netlink in a sandbox, a seccomp filter, a system that is
/// not Linux) the monitor is blind: it reports ``NetworkStatus/online`` and never changes, as the
/// protocol requires, and ``isObserving`` is `false`. If the socket fails later (the kernel
/// reports anything but a dropped message), the monitor turns blind the same way: it reports
/// ``NetworkStatus/online`` once and stops watching.
///
/// Call ``stop()`` (or drop the last reference) to end the thread, close the descriptors and
/// finish every status stream.
public final class NetlinkNetworkMonitor: NetworkMonitor {
    /// Decides, from the names of the interfaces that make the machine online (never empty),
    /// whether the network is metered.
    public typealias MeteredPredicate = @Sendable ([String]) -> Bool

    /// The name prefixes ``looksLikeMobileBroadband(_:)`` takes for mobile broadband: `ww`
    /// (the kernel's `wwan0` and udev's predictable `wwp…`/`wwx…` names), `rmnet` (Qualcomm
    /// modems, Android), `ppp` (dial-up and older 3G modems).
    ///
    /// USB tethering is left out on purpose: a phone shares its connection as `usb0` or, with
    /// predictable names, `enx…`, the same names as a USB Ethernet adapter on a wired network,
    /// so a name cannot tell them apart. Pass your own predicate to ``init(isMetered:)`` when
    /// you know better (for example from NetworkManager's `Metered` property).
    public static let mobileBroadbandPrefixes = ["ww", "rmnet", "ppp"]

    /// The default metered predicate: `true` when every interface that makes the machine online
    /// has a name starting with one of ``mobileBroadbandPrefixes``. A machine on both a modem
    /// and a wired or Wi-Fi network is taken as unmetered, since the system routes through the
    /// latter by default.
    public static func looksLikeMobileBroadband(_ interfaces: [String]) -> Bool {
        !interfaces.isEmpty
            && interfaces.allSatisfy { name in mobileBroadbandPrefixes.contains { name.hasPrefix($0) } }
    }

    private let broadcaster: StatusBroadcaster
    private let reader: Reader?
    private let thread: Locked<pthread_t?>

    /// Whether the monitor watches the network; `false` when it is blind (the socket could not
    /// be opened) and therefore always reports ``NetworkStatus/online``.
    public let isObserving: Bool

    /// Starts monitoring: opens the netlink socket, reads the interfaces and starts the reading
    /// thread.
    ///
    /// - Parameter isMetered: Tells from the names of the interfaces that make the machine
    ///   online whether the network is metered; the default is ``looksLikeMobileBroadband(_:)``.
    public convenience init(isMetered: @escaping MeteredPredicate = NetlinkNetworkMonitor.looksLikeMobileBroadband) {
        self.init(isMetered: isMetered, openSocket: Self.openRouteSocket, scan: InterfaceAddress.scan)
    }

    /// Starts monitoring with the socket `openSocket` returns (a descriptor the monitor then
    /// owns, or a negative number when it cannot be opened) and the interfaces `scan` returns
    /// (`nil` when they cannot be read: the status is left as it is). For tests.
    init(
        isMetered: @escaping MeteredPredicate,
        openSocket: () -> Int32,
        scan: @escaping @Sendable () -> [InterfaceAddress]?
    ) {
        let socket = openSocket()
        let wakeup = socket >= 0 ? Self.openWakeup() : -1
        guard socket >= 0, wakeup >= 0 else {
            if socket >= 0 { close(socket) }
            broadcaster = StatusBroadcaster(.online)
            reader = nil
            thread = Locked(nil)
            isObserving = false
            return
        }
        // The socket is bound before this first scan, so no change after it goes unnoticed.
        let initial = scan().map { NetworkStatus(entries: $0, isMetered: isMetered) } ?? .online
        let broadcaster = StatusBroadcaster(initial)
        let reader = Reader(socket: socket, wakeup: wakeup, scan: scan, isMetered: isMetered, broadcaster: broadcaster)
        let started = reader.start()
        if started == nil {
            close(socket)
            close(wakeup)
            broadcaster.publish(.online)
        }
        self.broadcaster = broadcaster
        self.reader = started == nil ? nil : reader
        thread = Locked(started)
        isObserving = started != nil
    }

    deinit {
        stop()
    }

    /// The status now; never blocks.
    public var currentStatus: NetworkStatus { broadcaster.current }

    /// Every change from now on, until ``stop()``.
    public func statusUpdates() -> AsyncStream<NetworkStatus> { broadcaster.subscribe() }

    /// Stops monitoring: wakes the reading thread and waits for it to end (it closes the socket
    /// as it goes), then finishes every status stream. Later calls do nothing; the status stays
    /// as it was.
    public func stop() {
        let handle = thread.withLock { handle -> pthread_t? in
            defer { handle = nil }
            return handle
        }
        if let handle, let reader {
            reader.wake()
            if pthread_equal(handle, pthread_self()) != 0 {
                // Stopped from the reading thread itself (by the metered predicate, say): it
                // ends, and closes its descriptors, when control returns to its loop.
                pthread_detach(handle)
            } else {
                pthread_join(handle, nil)
            }
        }
        broadcaster.finish()
    }

    // MARK: Test hooks

    /// The reading thread's kernel id while it runs (`nil` before it starts, when blind, or
    /// after it ended).
    var _readerThreadID: pid_t? { reader?.threadID }

    /// The socket and the wake-up descriptor (`nil` when blind); they are closed once the
    /// thread has ended.
    var _descriptors: (socket: Int32, wakeup: Int32)? { reader.map { ($0.socket, $0.wakeup) } }

    /// Whether the reading thread still watches the socket (`false` once it turned blind).
    var _isWatchingSocket: Bool { reader?.isWatching ?? false }

    // MARK: Opening

    private static func openRouteSocket() -> Int32 {
        #if os(Linux)
        return tessera_netlink_open_route_monitor()
        #else
        return -1
        #endif
    }

    private static func openWakeup() -> Int32 {
        #if os(Linux)
        return tessera_eventfd_open()
        #else
        return -1
        #endif
    }
}

/// The reading thread's state, apart from the monitor so that the thread does not keep the
/// monitor alive (dropping the last reference to the monitor stops it).
private final class Reader: Sendable {
    let socket: Int32
    let wakeup: Int32
    private let scan: @Sendable () -> [InterfaceAddress]?
    private let isMetered: NetlinkNetworkMonitor.MeteredPredicate
    private let broadcaster: StatusBroadcaster
    private let runningThreadID = Atomic<Int32>(0)
    private let watching = Atomic(true)

    init(
        socket: Int32, wakeup: Int32, scan: @escaping @Sendable () -> [InterfaceAddress]?,
        isMetered: @escaping NetlinkNetworkMonitor.MeteredPredicate, broadcaster: StatusBroadcaster
    ) {
        self.socket = socket
        self.wakeup = wakeup
        self.scan = scan
        self.isMetered = isMetered
        self.broadcaster = broadcaster
    }

    var threadID: pid_t? {
        let id = runningThreadID.load(ordering: .acquiring)
        return id == 0 ? nil : id
    }

    var isWatching: Bool { watching.load(ordering: .acquiring) }

    /// Starts the thread, which owns the descriptors from then on; `nil` when it cannot start.
    func start() -> pthread_t? {
        let context = Unmanaged.passRetained(self).toOpaque()
        var handle = pthread_t()
        let result = pthread_create(
            &handle, nil,
            { context in
                let reader = Unmanaged<Reader>.fromOpaque(context!).takeRetainedValue()
                reader.run()
                return nil
            }, context)
        guard result == 0 else {
            Unmanaged<Reader>.fromOpaque(context).release()
            return nil
        }
        return handle
    }

    /// Makes the thread leave its loop.
    func wake() {
        #if os(Linux)
        _ = tessera_eventfd_signal(wakeup)
        #endif
    }

    private func run() {
        #if os(Linux)
        tessera_set_thread_name("tessera-netlink")
        runningThreadID.store(tessera_gettid(), ordering: .releasing)
        #endif
        defer {
            close(socket)
            close(wakeup)
            runningThreadID.store(0, ordering: .releasing)
        }
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        // poll(2) ignores an entry with a negative descriptor: the socket's, once it failed.
        var descriptors = [
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeup, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            descriptors[0].revents = 0
            descriptors[1].revents = 0
            if poll(&descriptors, nfds_t(descriptors.count), -1) < 0 {
                if errno == EINTR { continue }
                turnBlind(&descriptors)
                // Out of memory, most likely: give it time rather than spin.
                usleep(100_000)
                continue
            }
            if descriptors[1].revents != 0 { return }
            let events = Int32(descriptors[0].revents)
            guard events != 0 else { continue }
            if events & Int32(POLLNVAL | POLLHUP) != 0 || !drain(&buffer) {
                turnBlind(&descriptors)
                continue
            }
            rescan()
        }
    }

    /// Reads every message pending; `false` when the socket failed for good.
    private func drain(_ buffer: inout [UInt8]) -> Bool {
        // Bounded, so that a flood cannot delay the rescan (and the wake-up check) for long.
        for _ in 0..<1024 {
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count > 0 { continue }
            // A netlink socket never reads as empty; a stream socket does at its end.
            if count == 0 { return false }
            switch errno {
            case EAGAIN, EWOULDBLOCK: return true
            // The socket's buffer overflowed and messages were lost: the rescan makes up for them.
            case ENOBUFS, EINTR: continue
            default: return false
            }
        }
        return true
    }

    private func rescan() {
        guard let entries = scan() else { return }
        broadcaster.publish(NetworkStatus(entries: entries, isMetered: isMetered))
    }

    private func turnBlind(_ descriptors: inout [pollfd]) {
        descriptors[0].fd = -1
        watching.store(false, ordering: .releasing)
        broadcaster.publish(.online)
    }
}
