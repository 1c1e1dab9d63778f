import Foundation

/// Checks for file names and URLs that come from the network.
public enum SafePath {
    /// A relative path that stays inside the directory it is joined to, normalised
    /// (`a//b/./c` -> `a/b/c`).
    ///
    /// Refused with ``DownloadError/Code/unsafePath``: empty names, absolute paths, `..`
    /// components, NUL and other control characters (C0, DEL, C1), bidirectional formatting
    /// characters, backslashes (a Windows separator that would become one on another system),
    /// components longer than 255 bytes, and `.tessera` (the manager's own work directory).
    public static func relative(_ name: String) throws(DownloadError) -> String {
        func refuse(_ why: String) -> DownloadError {
            DownloadError(.unsafePath, "the file name \"\(printable(name))\" \(why)")
        }
        guard !name.isEmpty else { throw DownloadError(.unsafePath, "a file name is empty") }
        // The common case, one plain ASCII name, without splitting or scanning scalars.
        if name.utf8.count <= maxNameBytes, isPlainASCII(name),
            name.utf8.first != UInt8(ascii: "~"), name != ".", name != "..", name != ".tessera"
        {
            return name
        }
        if name.unicodeScalars.contains(where: UntrustedText.isUnsafe) {
            throw refuse("contains a control or bidirectional formatting character")
        }
        if name.contains("\\") { throw refuse("contains a backslash") }
        if name.hasPrefix("/") || name.hasPrefix("~") { throw refuse("is absolute") }
        var components: [Substring] = []
        for component in name.split(separator: "/", omittingEmptySubsequences: true) {
            if component == "." { continue }
            if component == ".." { throw refuse("leaves the download directory") }
            if component.utf8.count > maxNameBytes { throw refuse("has a component longer than 255 bytes") }
            if component == ".tessera" { throw refuse("reaches Tessera's own work directory (.tessera)") }
            components.append(component)
        }
        guard !components.isEmpty else { throw refuse("names no file") }
        return components.joined(separator: "/")
    }

    /// A single file name from untrusted text (a URL's last component, `Content-Disposition`),
    /// made safe instead of refused: separators, control and bidirectional formatting characters
    /// become `_`, leading dots are dropped, a name too long is shortened (see ``fitted(_:reserving:)``),
    /// and an empty result becomes `fallback`.
    public static func sanitizedFileName(_ text: String, fallback: String = "download") -> String {
        // The common case: plain ASCII with nothing to replace, trim or shorten.
        let bytes = text.utf8
        if let first = bytes.first, let last = bytes.last, bytes.count <= maxNameBytes, first != UInt8(ascii: "."),
            first != UInt8(ascii: " "), last != UInt8(ascii: " "),
            isPlainASCII(text)
        {
            return text
        }
        var name = String(text.unicodeScalars.map { scalar -> Character in
            switch scalar.value {
            case 0x2F, 0x5C: return "_"
            default: return UntrustedText.isUnsafe(scalar) ? "_" : Character(scalar)
            }
        })
        // Trim and drop leading dots until neither changes anything (". .bashrc" included).
        while true {
            let trimmed = name.trimmingCharacters(in: .whitespaces).drop(while: { $0 == "." })
            if trimmed.count == name.count { break }
            name = String(trimmed)
        }
        name = fitted(name)
        return name.isEmpty ? fallback : name
    }

    /// Whether every byte of `text` is printable ASCII other than `/` and `\`: the names that
    /// need no closer look (read as one run of bytes, as a native string's are, not byte by byte
    /// through its view: this runs several times for every file).
    static func isPlainASCII(_ text: String) -> Bool {
        let plain: (UInt8) -> Bool = { $0 >= 0x20 && $0 < 0x7F && $0 != 0x2F && $0 != 0x5C }
        return text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(plain) } ?? text.utf8.allSatisfy(plain)
    }

    /// The longest file name (one path component) Linux file systems take, in bytes.
    public static let maxNameBytes = 255

    /// A file name (one path component) shortened, when it must be, so that it and `reserving`
    /// more bytes (a suffix to come, such as `.part` or `.1`) fit in ``maxNameBytes``: cut at a
    /// character boundary before its extension, which it keeps when the extension is short.
    public static func fitted(_ name: String, reserving: Int = 0) -> String {
        let room = maxNameBytes - max(0, reserving)
        guard name.utf8.count > room, room > 0 else { return name }
        var stem = Substring(name), suffix = Substring("")
        if let dot = name.lastIndex(of: "."), dot != name.startIndex, name.utf8[dot...].count <= 16 {
            stem = name[..<dot]
            suffix = name[dot...]
        }
        while !stem.isEmpty, stem.utf8.count + suffix.utf8.count > room { stem.removeLast() }
        // (A character of more than `room` bytes, or an extension with no room left: cut the whole.)
        var whole = stem + suffix
        while whole.utf8.count > room { whole.removeLast() }
        return String(whole)
    }

    /// Joins a checked relative path to a directory.
    public static func join(_ directory: String, _ relative: String) -> String {
        guard !relative.isEmpty else { return directory }
        guard !directory.isEmpty else { return relative }
        // One allocation, the bytes copied in (appending to a `String` costs more than the
        // copy; paths are joined about twenty times a file).
        var (head, tail) = (directory, relative)
        let slash = head.utf8.last != UInt8(ascii: "/")
        let count = head.utf8.count + (slash ? 1 : 0) + tail.utf8.count
        return head.withUTF8 { head in
            tail.withUTF8 { tail in
                String(unsafeUninitializedCapacity: count) { buffer in
                    var end = buffer.initialize(fromContentsOf: head)
                    if slash {
                        buffer[end] = UInt8(ascii: "/")
                        end += 1
                    }
                    return end + UnsafeMutableBufferPointer(rebasing: buffer[end...]).initialize(fromContentsOf: tail)
                }
            }
        }
    }

    static func printable(_ text: String) -> String { UntrustedText.printable(text, marksCut: false) }
}
