import Foundation

/// Checks for file names and URLs that come from the network.
public enum SafePath {
    /// A relative path that stays inside the directory it is joined to, normalised
    /// (`a//b/./c` -> `a/b/c`).
    ///
    /// Refused with ``DownloadError/Code/unsafePath``: empty names, absolute paths, `..`
    /// components, NUL and other control characters, backslashes (a Windows separator that
    /// would become one on another system), and components longer than 255 bytes.
    public static func relative(_ name: String) throws(DownloadError) -> String {
        func refuse(_ why: String) -> DownloadError {
            DownloadError(.unsafePath, "the file name \"\(printable(name))\" \(why)")
        }
        guard !name.isEmpty else { throw DownloadError(.unsafePath, "a file name is empty") }
        if name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) { throw refuse("contains a control character") }
        if name.contains("\\") { throw refuse("contains a backslash") }
        if name.hasPrefix("/") || name.hasPrefix("~") { throw refuse("is absolute") }
        var components: [Substring] = []
        for component in name.split(separator: "/", omittingEmptySubsequences: true) {
            if component == "." { continue }
            if component == ".." { throw refuse("leaves the download directory") }
            if component.utf8.count > 255 { throw refuse("has a component longer than 255 bytes") }
            components.append(component)
        }
        guard !components.isEmpty else { throw refuse("names no file") }
        return components.joined(separator: "/")
    }

    /// A single file name from untrusted text (a URL's last component, `Content-Disposition`),
    /// made safe instead of refused: separators and control characters become `_`, leading dots
    /// are dropped, and an empty result becomes `fallback`.
    public static func sanitizedFileName(_ text: String, fallback: String = "download") -> String {
        var name = String(text.unicodeScalars.map { scalar -> Character in
            switch scalar.value {
            case 0..<0x20, 0x7F, 0x2F, 0x5C: return "_"
            default: return Character(scalar)
            }
        })
        // Trim and drop leading dots until neither changes anything (". .bashrc" included).
        while true {
            let trimmed = name.trimmingCharacters(in: .whitespaces).drop(while: { $0 == "." })
            if trimmed.count == name.count { break }
            name = String(trimmed)
        }
        while name.utf8.count > 255 { name.removeLast() }
        return name.isEmpty ? fallback : name
    }

    /// Joins a checked relative path to a directory.
    public static func join(_ directory: String, _ relative: String) -> String {
        guard !relative.isEmpty else { return directory }
        guard !directory.isEmpty else { return relative }
        return directory.hasSuffix("/") ? directory + relative : directory + "/" + relative
    }

    static func printable(_ text: String) -> String { UntrustedText.printable(text, marksCut: false) }
}

/// Checks for URLs that come from manifests, before they reach the engine.
public enum URLSafety {
    /// Throws ``DownloadError/Code/unsafeInput`` for anything but an absolute `http` or `https`
    /// URL with a host and without white space or control characters.
    public static func check(_ url: URL, context: String = "a URL") throws(DownloadError) {
        let text = url.absoluteString
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw DownloadError(.unsafeInput, "\(context) uses a scheme other than http or https: \(SafePath.printable(text))")
        }
        guard let host = url.host, !host.isEmpty else {
            throw DownloadError(.unsafeInput, "\(context) has no host: \(SafePath.printable(text))")
        }
        if text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) {
            throw DownloadError(.unsafeInput, "\(context) contains white space or a control character")
        }
    }

    /// Resolves `reference` (absolute, or relative as in an HTML/MPD/M3U8 document) against
    /// `base` and checks the result.
    public static func resolve(_ reference: String, against base: URL?, context: String = "a URL") throws(DownloadError) -> URL {
        let trimmed = reference.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            throw DownloadError(.unsafeInput, "\(context) contains a control character")
        }
        guard !trimmed.isEmpty, let url = URL(string: trimmed, relativeTo: base)?.absoluteURL else {
            throw DownloadError(.manifestInvalid, "\(context) is not a URL: \"\(SafePath.printable(trimmed))\"")
        }
        try check(url, context: context)
        return url
    }
}
