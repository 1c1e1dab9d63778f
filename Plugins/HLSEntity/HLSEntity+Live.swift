import Foundation
import Tessera

extension HLSEntity {
    /// Reloads the selected media playlists of a live manifest this entity resolved.
    public func liveSource(for manifest: DownloadManifest, in context: ResolveContext) throws(DownloadError) -> any LiveSource {
        var playlists: [Int: URL] = [:]
        for (index, output) in manifest.outputs.enumerated() where output.isSelected {
            guard let text = manifest.metadata[Self.playlistKey(index)], let url = URL(string: text) else {
                throw DownloadError(.manifestInvalid, "the live manifest does not say which playlist \(output.name) is reloaded from")
            }
            try URLSafety.check(url, context: "a media playlist URL")
            playlists[index] = url
        }
        return HLSLiveSource(playlists: playlists)
    }
}

/// Fetches the media playlists of a live HLS stream again, all at once (each is a window of its
/// own output). A playlist that cannot be fetched or read is left out of the answer (that
/// output's reload failed); when none can, the first error is thrown.
struct HLSLiveSource: LiveSource {
    let playlists: [Int: URL]

    mutating func reload(from: [Int: LiveSegmentKey], clock: any LiveClock, in context: ResolveContext) async throws(DownloadError)
        -> [Int: LiveWindow]
    {
        let results = await withTaskGroup(of: (Int, Result<LiveWindow, DownloadError>).self) { group in
            for (index, url) in playlists {
                group.addTask { (index, await Self.window(url, context: context)) }
            }
            var results: [Int: Result<LiveWindow, DownloadError>] = [:]
            for await (index, result) in group { results[index] = result }
            return results
        }
        var windows: [Int: LiveWindow] = [:]
        var firstError: DownloadError?
        for index in results.keys.sorted() {
            switch results[index]! {
            case .success(let window): windows[index] = window
            case .failure(let error): firstError = firstError ?? error
            }
        }
        if windows.isEmpty, let firstError { throw firstError }
        return windows
    }

    private static func window(_ url: URL, context: ResolveContext) async -> Result<LiveWindow, DownloadError> {
        await HLSEntity.fetchMediaPlaylist(url, context: context).map { $0.liveWindow() }
    }
}
