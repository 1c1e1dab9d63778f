import Foundation

/// Content of one kind (a playurl API, a DASH stream, a Metalink document, an HLS stream) that
/// a ``LoopbackOrigin`` serves, with what a correct download of it produces.
///
/// Plugins' samples, their tests and `tessera demo` install fixtures on an origin, download
/// ``inputs`` with ``pluginArguments``, and ask ``verify(downloadRoot:)`` whether every output
/// arrived byte for byte.
public protocol OriginFixture: Sendable {
    /// What to give the command line or the registry: URLs, or `plugin:key` inputs.
    var inputs: [String] { get }
    /// `PLUGIN:KEY=VALUE` arguments the inputs need (an API template, say).
    var pluginArguments: [String] { get }
    /// The files a complete download leaves, relative to the download root.
    var expectedFiles: [String] { get }
    /// Problems with the files under `downloadRoot` (missing, wrong size, wrong bytes); empty
    /// when the download is exactly right.
    func verify(downloadRoot: String) async -> [String]
}

extension OriginFixture {
    public var pluginArguments: [String] { [] }
}

extension OriginFixture {
    /// What is wrong with the file `name` under `downloadRoot`, which should hold the first
    /// `size` bytes of `content`: missing, another size, or other bytes; `nil` when it is right.
    public static func problem(with name: String, under downloadRoot: String, size: Int64, content: OriginContent) async -> String? {
        let path = (downloadRoot as NSString).appendingPathComponent(name)
        guard let actual = fileSize(path) else { return "\(name): missing (\(path))" }
        guard actual == size else { return "\(name): \(actual) bytes, expected \(size)" }
        guard await content.verifyFile(atPath: path, size: size) else { return "\(name): the bytes differ from \(content.path)" }
        return nil
    }
}
