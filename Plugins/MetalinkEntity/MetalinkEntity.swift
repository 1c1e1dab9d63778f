import Foundation
import Tessera

/// The stored state of a ``MetalinkEntity``: which document, which file in it.
public struct MetalinkEntityPayload: Codable, Sendable, Hashable {
    /// The Metalink document's URL, as the user gave it (without a fragment).
    public var metalinkURL: URL
    /// The `name` of the file in the document, exactly as written there.
    public var fileName: String
    /// Mirror locations (ISO 3166-1 codes, lowercase) to try before the others, from
    /// `--plugin-arg metalink:location=de,fr`; `nil` for none.
    public var preferredLocations: [String]?

    /// Creates a payload.
    public init(metalinkURL: URL, fileName: String, preferredLocations: [String]? = nil) {
        self.metalinkURL = metalinkURL
        self.fileName = fileName
        self.preferredLocations = preferredLocations
    }
}

/// One file of a Metalink document (Metalink 4, RFC 5854; and Metalink 3.0): mirrors in priority
/// order, the strongest whole-file hash, and piece hashes that make the file a set of byte
/// ranges each verified on its own (a bad piece is fetched again from the next mirror).
///
/// A Metalink document is a group: ``EntityRegistry/makeEntities(for:context:)`` fetches it and
/// makes one entity per `<file>`, keyed `<metalink URL>|<file name>` and grouped under the
/// Metalink's URL. The document is read as a stream, never held as a tree; each entity keeps
/// its own file's details for its first resolve, and fetches the document again (fresh mirrors,
/// signed URLs) when it resolves later. It describes only its own file, so a file with a hostile name or a broken
/// element fails alone (``DownloadError/Code/unsafePath``, ``DownloadError/Code/manifestInvalid``)
/// while the others download.
///
/// ```swift
/// let registry = EntityRegistry()
/// MetalinkEntity.register(in: registry)
/// let entities = try await registry.makeEntities(
///     for: EntityInput("https://example.com/release.meta4"), context: ResolveContext(engine: engine))
/// for entity in entities { try await manager.start(entity) }
/// ```
///
/// ``EntityRegistry/makeEntity(for:)`` cannot fetch, so it refuses Metalink inputs with
/// ``DownloadError/Code/invalidRequest`` and points to `makeEntities`.
public final class MetalinkEntity: PayloadEntity<MetalinkEntityPayload>, DownloadParserProtocol, @unchecked Sendable {
    /// `metalink`.
    override public class var entityType: String { "metalink" }

    /// The plugin's name, also the prefix of its arguments (`--plugin-arg metalink:location=de`).
    public static let pluginName = "metalink"

    /// The `Content-Type`s of Metalink documents: `application/metalink4+xml` (RFC 5854) and
    /// `application/metalink+xml` (Metalink 3).
    public static let contentTypes = ["application/metalink4+xml", "application/metalink+xml"]

    /// Accepts http(s) URLs whose path ends in `.meta4` or `.metalink` (a query may follow), and
    /// URLs a probe found to be served with a Metalink `Content-Type`. Expands the document into
    /// one entity per file.
    public static let matcher = EntityMatcher(
        plugin: pluginName,
        summary: "Metalink 4 (.meta4) and 3 (.metalink) documents: one task per file, mirrors, piece hashes",
        rules: [.pathExtensions(["meta4", "metalink"]), .contentType(contentTypes)],
        expand: { input, key, context in
            try await MetalinkEntity.entities(for: input, key: key, context: context)
        },
        make: { input, _ in
            throw DownloadError(
                .invalidRequest,
                "\"\(MetalinkDocument.printable(input.text))\" is a Metalink document, which stands for several files: "
                    + "make its entities with EntityRegistry.makeEntities(for:context:), which fetches it")
        })

    /// The matchers to register: ``matcher``.
    public static var matchers: [EntityMatcher] { [matcher] }

    /// Registers the entity type and its matchers.
    public static func register(in registry: EntityRegistry) {
        registry.register(MetalinkEntity.self, matchers: matchers)
    }

    /// Creates the entity for the file `fileName` of the Metalink at `metalinkURL` (its fragment
    /// is dropped): key `<metalink URL>|<file name>` (`%`, `#` and control characters of the name
    /// percent-encoded, so the task ID parses back), grouped under the Metalink's URL.
    public convenience init(
        metalinkURL: URL, fileName: String, preferredLocations: [String] = [], destinationDirectory: String = ""
    ) {
        let url = Self.withoutFragment(metalinkURL)
        self.init(
            payload: MetalinkEntityPayload(
                metalinkURL: url, fileName: fileName, preferredLocations: preferredLocations.isEmpty ? nil : preferredLocations),
            entityKey: url.absoluteString + "|" + Self.escapedKeyPart(fileName),
            title: MetalinkDocument.printable(fileName), aggregationKey: url.absoluteString,
            destinationDirectory: destinationDirectory)
    }

    /// Fetches the Metalink `key` names and returns one entity per file, in document order (a
    /// second file with the same name is left out, with a warning).
    ///
    /// The document is read as a stream (``MetalinkStreamReader``), one file at a time, and
    /// never held as a tree: each entity keeps its own file's details for its first resolve. A
    /// file whose details are broken fails alone when its entity resolves; a document that is
    /// broken as a whole fails here. Arguments: `metalink:location=de,fr` tries mirrors in those
    /// countries first.
    public static func entities(for input: EntityInput, key: String, context: ResolveContext) async throws(DownloadError)
        -> [MetalinkEntity]
    {
        guard let url = URL(string: key) else {
            throw DownloadError(.invalidRequest, "\"\(MetalinkDocument.printable(key))\" is not a URL")
        }
        let metalinkURL = withoutFragment(url)
        let reader = try await streamReader(metalinkURL, context: context)
        let locations = preferredLocations(input.arguments)
        var seen = Set<String>()
        var entities: [MetalinkEntity] = []
        while let item = try reader.next() {
            let entry = item.entry
            guard seen.insert(entry.name).inserted else {
                context.logger.warning(
                    "the Metalink lists a second file named \"\(MetalinkDocument.printable(entry.name))\" (line \(entry.line)); only the first is downloaded",
                    metadata: ["metalink": "\(metalinkURL.absoluteString)"])
                continue
            }
            let entity = MetalinkEntity(
                metalinkURL: metalinkURL, fileName: entry.name, preferredLocations: locations,
                destinationDirectory: input.destinationDirectory)
            // The reader has the version once it has read a file.
            entity.prefetched.keep(PrefetchedFile.Kept(name: entry.name, file: item.file, url: reader.url, version: reader.version!))
            entities.append(entity)
        }
        return entities
    }

    /// Fetches the document at `url` and prepares to read it as a stream, with the context's
    /// limits (at most `maxSegments` files, and pieces in a file).
    static func streamReader(_ url: URL, context: ResolveContext) async throws(DownloadError) -> MetalinkStreamReader {
        let source = try await context.fetch(url)
        var options = XMLParseOptions()
        options.maxDocumentSize = min(options.maxDocumentSize, context.maxDocumentSize)
        return try MetalinkStreamReader(
            data: source.data, url: source.url, maxFiles: context.maxSegments, maxPieces: context.maxSegments, options: options)
    }

    /// This file as ``entities(for:key:context:)`` read it from the document it fetched, for the
    /// entity's first resolve soon after: one request and one parse for a document of N files,
    /// not N + 1 of each. Never stored: a restored or later resolve fetches the document again
    /// (fresh mirrors, signed URLs).
    let prefetched = PrefetchedFile()

    /// A file's details read from a fetched document, good for one use within a minute (a
    /// download of thousands of files that starts later reads the document again).
    /// (An `NSLock`, not `Synchronization.Mutex`: ThreadSanitizer sees pthread locks only; one
    /// for all entities, each taking its file once: a lock each was an object and a mutex for
    /// every file of a Metalink of 100,000.)
    final class PrefetchedFile: @unchecked Sendable {
        /// The file (or why it could not be read) and the document's URL and version.
        struct Kept {
            var name: String
            var file: Result<MetalinkFile, DownloadError>
            var url: URL
            var version: MetalinkDocument.Version
        }

        private static let lock = NSLock()
        /// Boxed: an entity that has taken its file (or never had one) holds no room for it.
        private var value: Box?

        private final class Box {
            let kept: Kept
            let at: ContinuousClock.Instant
            init(_ kept: Kept, at: ContinuousClock.Instant) { (self.kept, self.at) = (kept, at) }
        }

        func keep(_ kept: Kept) {
            let box = Box(kept, at: .now)
            Self.lock.withLock { value = box }
        }

        /// How long details read from a fetched document stand for it (then it is fetched again:
        /// fresh mirrors, signed URLs).
        static let lifetime: Duration = .seconds(60)

        /// What was kept, once, if it is younger than ``lifetime``.
        func take() -> Kept? {
            Self.lock.withLock {
                defer { value = nil }
                guard let value, ContinuousClock.now - value.at < Self.lifetime else { return nil }
                return value.kept
            }
        }
    }

    /// The files that follow one a first resolve fetched the document again for, read on from
    /// there: the resolves of the files after it take their details from here, within the same
    /// minute as kept details (``PrefetchedFile``), instead of fetching the document once each.
    /// A list started more than a minute after its expansion (slow mirrors, thousands of files)
    /// or restored after a restart fetches and reads the document once per ``window`` files
    /// (or per minute), not once per file: for 100,000 files the per-file reads were quadratic,
    /// 19 MB fetched and read up to each file.
    ///
    /// The read ahead stops at ``window`` files or at the first fault of the document (a file
    /// after it fetches the document itself and meets the fault, as before), and one document's
    /// read replaces the one before it.
    ///
    /// One fetch at a time per document: the first resolve that finds nothing kept fetches it
    /// (``claim(_:of:)`` says ``Claim/fetch(_:)``), and the resolves of other files that come
    /// while it does wait for its read ahead (``Claim/wait(_:)``) instead of each fetching the
    /// whole document at once, which under a tight `--limit-rate` shared the limit between as
    /// many copies of it as there were resolves.
    final class ReadAhead: @unchecked Sendable {
        static let shared = ReadAhead()
        /// Files read ahead of the one a document was fetched for.
        static let window = 8_192
        /// How many fetches by others a resolve waits for before it fetches the document itself
        /// (a file before every fetcher's is not read ahead by any of them).
        static let maxWaits = 2

        private let lock = NSLock()
        private var documents: [URL: (at: ContinuousClock.Instant, files: [String: PrefetchedFile.Kept])] = [:]
        private var flights: [URL: Flight] = [:]

        /// A fetch of a document under way for one resolve. (Guarded by the read-ahead's lock.)
        final class Flight: @unchecked Sendable {
            fileprivate var landed = false
            fileprivate var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
            /// Waiters cancelled before they were parked: they do not park.
            fileprivate var cancelled: Set<Int> = []
            fileprivate var nextWaiter = 0
        }

        /// What a resolve that has no kept details does.
        enum Claim {
            /// The details, read ahead by another resolve.
            case kept(PrefetchedFile.Kept)
            /// Fetch the document, read ahead, then ``land(_:of:)`` the flight.
            case fetch(Flight)
            /// Another resolve is fetching the document: ``wait(for:)``, then claim again.
            case wait(Flight)
        }

        /// The details of `name` if read ahead, else the fetch to make or to wait for.
        func claim(_ name: String, of url: URL) -> Claim {
            lock.withLock {
                if let kept = take(name, of: url) { return .kept(kept) }
                if let flight = flights[url] { return .wait(flight) }
                let flight = Flight()
                flights[url] = flight
                return .fetch(flight)
            }
        }

        /// Ends `flight` (read ahead, failed or cancelled alike): the resolves waiting for it
        /// go on.
        func land(_ flight: Flight, of url: URL) {
            let waiters = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
                if flights[url] === flight { flights[url] = nil }
                flight.landed = true
                defer { flight.waiters = [:] }
                return Array(flight.waiters.values)
            }
            for waiter in waiters { waiter.resume() }
        }

        /// Returns once `flight` has landed, or at once when the waiting task is cancelled.
        func wait(for flight: Flight) async {
            let id = lock.withLock { () -> Int in
                flight.nextWaiter += 1
                return flight.nextWaiter
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let goOn = lock.withLock { () -> Bool in
                        if flight.landed || flight.cancelled.remove(id) != nil { return true }
                        flight.waiters[id] = continuation
                        return false
                    }
                    if goOn { continuation.resume() }
                }
            } onCancel: {
                let parked = lock.withLock { () -> CheckedContinuation<Void, Never>? in
                    if let parked = flight.waiters.removeValue(forKey: id) { return parked }
                    if !flight.landed { flight.cancelled.insert(id) }
                    return nil
                }
                parked?.resume()
            }
        }

        /// Resolves waiting for a fetch of the document at `url` (for tests).
        func waitingResolves(for url: URL) -> Int {
            lock.withLock { flights[url]?.waiters.count ?? 0 }
        }

        /// The details of `name` read ahead in the document at `url` within the minute, once
        /// (under the lock).
        private func take(_ name: String, of url: URL) -> PrefetchedFile.Kept? {
            guard let document = documents[url] else { return nil }
            guard ContinuousClock.now - document.at < PrefetchedFile.lifetime else {
                documents[url] = nil
                return nil
            }
            return documents[url]?.files.removeValue(forKey: name)
        }

        /// Reads on from the end of `name` (just read from `reader`, after the files named
        /// `before`) and keeps what it reads.
        func read(after name: String, passing before: Set<String>, in reader: MetalinkStreamReader, of url: URL) {
            let at = ContinuousClock.now
            var files: [String: PrefetchedFile.Kept] = [:]
            var seen = before
            seen.insert(name)
            // (A fault of the document ends the read: the files after it are not described.)
            while files.count < Self.window, let item = try? reader.next() {
                // The first file of a name is the one downloaded, as in the expansion.
                guard seen.insert(item.entry.name).inserted else { continue }
                files[item.entry.name] = PrefetchedFile.Kept(name: item.entry.name, file: item.file, url: reader.url, version: reader.version!)
            }
            lock.withLock {
                // (Documents older than a minute go too: a daemon keeps nothing for lists it no
                // longer resolves.)
                documents = documents.filter { at - $0.value.at < PrefetchedFile.lifetime }
                documents[url] = files.isEmpty ? nil : (at, files)
            }
        }
    }

    /// A first attempt's details: kept at the expansion, or read ahead by another resolve
    /// (waiting for a fetch of the document under way, at most ``ReadAhead/maxWaits`` times);
    /// else the fetch this resolve makes, the others waiting for it.
    private func firstAttemptDetails(of url: URL) async -> (kept: PrefetchedFile.Kept?, flight: ReadAhead.Flight?) {
        if let kept = prefetched.take() { return kept.name == payload.fileName ? (kept, nil) : (nil, nil) }
        var waits = 0
        while true {
            switch ReadAhead.shared.claim(payload.fileName, of: url) {
            case .kept(let kept):
                return kept.name == payload.fileName ? (kept, nil) : (nil, nil)
            case .fetch(let flight):
                return (nil, flight)
            case .wait(let flight):
                // (Waited enough: fetched on its own, beside the fetch under way.)
                guard waits < ReadAhead.maxWaits else { return (nil, nil) }
                waits += 1
                await ReadAhead.shared.wait(for: flight)
                // (A cancelled resolve fetches nothing: its fetch fails at once.)
                if Task.isCancelled { return (nil, nil) }
            }
        }
    }

    /// Resolves of files of the Metalink at `url` waiting for another's fetch of it (for tests).
    package static func resolvesWaitingForFetch(of url: URL) -> Int {
        ReadAhead.shared.waitingResolves(for: url)
    }

    /// Describes this entity's file: on the first attempt from the details kept when the
    /// document was expanded (or read ahead for another file's resolve within the minute,
    /// ``ReadAhead``), else from the document fetched again and read as a stream up to this
    /// file's end (fresh mirrors, signed URLs).
    ///
    /// A file name that would leave the destination directory is refused with
    /// ``DownloadError/Code/unsafePath`` before anything is fetched.
    public func resolve(in context: ResolveContext) async throws -> DownloadManifest {
        let url = payload.metalinkURL
        do {
            _ = try SafePath.relative(payload.fileName)
        } catch {
            throw DownloadError(
                .unsafePath, "\(error.message); the Metalink \(url.absoluteString) names it, and it is not downloaded",
                url: url.absoluteString)
        }
        let file: MetalinkFile, source: URL, version: MetalinkDocument.Version
        let (kept, flight) = context.attempt == 1 ? await firstAttemptDetails(of: url) : (nil, nil)
        if let kept {
            file = try kept.file.get()
            (source, version) = (kept.url, kept.version)
        } else {
            // Read as a stream, up to this file's end (a first attempt as the fetch of the
            // document the others wait for).
            defer { if let flight { ReadAhead.shared.land(flight, of: url) } }
            let reader = try await Self.streamReader(url, context: context)
            // A first attempt reads ahead for the files after it (a retry reads for itself); the
            // names before it count there: a later file of one of those names is not downloaded.
            let readsAhead = context.attempt == 1
            var before = Set<String>()
            file = try reader.file(named: payload.fileName, passing: { if readsAhead { before.insert($0) } })
            // The reader has the version once it has read a file.
            (source, version) = (reader.url, reader.version!)
            if readsAhead { ReadAhead.shared.read(after: payload.fileName, passing: before, in: reader, of: url) }
        }
        for note in file.notes + file.skippedMirrors.map({ "mirror skipped: \($0)" }) {
            context.logger.debug("\(note)", metadata: ["metalink": "\(url.absoluteString)"])
        }
        return try Self.manifest(
            for: file, url: source, version: version, maxSegments: context.maxSegments, splitting: context.splitting,
            preferredLocations: payload.preferredLocations ?? [])
    }

    /// The manifest of one file: a single output named after the file (sub-directories kept).
    ///
    /// - With `<pieces>` and a `<size>`: byte-range segments of the piece length (the last one
    ///   shorter), each with its piece hash, written in place (``DownloadOutput/Assembly/pieces``).
    /// - Without pieces, a size of at least `splitting.minimumSize`: ranges of
    ///   `splitting.pieceSize` without checksums (the whole-file hash checks them together).
    /// - Otherwise one segment, the whole file, checked with the whole-file hash.
    ///
    /// Every segment lists every mirror in order (``MetalinkFile/mirrors``, those in
    /// `preferredLocations` moved first); the output carries the strongest whole-file hash and the
    /// size.
    ///
    /// - Throws: ``DownloadError/Code/unsafePath`` for a name that would leave the directory,
    ///   ``DownloadError/Code/manifestTooLarge`` for more than `maxSegments` segments (counted
    ///   before any is made), and the first skipped mirror's error when no http(s) mirror is left.
    package static func manifest(
        for file: MetalinkFile, in document: MetalinkDocument, maxSegments: Int = 1_000_000,
        splitting: SplitPolicy = SplitPolicy(), preferredLocations: [String] = []
    ) throws(DownloadError) -> DownloadManifest {
        try manifest(
            for: file, url: document.url, version: document.version, maxSegments: maxSegments, splitting: splitting,
            preferredLocations: preferredLocations)
    }

    /// ``manifest(for:in:maxSegments:splitting:preferredLocations:)`` for a file read from the
    /// document at `url` of `version`.
    static func manifest(
        for file: MetalinkFile, url documentURL: URL, version: MetalinkDocument.Version, maxSegments: Int = 1_000_000,
        splitting: SplitPolicy = SplitPolicy(), preferredLocations: [String] = []
    ) throws(DownloadError) -> DownloadManifest {
        let shownName = MetalinkDocument.printable(file.name)
        let name: String
        do {
            name = try SafePath.relative(file.name)
        } catch {
            throw DownloadError(
                .unsafePath, "\(error.message) (the <file> at line \(file.line) of the Metalink \(documentURL.absoluteString))",
                url: documentURL.absoluteString)
        }
        guard !file.mirrors.isEmpty else {
            if file.skippedMirrors.isEmpty {
                throw DownloadError(
                    .manifestInvalid, "the file \"\(shownName)\" (line \(file.line)) has no <url> to download it from",
                    url: documentURL.absoluteString)
            }
            throw DownloadError(
                .unsafeInput,
                "the file \"\(shownName)\" (line \(file.line)) has no http or https mirror; skipped: "
                    + file.skippedMirrors.prefix(5).joined(separator: "; "),
                url: documentURL.absoluteString)
        }
        let wanted = Set(preferredLocations.map { $0.lowercased() })
        let ordered = file.mirrors.filter { $0.location.map(wanted.contains) ?? false }
            + file.mirrors.filter { !($0.location.map(wanted.contains) ?? false) }
        let urls = ordered.map(\.url)
        // The first mirrors with the same rank (priority, preference, preferred location) are
        // equally good: piece i starts at the i-th of them, so the pieces of a file spread over
        // them as aria2c's do, the others (and the rest) staying behind as fallbacks.
        let leaders = ordered.prefix { mirror in
            mirror.priority == ordered[0].priority && mirror.preference == ordered[0].preference
                && (mirror.location.map(wanted.contains) ?? false) == (ordered[0].location.map(wanted.contains) ?? false)
        }.count
        func mirrors(forPiece index: Int) -> [URL] {
            guard leaders > 1 else { return urls }
            let shift = index % leaders
            return Array(urls[shift..<leaders] + urls[0..<shift] + urls[leaders...])
        }
        let checksum = file.checksum

        var metadata = file.metadata
        metadata["metalink"] = version.rawValue
        metadata["mirrors"] = "\(urls.count)"
        // (The checksum is the output's, not repeated here: a Metalink of 100,000 files holds each once.)
        if !file.skippedMirrors.isEmpty { metadata["skippedMirrors"] = "\(file.skippedMirrors.count)" }

        let output: DownloadOutput
        if let size = file.size, size > 0, let pieces = file.pieces {
            // The reader checked that the count matches the size and the limit.
            let count = pieces.hashes.count
            guard count <= maxSegments else { throw tooMany(count, shownName, maxSegments) }
            var segments: [DownloadSegment] = []
            segments.reserveCapacity(count)
            for (index, hash) in pieces.hashes.enumerated() {
                let offset = Int64(index) * pieces.length
                let length = min(pieces.length, size - offset)
                segments.append(DownloadSegment(
                    urls: mirrors(forPiece: index), range: ByteRange(offset: offset, length: length), expectedSize: length,
                    checksum: hash, offset: offset))
            }
            metadata["pieces"] = "\(count) × \(pieces.length) bytes, \(pieces.algorithm.textualName)"
            output = DownloadOutput(name: name, assembly: .pieces, segments: segments, expectedSize: size, checksum: checksum)
        } else if let size = file.size, size > 0, size >= splitting.minimumSize, splitting.pieceSize > 0 {
            let count = size / splitting.pieceSize + (size % splitting.pieceSize == 0 ? 0 : 1)
            guard count <= Int64(maxSegments) else { throw tooMany(count, shownName, maxSegments) }
            var segments: [DownloadSegment] = []
            segments.reserveCapacity(Int(count))
            var offset: Int64 = 0
            while offset < size {
                let length = min(splitting.pieceSize, size - offset)
                segments.append(DownloadSegment(
                    urls: mirrors(forPiece: segments.count), range: ByteRange(offset: offset, length: length), expectedSize: length,
                    offset: offset))
                offset += length
            }
            output = DownloadOutput(name: name, assembly: .pieces, segments: segments, expectedSize: size, checksum: checksum)
        } else {
            guard maxSegments >= 1 else { throw tooMany(1, shownName, maxSegments) }
            output = DownloadOutput(
                name: name,
                segments: [DownloadSegment(urls: urls, expectedSize: file.size, checksum: checksum)],
                expectedSize: file.size, checksum: checksum)
        }
        return DownloadManifest(title: file.name, outputs: [output], sourceURL: documentURL, metadata: metadata)
    }

    // MARK: - Helpers

    private static func tooMany(_ count: some BinaryInteger, _ name: String, _ limit: Int) -> DownloadError {
        DownloadError(.manifestTooLarge, "the file \"\(name)\" would be \(count) segments, more than the limit of \(limit)")
    }

    /// `metalink:location=de,fr` as a list.
    static func preferredLocations(_ arguments: PluginArguments) -> [String] {
        (arguments[pluginName]["location"] ?? "").split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }.filter { !$0.isEmpty }
    }

    static func withoutFragment(_ url: URL) -> URL {
        guard url.fragment != nil, var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url }
        components.fragment = nil
        return components.url ?? url
    }

    /// The name with `%`, `#` and control characters percent-encoded.
    static func escapedKeyPart(_ name: String) -> String {
        var result = ""
        for scalar in name.unicodeScalars {
            switch scalar.value {
            case 0..<0x20, 0x7F, 0x23, 0x25:
                result += String(format: "%%%02X", scalar.value)
            default:
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
