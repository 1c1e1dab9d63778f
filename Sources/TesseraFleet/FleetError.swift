import Tessera

/// Why the fleet cannot be used: the server it names and the reason, in words a person can act on
/// (a refused connection, a bad password, a schema newer than this binary).
public struct FleetError: Error, Sendable, CustomStringConvertible {
    /// The server (`host:port/database`), never the password.
    public var server: String
    /// What went wrong.
    public var reason: String

    /// An error about `server`.
    public init(server: String, reason: String) {
        self.server = server
        self.reason = reason
    }

    public var description: String { "the fleet's database \(server): \(reason)" }
}
