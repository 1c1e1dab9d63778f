/// Which variants of a manifest to download (`--format`), for entities with several (DASH
/// representations, HLS variants and renditions).
public enum FormatSelector: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The entity's default: for media, the best video plus the best audio by bandwidth.
    case best
    /// The lowest bandwidth of each kind.
    case worst
    /// Every variant.
    case all
    /// The variants whose identifier (representation id, rendition name) is one of these.
    case identifiers([String])

    /// Parses `best`, `worst`, `all`, or identifiers separated by `+` or `,` (`720p+audio-en`).
    public init(_ text: String) throws(DownloadError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        switch trimmed.lowercased() {
        case "", "best", "default": self = .best
        case "worst": self = .worst
        case "all": self = .all
        default:
            let names = trimmed.split(whereSeparator: { $0 == "+" || $0 == "," }).map {
                $0.trimmingCharacters(in: .whitespaces)
            }.filter { !$0.isEmpty }
            guard !names.isEmpty else { throw DownloadError(.invalidRequest, "the format \"\(text)\" names nothing") }
            self = .identifiers(names)
        }
    }

    /// `best`, `worst`, `all` or the identifiers joined by `+`; also the variant key of
    /// entities that take a selector.
    public var description: String {
        switch self {
        case .best: "best"
        case .worst: "worst"
        case .all: "all"
        case .identifiers(let names): names.joined(separator: "+")
        }
    }
}

import Foundation
