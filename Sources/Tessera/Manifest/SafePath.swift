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
