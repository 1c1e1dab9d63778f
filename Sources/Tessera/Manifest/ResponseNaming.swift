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
        let last = url.lastPathComponent  // already percent-decoded
        if !last.isEmpty, last != "/", url.path(percentEncoded: true).utf8.last != UInt8(ascii: "/") {
            return SafePath.sanitizedFileName(last, fallback: "index.html")
        }
        return "index.html"
    }
}
