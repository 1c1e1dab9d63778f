import Foundation

/// The name a plain download is saved under, as wget and aria2c choose it: the server's
/// `Content-Disposition` file name, else the last component of the URL (after redirects),
/// else `index.html`. Always a single safe file name.
public enum ResponseNaming {
    /// The name for the resource at `url` (the URL after redirects) answered with `headers`.
    public static func fileName(url: URL, headers: HTTPHeaders = HTTPHeaders()) -> String {
        if let disposition = headers["Content-Disposition"], let name = ContentDisposition.fileName(disposition) {
            return SafePath.sanitizedFileName(name)
        }
        return fileName(url: url)
    }

    /// The name the URL alone gives: its last path component, or `index.html` for a directory.
    public static func fileName(url: URL) -> String {
        // A directory URL ("…/dir/") names no file, as wget and aria2c see it. (Its path's last
        // byte tells, as `hasDirectoryPath` would, which parses the path again; a last component
        // "." or "..", a directory there too, sanitizes to nothing, so to the same fallback.)
        let path = url.path(percentEncoded: true)
        let last = lastPathComponent(of: url, path: path)  // already percent-decoded
        if !last.isEmpty, last != "/", path.utf8.last != UInt8(ascii: "/") {
            return SafePath.sanitizedFileName(last, fallback: "index.html")
        }
        return "index.html"
    }

    /// `url.lastPathComponent`, read straight from the path where that is plain: a last
    /// component after the path's last `/` with no `%` (nothing to decode) or `;` in it. Foundation
    /// parses and decodes the path again at each call; a list of plain URLs asks four times a
    /// file (the entity's title, the manifest probe, the output's name, the response's).
    /// Any other path is left to Foundation (`ResponseNamingTests` compares the two).
    package static func lastPathComponent(of url: URL) -> String {
        lastPathComponent(of: url, path: url.path(percentEncoded: true))
    }

    /// ``lastPathComponent(of:)`` given the URL's percent-encoded path (read once by a caller
    /// that needs it too).
    private static func lastPathComponent(of url: URL, path: String) -> String {
        var path = path
        let plain = path.withUTF8 { bytes -> String? in
            // From the end back to the last `/`: the component, if nothing in it needs Foundation.
            var index = bytes.count - 1
            guard index >= 0, bytes[index] != UInt8(ascii: "/") else { return nil }
            while index >= 0 {
                switch bytes[index] {
                case UInt8(ascii: "/"):
                    return String(decoding: UnsafeBufferPointer(rebasing: bytes[(index + 1)...]), as: UTF8.self)
                case UInt8(ascii: "%"), UInt8(ascii: ";"):
                    return nil
                default:
                    index -= 1
                }
            }
            return nil
        }
        return plain ?? url.lastPathComponent
    }
}
