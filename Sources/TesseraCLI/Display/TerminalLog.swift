import Logging
import Tessera

/// Where the library's logs go in the command: standard error, one line each, through the one
/// sanitizer (metadata carries URLs and paths from the network). Warnings and errors by
/// default; `-v` adds what the manager decides, `-vv` the transfers.
package struct TerminalLogHandler: LogHandler {
    /// The level of the handlers made from now on (set from `-v` before anything logs).
    package static let level = Locked<Logger.Level>(.warning)

    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level
    private let label: String

    package init(label: String) {
        self.label = label
        logLevel = Self.level.withLock { $0 }
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        var text = "tessera: \(event.level): \(event.message)"
        for key in merged.keys.sorted() { text += " \(key)=\(merged[key]!)" }
        Terminal.err(text)
    }
}
