import Foundation
import Tessera

extension HLSMediaPlaylist {
    /// The playlist as a live recording sees it: each segment keyed by its media sequence
    /// number, with its duration, URL, range, encryption (keys that rotate mid-stream included),
    /// initialisation section, discontinuity and discontinuity sequence number
    /// (`#EXT-X-DISCONTINUITY-SEQUENCE` onwards) and program date (its own
    /// `#EXT-X-PROGRAM-DATE-TIME`, or the last one before it plus the durations in between).
    /// Segments marked `#EXT-X-GAP` are left out (the recording reports them as a gap).
    /// Complete when the playlist has `#EXT-X-ENDLIST` (or is of type `VOD`).
    public func liveWindow() -> LiveWindow {
        let numbers = segments.discontinuityNumbers(startingAt: discontinuitySequence)
        let dates = segments.programDates(startingAt: nil)
        var list: [LiveSegment] = []
        list.reserveCapacity(segments.count)
        var longest = 0.0
        for index in segments.indices {
            let encryption = segments.encryption(at: index)
            let range = segments.range(at: index)
            let media = DownloadSegment(
                urls: [segments.url(at: index)], range: range, expectedSize: encryption == nil ? range?.length : nil,
                encryption: encryption)
            let initSection = segments.initSection(at: index).map { map in
                DownloadSegment(
                    urls: [map.url], range: map.range, expectedSize: map.encryption == nil ? map.range?.length : nil,
                    encryption: map.encryption)
            }
            let duration = segments.duration(at: index)
            longest = max(longest, duration)
            list.append(LiveSegment(
                key: LiveSegmentKey(position: Int64(clamping: segments.mediaSequence(at: index))), duration: duration, segment: media,
                initSection: initSection, isDiscontinuity: segments.isDiscontinuity(at: index),
                discontinuitySequence: Int64(clamping: numbers[index]), programDateTime: dates[index]))
        }
        let target = targetDuration.map(Double.init) ?? longest.rounded(.up)
        return LiveWindow(segments: list, targetDuration: max(0.1, target), isComplete: !isLive)
    }
}
