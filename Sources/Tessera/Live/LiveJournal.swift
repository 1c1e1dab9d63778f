import Foundation

/// The durable record of a live recording, beside the task's other work files
/// (`<root>/.tessera/work/<task>.live`): for each output, how many bytes of its partial file are
/// whole segments, the last segment dealt with, what was recorded and lost. It is written after
/// each segment's bytes are in the file, so a kill costs at most the segment in flight: the next
/// run cuts the file back to the bytes the record claims (a playable file: whole segments only),
/// and continues after the last segment without recording one twice.
struct LiveJournal: Codable, Sendable {
    /// One output's part.
    struct Output: Codable, Sendable {
        /// Bytes of the partial file that are whole segments (and their initialisation sections).
        var committedBytes: Int64 = 0
        /// The last segment dealt with.
        var tail: LiveTracker.Mark?
        var recordedSeconds: Double = 0
        var recordedSegments = 0
        var gapCount = 0
        var gapSeconds: Double = 0
        /// The most recent gaps (at most ``gapLimit``).
        var gaps: [LiveGap] = []
        /// The initialisation section written last (written again only when it changes).
        var initSection: DownloadSegment?
        /// The URLs of the last segments recorded (a restarted stream is not recorded twice).
        var recentURLs: [URL] = []
        /// Why this output's recording ended, once it has.
        var ending: LiveEnding?
    }

    static let gapLimit = 1000

    var version = 1
    /// By output name (names are kept across runs of one task).
    var outputs: [String: Output] = [:]

    /// The record at `path`, or `nil` when there is none (or it cannot be read: the recording
    /// then starts its files over).
    static func load(from path: String) -> LiveJournal? {
        guard let bytes = FileOperations.contents(path),
            let journal = try? JSONDecoder().decode(LiveJournal.self, from: Data(bytes)), journal.version == 1
        else { return nil }
        return journal
    }

    /// Writes the record to `path` atomically (a new file renamed over the old one). Blocking.
    func save(to path: String) throws(DownloadError) {
        let data: Data
        do {
            data = try JSONEncoder().encode(self)
        } catch {
            throw DownloadError(.writeFailed, "the live recording's record could not be encoded: \(error)")
        }
        try FileOperations.createParent(of: path)
        let temporary = path + ".new"
        try FileOperations.write([UInt8](data), to: temporary, at: 0)
        try FileOperations.truncate(temporary, to: Int64(data.count))
        try FileOperations.rename(temporary, to: path)
    }
}
