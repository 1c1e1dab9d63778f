import Foundation
import Tessera

/// The parts of an MPD this plugin uses, read from the XML tree with every URL resolved and
/// every number checked. Elements are kept so later stages can name lines in their errors.
struct MPD {
    /// `ProgramInformation/Title`, if any.
    var title: String?
    /// `MPD@mediaPresentationDuration`, in nanoseconds.
    var duration: Int128?
    /// `MPD@profiles`.
    var profiles: String?
    /// The periods, in document order.
    var periods: [MPDPeriod]
    /// Whether the MPD is `type="dynamic"` (a live presentation).
    var isDynamic = false
    /// `MPD@availabilityStartTime`: when segment times count from (required when dynamic).
    var availabilityStartTime: Date?
    /// `MPD@publishTime`: when this version of the MPD was made.
    var publishTime: Date?
    /// `MPD@minimumUpdatePeriod`, in nanoseconds: how long this version stays valid.
    var minimumUpdatePeriod: Int128?
    /// `MPD@timeShiftBufferDepth`, in nanoseconds: how long a segment stays available after it
    /// was published (absent: for ever).
    var timeShiftBufferDepth: Int128?
    /// `MPD@suggestedPresentationDelay`, in nanoseconds.
    var suggestedPresentationDelay: Int128?
    /// The `UTCTiming` elements, in order: where to read the clock the MPD's times are on.
    var utcTimings: [MPDUTCTiming] = []
}

/// One `UTCTiming` descriptor.
struct MPDUTCTiming: Hashable {
    /// `@schemeIdUri` (`urn:mpeg:dash:utc:http-iso:2014`, …).
    var scheme: String
    /// `@value`: URLs (separated by white space) or, for `direct`, the time itself.
    var value: String
}

/// One `Period`.
struct MPDPeriod {
    var element: SafeXMLElement
    /// Position in the MPD, from 0.
    var index: Int
    var id: String?
    /// When the period starts, in nanoseconds from the presentation's start.
    var start: Int128
    /// How long it lasts (`@duration`, else up to the next period's start, else up to the end of
    /// the presentation), in nanoseconds; `nil` when the MPD does not say.
    var duration: Int128?
    var adaptationSets: [MPDAdaptationSet]

    /// Every representation of the period, in document order.
    var representations: [MPDRepresentation] { adaptationSets.flatMap(\.representations) }
}

/// One `AdaptationSet`.
struct MPDAdaptationSet {
    var element: SafeXMLElement
    var representations: [MPDRepresentation]
}

/// A `ContentProtection` descriptor.
struct MPDProtection: Hashable {
    /// `@schemeIdUri`.
    var scheme: String
    /// `@value`, e.g. `cenc`.
    var value: String?
    /// The element's line.
    var line: Int

    /// The scheme, with the DRM system's name when the UUID is a known one.
    var label: String {
        let known: [String: String] = [
            "urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed": "Widevine",
            "urn:uuid:9a04f079-9840-4286-ab92-e65be0885f95": "PlayReady",
            "urn:uuid:94ce86fb-07ff-4f43-adb8-93d2fa968ca2": "FairPlay",
            "urn:uuid:e2719d58-a985-b3c9-781a-b030af78d30e": "ClearKey",
            "urn:uuid:1077efec-c0b2-4d02-ace3-3c1e52e2fb4b": "W3C Common PSSH (ClearKey)",
            "urn:uuid:f239e769-efa3-4850-9c16-a903c6932efb": "Adobe Primetime",
            "urn:mpeg:dash:mp4protection:2011": "MPEG Common Encryption",
        ]
        var text = scheme
        if let name = known[scheme.lowercased()] { text += " (\(name))" }
        if let value, !value.isEmpty { text += " value=\"\(value)\"" }
        return text
    }
}

/// One `Representation`, with what it inherits from its adaptation set.
struct MPDRepresentation {
    var element: SafeXMLElement
    var adaptationSet: SafeXMLElement
    var period: SafeXMLElement
    /// The period's position in the MPD.
    var periodIndex: Int
    var id: String
    var bandwidth: Int64?
    var width: Int?
    var height: Int?
    var codecs: String?
    var mimeType: String?
    var language: String?
    var kind: MediaInfo.Kind
    /// The BaseURL candidates for this representation, primary first (mirrors after).
    var bases: [URL]
    /// `ContentProtection` on the representation or its adaptation set.
    var protections: [MPDProtection]
}
