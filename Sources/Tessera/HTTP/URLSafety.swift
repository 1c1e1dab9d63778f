import Foundation

/// The one check every URL passes before it reaches the network: a URL the user typed, one a
/// manifest or a server handed over, a mirror, a key URL. The engine applies it to every request
/// (and libcurl's protocol restriction to every redirect), so a URL that fails it never leaves
/// the process, whichever path it came by.
public enum URLSafety {
    /// Throws ``DownloadError/Code/unsafeInput`` for anything but an absolute `http` or `https`
    /// URL with a host and without white space or control characters. `context` names the URL
    /// in the message ("the key URL", "segment 3 of \"video.mp4\"").
    public static func check(_ url: URL, context: String = "the URL") throws(DownloadError) {
        try check(url, naming: context)
    }

    /// ``check(_:context:)`` with the name made only for an error (a manifest of 100,000
    /// segments names none of them when all pass).
    static func check(_ url: URL, naming context: @autoclosure () -> String) throws(DownloadError) {
        // (This runs several times for every file and segment: the scheme is compared without
        // making a lowercased copy, the host is looked at as written unless it has escapes (its
        // decoded form, which `host` makes, is then what must not be empty), and the text is
        // scanned as one run of bytes.)
        var text = url.absoluteString
        guard let scheme = url.scheme, isHTTPScheme(scheme) else {
            let scheme = url.scheme.map { UntrustedText.printable($0, limit: 20) } ?? "none"
            throw DownloadError(
                .unsafeInput, "\(context()) uses the scheme \(scheme), not http or https (the only ones downloaded)",
                url: UntrustedText.printable(text))
        }
        let written = url.host(percentEncoded: true)
        let host = written?.utf8.contains(UInt8(ascii: "%")) == true ? url.host : written
        guard let host, !host.isEmpty else {
            throw DownloadError(.unsafeInput, "\(context()) has no host", url: UntrustedText.printable(text))
        }
        if text.withUTF8({ bytes in bytes.contains { $0 <= 0x20 || $0 == 0x7F } }) {
            throw DownloadError(.unsafeInput, "\(context()) contains white space or a control character")
        }
    }

    /// Whether `scheme` is `http` or `https`, in any case.
    static func isHTTPScheme(_ scheme: String) -> Bool {
        // (`byte | 0x20` is a letter's lowercase; only that letter's two cases give it.)
        var bytes = scheme.utf8.makeIterator()
        for expected in "http".utf8 {
            guard let byte = bytes.next(), byte | 0x20 == expected else { return false }
        }
        guard let fifth = bytes.next() else { return true }
        return fifth | 0x20 == UInt8(ascii: "s") && bytes.next() == nil
    }

    /// Resolves `reference` (absolute, or relative as in an HTML/MPD/M3U8 document) against
    /// `base` and checks the result with ``check(_:context:)``.
    public static func resolve(_ reference: String, against base: URL?, context: String = "a URL") throws(DownloadError) -> URL {
        let trimmed = reference.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw DownloadError(.unsafeInput, "\(context) contains a control character")
        }
        guard !trimmed.isEmpty, let url = URL(string: trimmed, relativeTo: base)?.absoluteURL else {
            throw DownloadError(.manifestInvalid, "\(context) is not a URL: \(UntrustedText.quoted(trimmed))")
        }
        try check(url, context: context)
        return url
    }
}

extension URLSafety {
    /// Whether a reference carries its own scheme (`http://…`, also `javascript:` and such,
    /// which ``check(_:context:)`` then refuses): it is resolved against no base, and it names
    /// one URL even where relative references get one per mirror base.
    public static func hasScheme(_ reference: String) -> Bool {
        guard let colon = reference.firstIndex(of: ":") else { return false }
        let scheme = reference[..<colon].trimmingCharacters(in: .whitespaces)
        guard let first = scheme.first, first.isLetter else { return false }
        return scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == ".") }
    }

    /// Whether `reference` is a plain relative path (unreserved characters and `/`, no dot
    /// segment, no `//`): appending it to ``directory(of:)`` of a base is then exactly its
    /// resolution against that base (RFC 3986 §5.2), and the result is as safe as the base.
    /// Manifests of many segments keep such references as text.
    public static func isPlainRelative(_ reference: String) -> Bool {
        var previous = UInt8(ascii: "/")
        for byte in reference.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "~"):
                break
            case UInt8(ascii: "."), UInt8(ascii: "/"):
                if previous == UInt8(ascii: "/") { return false }
            default:
                return false
            }
            previous = byte
        }
        return !reference.isEmpty
    }

    /// The absolute text that a plain relative reference is appended to: `base` resolved up to
    /// its last `/` (without query or fragment); empty when `base` has none.
    public static func directory(of base: URL) -> String {
        guard let probe = URL(string: "x", relativeTo: base)?.absoluteString, probe.hasSuffix("x") else { return "" }
        return String(probe.dropLast())
    }
}
