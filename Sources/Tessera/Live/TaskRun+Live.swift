extension TaskRun {
    /// The hook of a run into live recording: a live manifest (``DownloadManifest/live``) is
    /// recorded by a ``LiveRecorder`` instead of downloaded by the download pass. `announced`
    /// when the manager already knows the task downloads.
    func recordLive(_ manifest: DownloadManifest, announced: Bool) async throws {
        guard let parser = entity as? any LiveStreamParser else {
            throw DownloadError(
                .unsupportedContent, "the \(type(of: entity).entityType) plugin resolved a live stream but cannot reload it (LiveStreamParser)")
        }
        try await LiveRecorder(run: self, manifest: manifest, parser: parser).record(announced: announced)
    }
}
