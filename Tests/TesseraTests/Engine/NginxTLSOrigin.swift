import Foundation
import Tessera
import TesseraTesting

/// nginx on `127.0.0.1` serving files over TLS with HTTP/2, with a certificate signed by a CA
/// made for the test: a real peer for TLS verification and HTTP/2 multiplexing, which the
/// NIO-based `LoopbackOrigin` (plain HTTP/1.1) does not offer.
struct NginxTLSOrigin {
    static let binary = ["/usr/sbin/nginx", "/usr/bin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static var isAvailable: Bool {
        binary != nil && FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")
    }

    let directory: TemporaryDirectory
    let port: Int
    let process: SpawnedProcess
    /// The CA certificate that signed the server's certificate.
    var caBundle: String { directory.file("ca.pem") }
    var accessLog: String { directory.file("access.log") }

    func url(_ name: String) -> URL { URL(string: "https://127.0.0.1:\(port)/\(name)")! }

    /// Starts nginx serving `files` (name -> bytes).
    static func start(files: [String: [UInt8]]) throws -> NginxTLSOrigin {
        guard let binary else { throw OriginFailure("nginx is not installed") }
        let directory = TemporaryDirectory("nginx-tls")
        let root = directory.file("www")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for (name, bytes) in files {
            try Data(bytes).write(to: URL(fileURLWithPath: (root as NSString).appendingPathComponent(name)))
        }
        try run("/usr/bin/openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                                     "-subj", "/CN=Tessera Test CA", "-keyout", directory.file("ca.key"), "-out", directory.file("ca.pem")])
        try run("/usr/bin/openssl", ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                                     "-keyout", directory.file("server.key"), "-out", directory.file("server.csr")])
        try "subjectAltName=IP:127.0.0.1\n".write(toFile: directory.file("san.ext"), atomically: true, encoding: .utf8)
        try run("/usr/bin/openssl", ["x509", "-req", "-in", directory.file("server.csr"), "-CA", directory.file("ca.pem"),
                                     "-CAkey", directory.file("ca.key"), "-CAcreateserial", "-days", "2",
                                     "-extfile", directory.file("san.ext"), "-out", directory.file("server.pem")])
        let port = try freePort()
        let configuration = """
            worker_processes 1;
            pid \(directory.file("nginx.pid"));
            error_log \(directory.file("error.log"));
            events { worker_connections 256; }
            http {
                client_body_temp_path \(directory.path);
                proxy_temp_path \(directory.path);
                fastcgi_temp_path \(directory.path);
                uwsgi_temp_path \(directory.path);
                scgi_temp_path \(directory.path);
                log_format tessera '$connection $server_protocol $request_uri';
                access_log \(directory.file("access.log")) tessera;
                server {
                    listen 127.0.0.1:\(port) ssl http2;
                    ssl_certificate \(directory.file("server.pem"));
                    ssl_certificate_key \(directory.file("server.key"));
                    root \(root);
                }
            }
            """
        try configuration.write(toFile: directory.file("nginx.conf"), atomically: true, encoding: .utf8)
        let process = try SpawnedProcess(
            binary, ["-c", directory.file("nginx.conf"), "-p", directory.path, "-g", "daemon off;"], error: .null)
        let origin = NginxTLSOrigin(directory: directory, port: port, process: process)
        // Wait until it accepts connections.
        for _ in 0..<200 {
            if canConnect(port) { return origin }
            usleep(25_000)
        }
        origin.stop()
        throw OriginFailure("nginx did not start listening")
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
        directory.cleanUp()
    }

    /// Access-log lines: connection serial, protocol, request URI.
    func log() -> [(connection: String, protocol: String, uri: String)] {
        let text = fileText(accessLog)
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ").map(String.init)
            return parts.count == 3 ? (parts[0], parts[1], parts[2]) : nil
        }
    }

    private static func run(_ tool: String, _ arguments: [String]) throws {
        let process = try SpawnedProcess(tool, arguments, output: .null, error: .null)
        guard process.waitUntilExit() == .exited(0) else { throw OriginFailure("\(tool) \(arguments.first ?? "") failed") }
    }

    private static func freePort() throws -> Int {
        guard let socket = try? LoopbackSocket(listening: false) else { throw OriginFailure("no free port") }
        defer { socket.close() }
        return socket.port
    }

    private static func canConnect(_ port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

struct OriginFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
