import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A port on `127.0.0.1` where nothing listens, held for a test: a host that refuses connections
/// and can come back (``LoopbackOrigin/start(replacing:)``).
///
/// A port taken from an origin that was shut down is free for anyone: in a parallel suite another
/// test's origin (or a connection's local end) may get it, and a test that expects refusals
/// then talks to that server (a clean clone's CI saw "404 Not Found" where the port was meant to
/// be down). Here a socket stays bound to the port without listening: connections to it are
/// refused, and the system gives the port to no one else until ``release()``.
package final class DownPort: Sendable {
    /// The port.
    package let port: Int
    private let descriptor: Mutex<Int32>

    /// Binds a socket to a port of `127.0.0.1` the system picks, without listening on it.
    package init() throws {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketDescriptor >= 0 else { throw DownPortError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let failed: String? = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                if bind(socketDescriptor, socketAddress, length) != 0 { return "bind" }
                return getsockname(socketDescriptor, socketAddress, &length) != 0 ? "getsockname" : nil
            }
        }
        if let failed {
            let reason = String(cString: strerror(errno))
            close(socketDescriptor)
            throw DownPortError("\(failed): \(reason)")
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        descriptor = Mutex(socketDescriptor)
    }

    /// Lets the port go (an origin is to listen on it next). Calling it again does nothing.
    package func release() {
        descriptor.withLock { descriptor in
            if descriptor >= 0 { close(descriptor) }
            descriptor = -1
        }
    }

    deinit { release() }
}

/// Why a ``DownPort`` could not be made.
package struct DownPortError: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}

extension LoopbackOrigin {
    /// Starts an origin on `down`'s port, letting the port go just before (a host that refused
    /// connections comes back).
    package static func start(threads: Int = 1, replacing down: DownPort) async throws -> LoopbackOrigin {
        down.release()
        return try await start(threads: threads, port: down.port)
    }
}
