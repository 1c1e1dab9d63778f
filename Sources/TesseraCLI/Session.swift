import DASHEntity
import Foundation
import HLSEntity
import MetalinkEntity
import PlayurlEntity
import Tessera

/// Every plugin the command line knows, registered by its own `register(in:)`: no switch on
/// input kinds anywhere.
package func makeRegistry() -> EntityRegistry {
    let registry = EntityRegistry()  // DirectEntity: any http(s) URL, last resort
    PlayurlEntity.register(in: registry)
    DASHEntity.register(in: registry)
    MetalinkEntity.register(in: registry)
    HLSEntity.register(in: registry)
    return registry
}

/// What a command works with: the state directory (locked), the store, the cache, the engine
/// and the manager.
package struct Session {
    package let stateDirectory: String
    package let registry: EntityRegistry
    let engine: CurlEngine
    let store: any DownloadStore
    let cache: SegmentCache?
    package let manager: DownloadTaskManager
    let lock: StateLock
    let headers: HTTPHeaders
    let documentTimeout: Duration
    /// Where outputs go (absolute).
    package let downloadRoot: String

    package struct Settings {
        var downloadRoot: String
        var jobs: Int
        var segments: Int
        var connectionsPerFile: Int
        var network: NetworkOptions
        var state: StateOptions
        /// `-o TEMPLATE`: how files are named.
        var outputTemplate: OutputNameTemplate?
        /// How completed tasks' files are merged (`--no-merge`: `nil`); commands that only
        /// manage tasks (`pause`, `remove`) merge nothing.
        var merging: MergePolicy?
        /// How live streams are recorded.
        var live: LiveOptions?
        /// A fleet worker's store and write fence (`serve --fleet`) instead of the state
        /// directory's SQLite store.
        package var fleet: (store: any DownloadStore, fence: any TaskWriteFence)?
        /// Under a fleet-wide per-host limit (`serve --fleet-host-connections`): no transfer to a
        /// host until the fleet worker holds slots for it.
        package var fleetHostLimit: Int?

        /// Settings for a session (the defaults: `get`'s).
        package init(
            downloadRoot: String = "downloads", jobs: Int = 3, segments: Int = 16, connectionsPerFile: Int = SplitPolicy().maxConnections,
            network: NetworkOptions, state: StateOptions, outputTemplate: OutputNameTemplate? = nil, merging: MergePolicy? = nil,
            live: LiveOptions? = nil
        ) {
            self.downloadRoot = downloadRoot
            self.jobs = jobs
            self.segments = segments
            self.connectionsPerFile = connectionsPerFile
            self.network = network
            self.state = state
            self.outputTemplate = outputTemplate
            self.merging = merging
            self.live = live
        }
    }

    package static func open(_ settings: Settings) async throws -> Session {
        let stateDirectory = settings.state.directory
        let lock = try StateLock(directory: stateDirectory)
        // (Anything below that fails lets the state directory go again.)
        var opened = false
        defer { if !opened { lock.release() } }
        // The state file is opened (created, or its schema brought up to date) on another thread
        // while the engine and the entities are made (about a millisecond of every start).
        let fleetStore = settings.fleet?.store
        async let openedStore: any DownloadStore = try fleetStore ?? SQLiteDownloadStore(path: stateDirectory + "/tessera.sqlite")
        let cache = settings.state.noCache ? nil : try SegmentCache(directory: stateDirectory + "/cache")
        var engineConfiguration = CurlEngine.Configuration()
        engineConfiguration.maxConnections = max(16, settings.segments)
        engineConfiguration.maxConnectionsPerHost = max(1, settings.segments)
        engineConfiguration.maxActiveTransfers = max(64, settings.segments * 2)
        // (Receiving and writing on two cores: the scheduler keeps the totals.)
        engineConfiguration.threads = CurlEngine.Configuration.automaticThreads
        engineConfiguration.globalRateLimit = try settings.network.rateLimit()
        engineConfiguration.userAgent = settings.network.userAgent
            ?? "Tessera/\(Tessera.version) libcurl/\(CurlEngine.libcurlVersion)"
        if let proxy = settings.network.proxy {
            engineConfiguration.proxy = proxy.isEmpty ? .none : .url(proxy)
        }
        if let limit = settings.fleetHostLimit {
            // (curl keeps no more connections to one host than the fleet allows in all.)
            engineConfiguration.maxConnectionsPerHost = min(engineConfiguration.maxConnectionsPerHost, max(1, limit))
            // (No idle keep-alive connection outlives its transfer: the server sees the fleet's
            // transfers, not what each worker's cache keeps.)
            engineConfiguration.forbidsConnectionReuse = true
        }
        let engine = try CurlEngine(configuration: engineConfiguration)
        let headers = try settings.network.headerFields()
        var configuration = DownloadTaskManager.Configuration(downloadRoot: absolute(settings.downloadRoot))
        configuration.maxConcurrentTasks = max(1, settings.jobs)
        configuration.maxConcurrentSegments = max(1, settings.segments)
        configuration.splitting.maxConnections = max(1, settings.connectionsPerFile)
        configuration.headers = headers
        configuration.outputNameTemplate = settings.outputTemplate
        if let retries = settings.network.retries { configuration.retry.maxAttempts = retries }
        configuration.maxNetworkWait = settings.network.networkWait < 0 ? nil : .seconds(settings.network.networkWait)
        configuration.documentTimeout = settings.network.documentTimeout
        configuration.networkMonitor = NetlinkNetworkMonitor()
        configuration.merging = settings.merging
        settings.live?.apply(to: &configuration.live)
        configuration.writeFence = settings.fleet?.fence
        if settings.fleetHostLimit != nil { configuration.unlistedHostLimit = 0 }
        let registry = makeRegistry()
        let store: any DownloadStore
        do {
            store = try await openedStore
        } catch {
            await engine.shutdown()
            throw error
        }
        let manager = DownloadTaskManager(
            configuration: configuration, engine: engine, store: store, cache: cache, registry: registry)
        opened = true
        return Session(
            stateDirectory: stateDirectory, registry: registry, engine: engine, store: store, cache: cache,
            manager: manager, lock: lock, headers: headers, documentTimeout: settings.network.documentTimeout,
            downloadRoot: absolute(settings.downloadRoot))
    }

    /// A context for resolving inputs outside the manager (expansion, `tessera resolve`).
    package var resolveContext: ResolveContext {
        ResolveContext(engine: engine, headers: headers, documentTimeout: documentTimeout)
    }

    /// Keeps `session` (its manager and every task it knew) until the process exits: freeing
    /// them costs time no one waits for.
    static func keepUntilExit(_ session: Session) {
        kept.withLock { $0.append(session) }
    }

    private static let kept = Locked<[Session]>([])

    package func close() async {
        await manager.shutdown()
        await engine.shutdown()
        lock.release()
    }
}

/// One `tessera` at a time per state directory: an exclusive `flock` on `<dir>/lock`.
final class StateLock: Sendable {
    private let descriptor: Int32

    init(directory: String) throws {
        if let problem = writableDirectoryProblem(directory) {
            throw DownloadError(.storeFailure, "cannot use the state directory \(directory): \(problem)")
        }
        let path = directory + "/lock"
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw DownloadError(.storeFailure, "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = read(descriptor, &buffer, 32)
            let owner = count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : "?"
            close(descriptor)
            throw DownloadError(
                .storeFailure,
                "\(Self.busyPrefix) (pid \(owner)) is using the state directory \(directory); wait for it, or use --state-dir")
        }
        ftruncate(descriptor, 0)
        let pid = "\(getpid())\n"
        _ = pid.withCString { write(descriptor, $0, strlen($0)) }
    }

    func release() {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }

    private static let busyPrefix = "another tessera"

    /// Whether `error` says that another `tessera` holds the state directory.
    static func isBusy(_ error: any Error) -> Bool {
        guard let error = error as? DownloadError else { return false }
        return error.code == .storeFailure && error.message.hasPrefix(busyPrefix)
    }

    /// Whether a `tessera` holds `directory` now.
    static func isHeld(directory: String) -> Bool {
        let descriptor = open(directory + "/lock", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_SH | LOCK_NB) == 0 else { return true }
        flock(descriptor, LOCK_UN)
        return false
    }
}

/// Turns what the user typed into entities: the registry picks the plugin (by pattern, scheme,
/// or — for a URL only the plain-file plugin claims — the Content-Type a probe returns).
package struct InputResolver {
    /// Extensions that may name a manifest behind a script or an API (the manifest kinds'
    /// own extensions are matched by their plugins' patterns already).
    static let ambiguousExtensions: Set<String> = ["xml", "json", "php", "asp", "aspx", "jsp", "cgi", "pl", "do", "action", "txt"]

    /// Whether a URL that only the plain-file plugin claims is worth a probe of its
    /// Content-Type: it has no file extension (`/play?id=1`, `/manifest`) or one that scripts
    /// and APIs use. `…/file.iso` is a file: no request before the download (a list of
    /// thousands of plain URLs starts at once, as with aria2c).
    static func mayBeManifest(_ url: URL) -> Bool {
        let name = ResponseNaming.lastPathComponent(of: url)
        guard let dot = name.utf8.lastIndex(of: UInt8(ascii: ".")), dot != name.startIndex else { return true }
        let ext = name[name.utf8.index(after: dot)...].lowercased()
        // (An ASCII extension, as nearly every one is, is told by its bytes, without Unicode's tables.)
        let isWord = ext.utf8.allSatisfy { $0 < 0x80 }
            ? ext.utf8.allSatisfy { isalnum(Int32($0)) != 0 } : ext.allSatisfy { $0.isLetter || $0.isNumber }
        guard (1...5).contains(ext.count), isWord else { return true }
        return ambiguousExtensions.contains(ext)
    }

    let registry: EntityRegistry
    let context: ResolveContext
    let arguments: PluginArguments
    let format: FormatSelector?

    /// Resolves inputs with `registry`'s plugins; `format` picks the variants.
    package init(registry: EntityRegistry, context: ResolveContext, arguments: PluginArguments, format: FormatSelector?) {
        self.registry = registry
        self.context = context
        self.arguments = arguments
        self.format = format
    }

    /// `destinationDirectory`: where the outputs go, relative to the download root (`serve`'s RPC `dir`).
    package func entities(for text: String, destinationDirectory: String = "") async throws(DownloadError) -> [DownloadBaseEntity] {
        var input = try checkedInput(text, destinationDirectory: destinationDirectory)
        if let url = input.url, registry.match(input)?.matcher.plugin == "direct", Self.mayBeManifest(url) {
            // A manifest served without a telling extension is known by its Content-Type.
            if let probe = try? await context.probe(url), let type = probe.headers["Content-Type"] {
                input.contentType = type
            }
        }
        return try await registry.makeEntities(for: input, context: context)
    }

    /// The entities for `text` when no request is needed to tell them (a URL whose plugin is
    /// known by its form and that needs no document to expand, a `PLUGIN:KEY`); `nil` when it
    /// takes a request (a probe of the Content-Type, a Metalink to read), which
    /// ``entities(for:destinationDirectory:)`` makes. A list of thousands of plain URLs is
    /// turned into tasks without a suspension per line.
    func immediateEntities(for text: String, destinationDirectory: String = "") throws(DownloadError) -> [DownloadBaseEntity]? {
        let input = try checkedInput(text, destinationDirectory: destinationDirectory)
        guard let matched = registry.match(input), matched.matcher.expand == nil else { return nil }
        if let url = input.url, matched.matcher.plugin == "direct", Self.mayBeManifest(url) { return nil }
        return [try registry.makeEntity(for: input, matched: matched)]
    }

    private func checkedInput(_ text: String, destinationDirectory: String) throws(DownloadError) -> EntityInput {
        let input = EntityInput(text, arguments: arguments, format: format?.description, destinationDirectory: destinationDirectory)
        if input.url == nil, let scheme = URL(string: input.text)?.scheme?.lowercased(), input.text.contains("://") {
            throw DownloadError(.unsafeInput, "only http and https URLs can be downloaded, not \(UntrustedText.printable(scheme, limit: 20))")
        }
        if input.url == nil, input.pluginScheme == nil {
            throw DownloadError(.noMatchingEntity, "not a URL and not PLUGIN:KEY (see `tessera plugins`)")
        }
        return input
    }
}
