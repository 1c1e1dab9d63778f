import CoreMetrics
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A content-addressed store of segment files: every segment is looked up here before any
/// request, and a hit is linked (or copied) into place without touching the network.
///
/// Entries are filed under the SHA-256 of their key (an entity's ``DownloadBaseEntity/cacheKey(for:)``,
/// which is the segment's checksum when the manifest gives one). Each entry is a data file and
/// a small JSON sidecar with its key, size and checksum; the data file is moved into place
/// before its sidecar, both by rename, so a crash never leaves a half-written entry that looks
/// complete. Hits are verified (size always, hash when known) and corrupt entries are evicted.
/// The least recently used entries go first when the cache is over its byte budget.
///
/// Entries may share their inode with outputs (hard links): editing a finished output in place
/// can change its cache entry, which the next hit's verification then catches when a checksum
/// is known.
public final class SegmentCache: Sendable {
    /// A cache entry.
    public struct Entry: Sendable, Hashable {
        /// The key it was inserted under.
        public var key: String
        /// Its data file.
        public var path: String
        /// Its size in bytes.
        public var size: Int64
        /// Its checksum, when one was known at insertion.
        public var checksum: Checksum?
    }

    private struct Sidecar: Codable {
        var key: String
        var size: Int64
        var checksum: Checksum?
    }

    private struct Indexed {
        var key: String
        var size: Int64
        var checksum: Checksum?
        var lastUse: Int64
    }

    private struct State {
        var entries: [String: Indexed] = [:]
        var totalBytes: Int64 = 0
        var clock: Int64 = 0
        var hits = 0
        var misses = 0
    }

    /// The directory holding the entries.
    public let directory: String
    /// Entries beyond this many bytes are evicted, least recently used first.
    public let byteBudget: Int64
    private let state = Locked(State())
    private let metrics: CacheMetrics

    /// Opens (creating it when missing) the cache in `directory` and indexes what is there;
    /// entries without a sidecar, or whose sidecar does not match, are removed.
    ///
    /// Lookups are counted through swift-metrics (`tessera_cache_hits_total`,
    /// `tessera_cache_misses_total`) with `metricsFactory`, or `MetricsSystem.factory` when it is
    /// `nil`; ``lookupCounts`` counts them too.
    public init(directory: String, byteBudget: Int64 = 4 << 30, metricsFactory: (any MetricsFactory)? = nil) throws(DownloadError) {
        self.directory = directory
        self.byteBudget = max(0, byteBudget)
        self.metrics = CacheMetrics(factory: metricsFactory ?? MetricsSystem.factory)
        try FileOperations.createDirectory(SafePath.join(directory, "tmp"))
        FileOperations.removeTree(SafePath.join(directory, "tmp"))
        try FileOperations.createDirectory(SafePath.join(directory, "tmp"))
        state.withLock { $0 = Self.scan(directory) }
    }

    /// Entries indexed now.
    public var entryCount: Int { state.withLock { $0.entries.count } }

    /// Bytes held now.
    public var totalBytes: Int64 { state.withLock { $0.totalBytes } }

    /// How many ``lookup(_:expectedSize:checksum:)`` calls found a verified entry, and how many
    /// did not, since the cache was opened (for metrics).
    public var lookupCounts: (hits: Int, misses: Int) { state.withLock { ($0.hits, $0.misses) } }

    /// Whether an entry is indexed for `key` (not verified).
    public func contains(_ key: String) -> Bool {
        state.withLock { $0.entries[Self.name(for: key)] != nil }
    }

    /// The size of the entry indexed for `key` (not verified), or `nil`.
    public func size(of key: String) -> Int64? {
        state.withLock { state in
            guard let entry = state.entries[Self.name(for: key)], entry.key == key else { return nil }
            return entry.size
        }
    }

    /// The verified entry for `key`, or `nil`. An entry whose size differs from its record or
    /// from `expectedSize`, or whose bytes do not match its (or the given) checksum, is evicted.
    public func lookup(_ key: String, expectedSize: Int64? = nil, checksum: Checksum? = nil) -> Entry? {
        let name = Self.name(for: key)
        guard let indexed = state.withLock({ $0.entries[name] }), indexed.key == key else {
            state.withLock { $0.misses += 1 }
            metrics.misses.increment()
            return nil
        }
        let path = dataPath(name)
        let onDisk = FileOperations.size(path)
        var valid = onDisk == indexed.size && (expectedSize.map { $0 == indexed.size } ?? true)
        if valid, let known = checksum ?? indexed.checksum {
            valid = (try? known.verify(fileAt: path)) != nil
        }
        guard valid else {
            remove(key)
            state.withLock { $0.misses += 1 }
            metrics.misses.increment()
            return nil
        }
        state.withLock { $0.hits += 1 }
        metrics.hits.increment()
        touch(name, path: path)
        return Entry(key: key, path: path, size: indexed.size, checksum: indexed.checksum ?? checksum)
    }

    /// Files the bytes at `path` under `key` (linking them when possible), replacing any entry
    /// of that key, then evicts least recently used entries over the budget.
    @discardableResult
    public func insert(_ key: String, from path: String, checksum: Checksum? = nil) throws(DownloadError) -> Entry {
        try insert(key, from: path, range: nil, checksum: checksum)
    }

    /// Files the bytes `range` selects in the file at `path` under `key` (a segment inside an
    /// output); copied, since they are not a file of their own.
    @discardableResult
    public func insert(_ key: String, from path: String, range: ByteRange?, checksum: Checksum? = nil) throws(DownloadError) -> Entry {
        let temporary = SafePath.join(directory, "tmp/\(UUID().uuidString)")
        let size: Int64
        if let range {
            guard let length = range.length else {
                throw DownloadError(.invalidRequest, "a cached range needs a length")
            }
            try FileOperations.copyRange(of: path, range.offset..<range.offset + length, to: temporary)
            size = length
        } else {
            guard let whole = FileOperations.size(path) else {
                throw DownloadError(.writeFailed, "cannot cache \(path): the file is missing")
            }
            size = whole
            try FileOperations.linkOrCopy(path, to: temporary)
        }
        let name = Self.name(for: key)
        let data = dataPath(name)
        try FileOperations.rename(temporary, to: data)
        CrashPoint.cacheData.reach()
        let sidecar = Sidecar(key: key, size: size, checksum: checksum)
        let encoded: Data
        do {
            encoded = try JSONEncoder().encode(sidecar)
        } catch {
            throw DownloadError(.writeFailed, "cannot encode a cache record: \(error)")
        }
        let temporarySidecar = SafePath.join(directory, "tmp/\(UUID().uuidString).json")
        guard FileManager.default.createFile(atPath: temporarySidecar, contents: encoded) else {
            FileOperations.remove(data)
            throw DownloadError(.writeFailed, "cannot write a cache record in \(directory)")
        }
        try FileOperations.rename(temporarySidecar, to: data + ".json")
        state.withLock { state in
            state.clock += 1
            if let old = state.entries[name] { state.totalBytes -= old.size }
            state.entries[name] = Indexed(key: key, size: size, checksum: checksum, lastUse: state.clock)
            state.totalBytes += size
        }
        evictOverBudget(keeping: name)
        return Entry(key: key, path: data, size: size, checksum: checksum)
    }

    /// Removes the entry of `key`.
    public func remove(_ key: String) {
        let name = Self.name(for: key)
        state.withLock { state in
            if let old = state.entries.removeValue(forKey: name) { state.totalBytes -= old.size }
        }
        FileOperations.remove(dataPath(name) + ".json")
        FileOperations.remove(dataPath(name))
    }

    /// Removes every entry.
    public func clear() {
        let names = state.withLock { state -> [String] in
            defer {
                state.entries.removeAll()
                state.totalBytes = 0
            }
            return Array(state.entries.keys)
        }
        for name in names {
            FileOperations.remove(dataPath(name) + ".json")
            FileOperations.remove(dataPath(name))
        }
    }

    /// Puts an entry's bytes at `path`: a hard link when possible, a copy otherwise; with
    /// `offset`, copied into the file at that offset (a piece of a larger output).
    public func place(_ entry: Entry, at path: String, offset: Int64? = nil) throws(DownloadError) {
        guard let offset else {
            try FileOperations.linkOrCopy(entry.path, to: path)
            return
        }
        try FileOperations.createParent(of: path)
        let output = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard output >= 0 else { throw FileOperations.systemError(errno, "could not open \(path)") }
        defer { close(output) }
        guard lseek(output, off_t(offset), SEEK_SET) >= 0 else {
            throw FileOperations.systemError(errno, "could not seek in \(path)")
        }
        try FileOperations.append(entry.path, to: output, destinationPath: path)
    }

    // MARK: - Internals

    /// The entry's file name: the SHA-256 of its key, under a directory of its first two digits.
    static func name(for key: String) -> String {
        Checksum.compute(.sha256, bytes: Array(key.utf8)).hexDigest
    }

    private func dataPath(_ name: String) -> String {
        SafePath.join(directory, "\(name.prefix(2))/\(name)")
    }

    private func touch(_ name: String, path: String) {
        state.withLock { state in
            state.clock += 1
            state.entries[name]?.lastUse = state.clock
        }
        // The data file's modification time keeps the order across restarts.
        _ = utimensat(AT_FDCWD, path, nil, 0)
    }

    private func evictOverBudget(keeping kept: String) {
        let victims = state.withLock { state -> [String] in
            guard state.totalBytes > byteBudget else { return [] }
            var victims: [String] = []
            for (name, entry) in state.entries.sorted(by: { $0.value.lastUse < $1.value.lastUse }) {
                guard state.totalBytes > byteBudget else { break }
                if name == kept { continue }
                state.entries[name] = nil
                state.totalBytes -= entry.size
                victims.append(name)
            }
            return victims
        }
        for name in victims {
            FileOperations.remove(dataPath(name) + ".json")
            FileOperations.remove(dataPath(name))
        }
    }

    /// Indexes the entries on disk; the oldest modification time is the least recently used.
    private static func scan(_ directory: String) -> State {
        var state = State()
        var found: [(name: String, indexed: Indexed, modified: Int64)] = []
        let fileManager = FileManager.default
        for fan in (try? fileManager.contentsOfDirectory(atPath: directory)) ?? [] where fan.count == 2 {
            let folder = SafePath.join(directory, fan)
            for file in (try? fileManager.contentsOfDirectory(atPath: folder)) ?? [] {
                let path = SafePath.join(folder, file)
                if file.hasSuffix(".json") {
                    if !FileOperations.exists(String(path.dropLast(5))) { FileOperations.remove(path) }
                    continue
                }
                guard let data = FileOperations.contents(path + ".json"),
                    let sidecar = try? JSONDecoder().decode(Sidecar.self, from: Data(data)), name(for: sidecar.key) == file
                else {
                    // No record (a crash between the two renames) or a foreign file.
                    FileOperations.remove(path)
                    FileOperations.remove(path + ".json")
                    continue
                }
                var info = stat()
                guard stat(path, &info) == 0 else { continue }
                let modified = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
                found.append((file, Indexed(key: sidecar.key, size: sidecar.size, checksum: sidecar.checksum, lastUse: 0), modified))
            }
        }
        for (order, item) in found.sorted(by: { $0.modified < $1.modified }).enumerated() {
            var indexed = item.indexed
            indexed.lastUse = Int64(order + 1)
            state.entries[item.name] = indexed
            state.totalBytes += indexed.size
        }
        state.clock = Int64(found.count)
        return state
    }
}
