import Foundation

/// The environment: free space, the network and its probe, and the tasks the manager owns.
extension DownloadTaskManager {
    func startOnce() {
        guard !started else { return }
        started = true
        let inbox = self.inbox
        inboxDrain = Task { [weak self] in
            var spent: [RunTicket] = []
            while let tickets = await inbox.take(recycling: spent) {
                guard let self else { return }
                await self.drain(tickets)
                spent = tickets
            }
        }
        if let policy = configuration.diskSpace {
            let interval = policy.checkInterval
            own { [weak self] in
                // The manager is held only while it checks, not through the sleep: one let go
                // without shutdown() is freed (see deinit).
                while !Task.isCancelled {
                    guard await self?.checkDiskSpaceNow() != nil else { return }
                    try? await Task.sleep(for: interval)
                }
            }
        }
        if let monitor = configuration.networkMonitor {
            let updates = monitor.statusUpdates()
            own { [weak self] in
                for await status in updates {
                    guard let self else { return }
                    await self.networkChanged(status)
                }
            }
        }
    }

    /// Checks free space now: warns when low, interrupts running tasks when critical, resumes
    /// the ones it interrupted when space is back above the warning threshold.
    public func checkDiskSpace() async {
        await checkDiskSpaceNow()
    }

    func checkDiskSpaceNow() async {
        guard let diskGate else { return }
        diskCheckNumber += 1
        let number = diskCheckNumber
        let previous = scheduler.disk
        let (level, free) = await executor.run { diskGate.level(after: previous) }
        // A check started meanwhile measured later: this reading is stale (applied, a reading
        // of a full disk taken before the space came back would stop the resumed tasks again).
        guard number == diskCheckNumber else { return }
        lastFreeBytes = free
        bytesSinceDiskCheck = 0
        diskGate.noteLevel(level)
        guard level != scheduler.disk else { return }
        if level != .critical { diskGate.clearFull() }
        let freeText = free.map { "\($0 / 1_000_000) MB free" } ?? "free space unknown"
        apply(scheduler.handle(.diskLevel(level, free: freeText)))
    }

    func networkChanged(_ status: NetworkStatus) {
        apply(scheduler.handle(.network(status)))
    }

    func networkWaitExpired(_ handle: TaskHandle, wait: Int, after limit: Duration) {
        guard !isShutDown, let task = byHandle[handle], scheduler.entry(handle)?.networkWaits == wait, state(of: task) == .interrupted(.network)
        else { return }
        let last = task.lastError ?? DownloadError(.networkUnreachable, "the host could not be reached")
        var error = last
        error.message = "\(last.message) (gave up after waiting \(limit) for the host)"
        task.lastError = error
        hub.emit(.taskError(task.id, error, willRetry: false))
        apply(scheduler.handle(.networkWaitExpired(handle, wait: wait)))
    }

    /// While tasks wait for the network, probes their hosts with backoff (a monitor may not
    /// see a server's own network coming back); a host that answers anything resumes its tasks.
    func startProber() {
        guard prober == nil, !isShutDown else { return }
        let configured = configuration.networkProbeBackoff
        prober = Task { [weak self] in
            var backoff = ProbeBackoff(initial: configured.initial, maximum: configured.maximum)
            while !Task.isCancelled {
                try? await Task.sleep(for: backoff.delay)
                guard let self, let hosts = await self.hostsToProbe() else { return }
                var reached = false
                for host in hosts where await self.probe(host) {
                    await self.hostReachable(host)
                    reached = true
                }
                backoff.roundEnded(reached: reached)
            }
        }
    }

    /// The hosts to probe; `nil` ends the prober (no task waits any more).
    func hostsToProbe() -> [String]? {
        guard scheduler.anyWaitsForNetwork, !isShutDown else {
            prober = nil
            return nil
        }
        return scheduler.network.isOnline ? scheduler.hostsToProbe : []
    }

    nonisolated func probe(_ host: String) async -> Bool {
        guard let url = URL(string: "http://\(host)/") else { return false }
        let request = TransferRequest(url: url, method: .head, destination: .discard, timeout: .seconds(10))
        do {
            _ = try await engine.transfer(request)
            return true
        } catch let error as DownloadError {
            // Any answer, even an error status, means the host is reachable again.
            return !error.isConnectivity && error.code != .timeout
        } catch {
            return false
        }
    }

    func hostReachable(_ host: String) {
        apply(scheduler.handle(.hostReachable(host)))
    }

    /// Runs `body` as a task the manager owns (``shutdown()`` cancels and awaits it).
    @discardableResult
    func own(_ body: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        let key = UUID()
        let task = Task { [weak self] in
            await body()
            await self?.disown(key)
        }
        owned[key] = task
        return task
    }

    func finishDeletion(_ id: DownloadTaskID) {
        deletions[id] = nil
    }

    func disown(_ key: UUID) {
        owned[key] = nil
    }
}
