import Foundation
import Tessera

/// Where the fleet's database is: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (also
/// `postgresql://`), as `--fleet` takes it. TLS is not used (a fleet runs on a private network or
/// one machine); `?sslmode=disable` is accepted and ignored.
public struct FleetDatabase: Sendable, Equatable, CustomStringConvertible {
    /// The user.
    public var user: String
    /// The password, if any (never printed).
    public var password: String?
    /// The host.
    public var host: String
    /// The port.
    public var port: Int
    /// The database.
    public var database: String

    /// A database by its parts.
    public init(user: String, password: String? = nil, host: String, port: Int = 5432, database: String) {
        self.user = user
        self.password = password
        self.host = host
        self.port = port
        self.database = database
    }

    /// Parses a `postgres://` URL; the error says what is wrong with it.
    public init(url text: String) throws(FleetError) {
        let shown = UntrustedText.printable(text.replacingOccurrences(of: #":[^:@/]*@"#, with: ":***@", options: .regularExpression), limit: 200)
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "postgres" || scheme == "postgresql"
        else {
            throw FleetError(server: shown, reason: "not a postgres://USER@HOST:PORT/DB URL")
        }
        guard let host = components.host, !host.isEmpty else { throw FleetError(server: shown, reason: "the URL names no host") }
        guard let user = components.user, !user.isEmpty else { throw FleetError(server: shown, reason: "the URL names no user (postgres://USER@HOST/DB)") }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty, !database.contains("/") else {
            throw FleetError(server: shown, reason: "the URL names no database (postgres://USER@HOST/DB)")
        }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw FleetError(server: shown, reason: "the port must be 1 to 65535") }
        self.init(user: user, password: components.password, host: host, port: port, database: database)
    }

    /// `host:port/database`, for messages.
    public var description: String { "\(host):\(port)/\(database)" }
}
