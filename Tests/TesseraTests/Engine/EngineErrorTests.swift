import CCurl
import Foundation
import Testing
@testable import Tessera
import TesseraTesting

/// Failures are classified into a ``DownloadError`` the manager can act on.
@Suite(.timeLimit(.minutes(2))) struct EngineErrorTests {
    let directory = TemporaryDirectory("errors")
    let engine: CurlEngine

    init() throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.maxRedirects = 5
        engine = try CurlEngine(configuration: configuration)
    }

    func failure(_ request: TransferRequest) async -> DownloadError? {
        await #expect(throws: DownloadError.self) { try await engine.transfer(request) }
    }

    @Test func notFoundIsAStatusThatSuggestsResolvingAgain() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let file = directory.file("missing.bin")
            let error = try #require(await failure(.download(origin.url("/nothing/here"), to: file)))
            #expect(error.code == .httpStatus)
            #expect(error.httpStatus == 404)
            #expect(error.suggestsReResolve)
            #expect(!error.isTransient)
            #expect(error.message.contains("404"))
            #expect(error.message.contains("no such path"), "the server's own words are quoted")
            #expect(fileSize(file) == nil, "an error response leaves no file behind")
        }
    }

    @Test(arguments: [403, 410])
    func staleURLStatusesSuggestResolvingAgain(status: Int) async throws {
        try await withLoopbackOrigin { origin in
            origin.inject(.status(status), at: "/bytes/10/x")
            let error = try #require(await failure(TransferRequest(url: origin.url("/bytes/10/x"), destination: .discard)))
            #expect(error.httpStatus == status)
            #expect(error.suggestsReResolve)
        }
    }

    @Test func serviceUnavailableCarriesRetryAfter() async throws {
        try await withLoopbackOrigin { origin in
            origin.inject(.status(503, retryAfter: "7"), at: "/bytes/10/x")
            let error = try #require(await failure(TransferRequest(url: origin.url("/bytes/10/x"), destination: .discard)))
            #expect(error.httpStatus == 503)
            #expect(error.retryAfter == .seconds(7))
            #expect(error.isTransient)
        }
    }

    @Test func tooManyRequestsWithADateRetryAfter() async throws {
        try await withLoopbackOrigin { origin in
            // A date far in the past means "now".
            origin.inject(.status(429, retryAfter: "Sun, 06 Nov 1994 08:49:37 GMT"), at: "/bytes/10/x")
            let error = try #require(await failure(TransferRequest(url: origin.url("/bytes/10/x"), destination: .discard)))
            #expect(error.httpStatus == 429)
            #expect(error.retryAfter == .seconds(0))
            #expect(error.isTransient)
        }
    }

    @Test func internalServerErrorIsTransient() async throws {
        try await withLoopbackOrigin { origin in
            origin.inject(.status(500), at: "/bytes/10/x")
            let error = try #require(await failure(TransferRequest(url: origin.url("/bytes/10/x"), destination: .discard)))
            #expect(error.httpStatus == 500)
            #expect(error.isTransient)
            #expect(error.retryAfter == nil)
        }
    }

    @Test func redirectsWithinHTTPAreFollowed() async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            origin.inject(.redirect(to: "/bytes/5000/target.bin"), at: "/start")
            let result = try await engine.transfer(.download(origin.url("/start"), to: directory.file("t.bin")))
            #expect(result.status == 200)
            #expect(result.effectiveURL.path == "/bytes/5000/target.bin")
            #expect(await origin.content(at: "/bytes/5000/target.bin").verifyFile(atPath: directory.file("t.bin"), size: 5000))
        }
    }

    @Test(arguments: ["ftp://127.0.0.1/secret", "file:///etc/passwd", "gopher://127.0.0.1/x", "dict://127.0.0.1:11211/stat"])
    func redirectsToOtherSchemesAreRefused(location: String) async throws {
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            origin.inject(.redirect(to: location), at: "/evil")
            let file = directory.file("evil.bin")
            let error = try #require(await failure(.download(origin.url("/evil"), to: file)))
            #expect(error.code == .unsafeInput)
            #expect(error.message.contains(location))
            #expect(fileSize(file) == nil)
            // The refusal leaves the engine whole: the next transfers (on fresh or pooled
            // handles) reach the origin and succeed.
            for index in 0..<3 {
                let path = "/bytes/1000/after-\(index).bin", after = directory.file("after-\(index).bin")
                let result = try await engine.transfer(.download(origin.url(path), to: after))
                #expect(result.status == 200)
                #expect(await origin.content(at: path).verifyFile(atPath: after, size: 1000))
            }
        }
    }

    @Test func aGiantHeaderIsCalledThatNotOutOfMemory() async throws {
        try await withLoopbackOrigin { origin in
            origin.serve("/giant", .init(.generated(size: 100), extraHeaders: [("X-Giant", String(repeating: "a", count: 300_000))]))
            let error = try #require(await failure(TransferRequest(url: origin.url("/giant"), destination: .discard)))
            #expect(error.code == .responseTooLarge)
            #expect(error.message.contains("header"), "\(error.message)")
            #expect(!error.isTransient)
        }
    }

    @Test func anAnswerWithoutAStatusLineIsCalledThatNotAProtocolRefusal() async throws {
        let server = try RawAnswerServer(answer: "hello, no status line here\n")
        defer { server.stop() }
        let url = try #require(URL(string: "http://127.0.0.1:\(server.port)/x.bin"))
        let error = try #require(await failure(TransferRequest(url: url, destination: .discard)))
        #expect(error.code == .unsupportedContent)
        #expect(error.message.contains("status line"), "\(error.message)")
        #expect(!error.message.contains("only http and https"))
    }

    @Test func redirectLoopsStopAtTheLimit() async throws {
        try await withLoopbackOrigin { origin in
            origin.inject(.redirect(to: "/loop"), at: "/loop")
            let error = try #require(await failure(TransferRequest(url: origin.url("/loop"), destination: .discard)))
            #expect(error.code == .tooManyRedirects)
            #expect(origin.requestCount(for: "/loop") == 6, "the first request and five redirects")
        }
    }

    @Test(arguments: ["ftp://127.0.0.1/x", "file:///etc/passwd", "http:///nohost", "mailto:a@b.c"])
    func onlyHTTPAndHTTPSURLsAreAccepted(text: String) throws {
        let url = try #require(URL(string: text))
        let request = TransferRequest(url: url, destination: .discard)
        #expect(throws: DownloadError.self) { try request.validate() }
    }

    @Test func aRefusedConnectionIsClassified() async throws {
        let origin = try await LoopbackOrigin.start()
        let url = origin.url("/bytes/10/x")
        try await origin.shutdown()
        let error = try #require(await failure(TransferRequest(url: url, destination: .discard)))
        #expect(error.code == .connectionRefused)
        #expect(error.isTransient)
        #expect(!error.isNetworkUnavailable)
    }

    @Test func aStalledTransferTimesOut() async throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.lowSpeedTime = .seconds(1)
        configuration.lowSpeedLimit = 1000
        let engine = try CurlEngine(configuration: configuration)
        try await withLoopbackOrigin { origin in
            defer { directory.cleanUp() }
            let path = "/bytes/1000000/stall.bin"
            origin.inject(.stall(.seconds(30), afterBytes: 100_000), at: path)
            let started = ContinuousClock.now
            let error = await #expect(throws: DownloadError.self) {
                try await engine.transfer(.download(origin.url(path), to: directory.file("stall.bin")))
            }
            #expect(error?.code == .timeout)
            #expect(error?.checkpoint?.bytesWritten == 100_000, "what arrived is kept")
            #expect(ContinuousClock.now - started < .seconds(10))
        }
    }

    @Test func anUnwritableDestinationIsAWriteFailure() async throws {
        try await withLoopbackOrigin { origin in
            // A regular file cannot be a directory, whoever runs the test.
            let error = try #require(await failure(.download(origin.url("/bytes/10/x"), to: "/etc/hostname/sub/file.bin")))
            #expect(error.code == .writeFailed)
            #expect(error.isLocal)
            #expect(error.message.contains("/etc/hostname/sub/file.bin"))
        }
    }

    @Test func aFullDiskIsReportedAsSuch() async throws {
        try await withLoopbackOrigin { origin in
            // Every write to /dev/full fails with ENOSPC.
            let request = TransferRequest(
                url: origin.url("/bytes/100000/x"), destination: .file(path: "/dev/full", offset: 0, ownsTail: false))
            let error = try #require(await failure(request))
            #expect(error.code == .diskFull)
            #expect(error.systemErrno == ENOSPC)
        }
    }

    @Test func memoryDestinationsHaveALimit() async throws {
        try await withLoopbackOrigin { origin in
            let small = try await engine.transfer(.fetch(origin.url("/bytes/1000/m"), limit: 1000))
            #expect(small.body.map([UInt8].init) == origin.content(at: "/bytes/1000/m").bytes(0..<1000))
            let error = try #require(await failure(.fetch(origin.url("/bytes/1001/m"), limit: 1000)))
            #expect(error.code == .responseTooLarge)
        }
    }

    @Test func headReportsSizeAndRangeSupportWithoutABody() async throws {
        try await withLoopbackOrigin { origin in
            let result = try await engine.transfer(TransferRequest(
                url: origin.url("/bytes/123456/h"), method: .head, destination: .discard))
            #expect(result.status == 200)
            #expect(result.resourceLength == 123_456)
            #expect(result.acceptsRanges)
            #expect(result.validator?.hasStrongETag == true)
            #expect(result.bytesReceived == 0)
            #expect(origin.bytesServed(for: "/bytes/123456/h") == 0)
        }
    }

    @Test func customHeadersAndUserAgentAreSent() async throws {
        var configuration = CurlEngine.Configuration.forTests()
        configuration.userAgent = "TesseraTest/1"
        configuration.defaultHeaders = ["X-Default": "d", "X-Both": "default"]
        let engine = try CurlEngine(configuration: configuration)
        try await withLoopbackOrigin { origin in
            _ = try await engine.transfer(TransferRequest(
                url: origin.url("/bytes/10/h"), headers: ["X-Both": "request", "Authorization": "Bearer t"],
                destination: .discard))
            let request = try #require(origin.requests(for: "/bytes/10/h").first)
            #expect(request.header("User-Agent") == "TesseraTest/1")
            #expect(request.header("X-Default") == "d")
            #expect(request.header("X-Both") == "request")
            #expect(request.header("Authorization") == "Bearer t")
            #expect(request.header("Accept-Encoding") == nil, "file transfers ask for the identity encoding")
        }
    }

    /// A TLS handshake the connection broke off (reset, or closed without a word) is a lost
    /// connection, retried; one the peer answered with something that is not TLS is a TLS failure.
    @Test(arguments: [("reset", DownloadError.Code.connectionLost), ("closed", .connectionLost), ("plain HTTP", .tlsFailure)])
    func aHandshakeCutOffIsALostConnection(peer: String, expected: DownloadError.Code) async throws {
        let server = try RawAnswerServer(
            answer: peer == "plain HTTP" ? "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" : "",
            reset: peer == "reset")
        defer { server.stop() }
        let engine = try CurlEngine(configuration: .forTests())
        let error = await #expect(throws: DownloadError.self) {
            try await engine.transfer(.fetch(URL(string: "https://127.0.0.1:\(server.port)/f")!))
        }
        #expect(error?.code == expected, "\(error.map { "\($0)" } ?? "no error")")
    }

    @Test func curlCodesMapToTheRightErrorCodes() {
        #expect(CurlTransfer.errorCode(for: CURLE_COULDNT_RESOLVE_HOST, osErrno: 0) == .dnsFailure)
        #expect(CurlTransfer.errorCode(for: CURLE_COULDNT_RESOLVE_PROXY, osErrno: 0) == .dnsFailure)
        #expect(CurlTransfer.errorCode(for: CURLE_COULDNT_CONNECT, osErrno: ENETUNREACH) == .networkUnreachable)
        #expect(CurlTransfer.errorCode(for: CURLE_COULDNT_CONNECT, osErrno: EHOSTUNREACH) == .networkUnreachable)
        #expect(CurlTransfer.errorCode(for: CURLE_COULDNT_CONNECT, osErrno: ECONNREFUSED) == .connectionRefused)
        #expect(CurlTransfer.errorCode(for: CURLE_OPERATION_TIMEDOUT, osErrno: 0) == .timeout)
        #expect(CurlTransfer.errorCode(for: CURLE_PARTIAL_FILE, osErrno: 0) == .connectionLost)
        #expect(CurlTransfer.errorCode(for: CURLE_RECV_ERROR, osErrno: ECONNRESET) == .connectionLost)
        #expect(CurlTransfer.errorCode(for: CURLE_PEER_FAILED_VERIFICATION, osErrno: 0) == .tlsFailure)
        #expect(CurlTransfer.errorCode(for: CURLE_UNSUPPORTED_PROTOCOL, osErrno: 0) == .unsafeInput)
        #expect(CurlTransfer.errorCode(for: CURLE_TOO_MANY_REDIRECTS, osErrno: 0) == .tooManyRedirects)
        #expect(CurlTransfer.errorCode(for: CURLE_SSL_CONNECT_ERROR, osErrno: 0) == .tlsFailure)
        #expect(CurlTransfer.errorCode(for: CURLE_SSL_CONNECT_ERROR, osErrno: ECONNRESET) == .connectionLost)
        #expect(
            CurlTransfer.errorCode(
                for: CURLE_SSL_CONNECT_ERROR, osErrno: 0,
                detail: "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to example.org:443 ") == .connectionLost)
        #expect(
            CurlTransfer.errorCode(
                for: CURLE_SSL_CONNECT_ERROR, osErrno: 0,
                detail: "OpenSSL/3.0.22: error:0A00010B:SSL routines::wrong version number") == .tlsFailure)
        #expect(DownloadError(.dnsFailure, "x").isNetworkUnavailable)
        #expect(DownloadError(.networkUnreachable, "x").isNetworkUnavailable)
    }
}

/// A server on 127.0.0.1 that answers every connection with fixed bytes (not HTTP), for answers
/// `LoopbackOrigin` will not send.
final class RawAnswerServer: @unchecked Sendable {
    private let socket: LoopbackSocket
    var port: Int { socket.port }

    /// Answers `answer` after reading the request's first bytes and closes the connection; with
    /// `reset`, closes it with a reset (TCP RST) after the read instead.
    init(answer: String, reset: Bool = false) throws {
        let socket = try LoopbackSocket()
        self.socket = socket
        let bytes = Array(answer.utf8)
        Thread {
            while true {
                let client = accept(socket.descriptor, nil, nil)
                guard client >= 0 else { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = read(client, &buffer, buffer.count)
                if reset {
                    var lingering = linger(l_onoff: 1, l_linger: 0)
                    _ = setsockopt(client, SOL_SOCKET, SO_LINGER, &lingering, socklen_t(MemoryLayout<linger>.size))
                } else {
                    _ = bytes.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
                }
                close(client)
            }
        }.start()
    }

    func stop() { socket.close() }
}
