import Foundation
import Testing

@testable import Tessera
import TesseraTesting

/// The rules every ``NetworkMonitor`` must keep (see the protocol's documentation), checked
/// against each implementation.
///
/// Not every monitor can be driven or stopped: the real netlink monitor follows the machine
/// (it is driven only by the event test in `NetlinkNetworkMonitorTests`), and
/// ``ManualNetworkMonitor`` has no way to be stopped, so "streams end on stop" cannot be asked
/// of it.
@Suite("NetworkMonitor conformance", .timeLimit(.minutes(2)))
struct NetworkMonitorConformanceTests {
    /// A monitor under test, with the means to drive and stop it when it has them.
    struct Subject: Sendable {
        let monitor: any NetworkMonitor
        /// Makes the monitor see `status` and waits until it has looked.
        let drive: (@Sendable (NetworkStatus) async -> Void)?
        /// Stops the monitor.
        let stop: (@Sendable () -> Void)?
        /// Releases what the test set up (after stopping).
        let cleanUp: @Sendable () -> Void
    }

    enum Kind: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// ``ManualNetworkMonitor``.
        case manual
        /// ``NetlinkNetworkMonitor`` reading a scripted socket and interface list.
        case netlinkScripted
        /// ``NetlinkNetworkMonitor`` on the machine's own netlink socket.
        case netlinkReal
        /// ``NetlinkNetworkMonitor`` whose socket could not be opened.
        case netlinkBlind

        var testDescription: String { rawValue }

        static let drivable: [Kind] = [.manual, .netlinkScripted]
        static let stoppable: [Kind] = [.netlinkScripted, .netlinkReal, .netlinkBlind]

        /// Starts a monitor of this kind at ``MonitorTestSupport/wired`` when it can choose.
        func make() -> Subject {
            switch self {
            case .manual:
                let monitor = ManualNetworkMonitor(MonitorTestSupport.wired)
                return Subject(monitor: monitor, drive: { monitor.set($0) }, stop: nil, cleanUp: {})
            case .netlinkScripted:
                let netlink = ScriptedNetlink(MonitorTestSupport.wired)
                let monitor = netlink.makeMonitor()
                return Subject(
                    monitor: monitor,
                    drive: { status in
                        if await !netlink.post(status) { Issue.record("the monitor did not rescan") }
                        // A rescan that finds a change publishes it right after reading.
                        _ = await MonitorTestSupport.waitUntil { monitor.currentStatus == status }
                    },
                    stop: { monitor.stop() },
                    cleanUp: {
                        monitor.stop()
                        netlink.closeTestEnd()
                    })
            case .netlinkReal:
                let monitor = NetlinkNetworkMonitor()
                return Subject(monitor: monitor, drive: nil, stop: { monitor.stop() }, cleanUp: { monitor.stop() })
            case .netlinkBlind:
                let monitor = NetlinkNetworkMonitor(
                    isMetered: NetlinkNetworkMonitor.looksLikeMobileBroadband, openSocket: { -1 }, scan: { nil })
                return Subject(monitor: monitor, drive: nil, stop: { monitor.stop() }, cleanUp: { monitor.stop() })
            }
        }
    }

    @Test("currentStatus is cheap and never blocks", arguments: Kind.allCases)
    func currentStatusDoesNotBlock(kind: Kind) async {
        let subject = kind.make()
        defer { subject.cleanUp() }
        let monitor = subject.monitor
        let elapsed = await ContinuousClock().measure {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        for _ in 0..<10_000 { _ = monitor.currentStatus }
                    }
                }
                // Reads keep up while the monitor is busy publishing.
                if let drive = subject.drive {
                    await drive(MonitorTestSupport.offline)
                    await drive(MonitorTestSupport.wired)
                }
            }
        }
        // A deadline that only a blocked read misses (the machine may be busy with other tests).
        #expect(elapsed < .seconds(20), "40,000 reads took \(elapsed)")
    }

    @Test("each stream yields only changes, in order, from its subscription on", arguments: Kind.drivable)
    func yieldsOnlyChanges(kind: Kind) async throws {
        let subject = kind.make()
        defer { subject.cleanUp() }
        let drive = try #require(subject.drive)
        #expect(subject.monitor.currentStatus == MonitorTestSupport.wired)

        let first = StatusRecorder(subject.monitor.statusUpdates())
        let second = StatusRecorder(subject.monitor.statusUpdates())
        defer {
            first.cancel()
            second.cancel()
        }
        // The same status twice in a row (including the current one) is not a change.
        for status in [
            MonitorTestSupport.wired, MonitorTestSupport.offline, MonitorTestSupport.offline,
            MonitorTestSupport.mobile, MonitorTestSupport.mobile, MonitorTestSupport.wired,
        ] {
            await drive(status)
        }
        let expected = [MonitorTestSupport.offline, MonitorTestSupport.mobile, MonitorTestSupport.wired]
        #expect(await first.waitForValues(expected.count))
        #expect(await second.waitForValues(expected.count))
        // Room for a wrong extra one: absence, which only watching for a while can show.
        #expect(await consistently(for: .milliseconds(100)) { first.values.count == expected.count && second.values.count == expected.count })
        #expect(first.values == expected)
        #expect(second.values == expected)
        #expect(subject.monitor.currentStatus == MonitorTestSupport.wired)

        // A later subscriber hears only what happens after it subscribed.
        let late = StatusRecorder(subject.monitor.statusUpdates())
        defer { late.cancel() }
        await drive(MonitorTestSupport.mobile)
        #expect(await late.waitForValues(1))
        #expect(await first.waitForValues(4))
        // Nor does anything else arrive (watched for a while, as absence must be).
        #expect(await consistently(for: .milliseconds(50)) { late.values.count == 1 && first.values.count == 4 })
        #expect(late.values == [MonitorTestSupport.mobile])
        #expect(first.values == expected + [MonitorTestSupport.mobile])
    }

    @Test("stopping ends every stream, and later ones at once", arguments: Kind.stoppable)
    func streamsEndOnStop(kind: Kind) async throws {
        let subject = kind.make()
        defer { subject.cleanUp() }
        let stop = try #require(subject.stop)
        let before = subject.monitor.currentStatus
        let recorders = (0..<3).map { _ in StatusRecorder(subject.monitor.statusUpdates()) }

        stop()
        for recorder in recorders {
            #expect(await recorder.waitForEnd())
        }
        let late = StatusRecorder(subject.monitor.statusUpdates())
        #expect(await late.waitForEnd())
        #expect(late.values.isEmpty)

        stop()  // a second stop does nothing
        #expect(subject.monitor.currentStatus == before)
        // No two statuses in a row are the same (the real monitor may have seen a change).
        for recorder in recorders {
            #expect(zip(recorder.values, recorder.values.dropFirst()).allSatisfy { $0 != $1 })
        }
    }

    @Test("a monitor that cannot observe reports online and never changes")
    func blindMonitorReportsOnline() async throws {
        let subject = Kind.netlinkBlind.make()
        defer { subject.cleanUp() }
        #expect(subject.monitor.currentStatus == .online)
        let recorder = StatusRecorder(subject.monitor.statusUpdates())
        // It never yields: absence, which only watching for a while can show.
        #expect(await consistently(for: .milliseconds(100)) { recorder.values.isEmpty })
        subject.stop?()
        #expect(await recorder.waitForEnd())
        #expect(recorder.values.isEmpty)
        #expect(subject.monitor.currentStatus == .online)
    }
}
