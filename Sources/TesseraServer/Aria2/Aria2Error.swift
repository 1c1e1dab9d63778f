import Tessera

/// An error an RPC method answers with: aria2's `{"code": 1, "message": "..."}`.
public struct Aria2Error: Error, Sendable, Equatable {
    /// aria2 uses 1 for every failure of a method, and JSON-RPC's negative codes for malformed
    /// requests.
    public var code: Int
    /// The message; text from the network in it has passed ``UntrustedText``.
    public var message: String

    /// Creates an error.
    public init(code: Int = 1, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `Unauthorized`: a missing or wrong `token:SECRET`.
    public static let unauthorized = Aria2Error("Unauthorized")

    /// The request is no JSON: JSON-RPC's parse error.
    public static let parseError = Aria2Error(code: -32700, "Parse error.")

    /// The request is JSON but no JSON-RPC request.
    public static let invalidRequest = Aria2Error(code: -32600, "Invalid Request.")

    /// aria2's answer for a GID it does not know.
    static func notFound(_ gid: String) -> Aria2Error {
        Aria2Error("GID \(UntrustedText.printable(gid, limit: 40)) is not found")
    }
}
