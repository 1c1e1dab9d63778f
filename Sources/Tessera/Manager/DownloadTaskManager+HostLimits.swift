/// One host's segment transfers in a manager, as a fleet worker reads them.
package struct HostTransfers: Sendable, Hashable {
    /// Slots held now (transfers in flight or about to start).
    package var inFlight: Int
    /// Segments of running tasks waiting for a slot of the host.
    package var waiting: Int

    package init(inFlight: Int, waiting: Int) {
        self.inFlight = inFlight
        self.waiting = waiting
    }
}

extension DownloadTaskManager {
    /// Every host with transfers in flight or waiting, with their counts: what a fleet worker
    /// asks its share of a fleet-wide per-host limit for.
    package func hostTransfers() -> [String: HostTransfers] {
        let none = HostTransfers(inFlight: 0, waiting: 0)
        var result: [String: HostTransfers] = [:]
        for (host, count) in scheduler.transfersByHost { result[host, default: none].inFlight = count }
        for (host, count) in scheduler.demandByHost { result[host, default: none].waiting = count }
        return result
    }

    /// At most `limit` transfers to `host` (a `host:port`) from now on, below
    /// ``Configuration/maxConcurrentSegmentsPerHost``; `nil` clears the host's own limit (back to
    /// ``Configuration/unlistedHostLimit``). A lower limit stops nothing: the transfers above it
    /// run to their end, and the host gets no new one until it is below the limit.
    package func setHostLimit(_ limit: Int?, for host: String) {
        apply(scheduler.handle(.hostLimit(host, limit)))
    }
}
