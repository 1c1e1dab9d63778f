import Foundation
import Testing
@testable import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(2))) struct ManagerRetryTests {
    @Test func backoffGrowsExponentiallyWithJitterWithinTheCap() async throws {
        try await withManager(configure: {
            $0.retry = RetryPolicy(maxAttempts: 6, baseDelay: .milliseconds(400), maxDelay: .seconds(2))
        }) { harness in
            let fixture = harness.fixture("backoff")
            harness.origin.inject(.status(500), at: harness.segmentPath("backoff", 0, 0, size: 10_000), times: 5)
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            let delays = harness.sleeper.delays
            // (Required: a run cut short by the time limit must fail here, not index past the end.)
            try #require(delays.count == 5, "\(delays)")
            // Equal jitter: attempt n waits between half and all of min(cap, base × 2^(n-1)).
            for (index, delay) in delays.enumerated() {
                let full = min(2.0, 0.4 * Double(1 << index))
                #expect(delay.secondsValue >= full / 2 - 0.001 && delay.secondsValue <= full + 0.001, "attempt \(index + 1): \(delay)")
            }
            #expect(delays[3].secondsValue >= 1.0 && delays[4].secondsValue <= 2.0)
            #expect(harness.outputsMatch(fixture))
        }
    }

    @Test func theDelaysAreTheSameForTheSameSeed() {
        let policy = RetryPolicy(maxAttempts: 5, baseDelay: .milliseconds(100), maxDelay: .seconds(10))
        var a = SplitMixRandom(seed: 7), b = SplitMixRandom(seed: 7), c = SplitMixRandom(seed: 8)
        let first = (1...5).map { policy.delay(afterFailure: $0, retryAfter: nil, using: &a) }
        #expect(first == (1...5).map { policy.delay(afterFailure: $0, retryAfter: nil, using: &b) })
        #expect(first != (1...5).map { policy.delay(afterFailure: $0, retryAfter: nil, using: &c) })
    }

    @Test func retryAfterIsHonoured() async throws {
        try await withManager { harness in
            let fixture = harness.fixture("retry-after")
            harness.origin.inject(.status(503, retryAfter: "7"), at: harness.segmentPath("retry-after", 0, 0, size: 10_000), times: 1)
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            #expect(harness.sleeper.delays == [.seconds(7)])
            let retried = await harness.sawEvent {
                if case .taskError(_, let error, let willRetry) = $0 { return willRetry && error.httpStatus == 503 } else { return false }
            }
            #expect(retried)
        }
    }

    @Test func aRetryAfterHoldsTheSameServersMirrorsToo() async throws {
        try await withManager { harness in
            // Two URLs of the segment on the server that answered 503 with Retry-After: the switch
            // to the mirror waits as long as the server asked (not a millisecond later).
            let fixture = harness.fixture("hold-server") { document in
                let primary = document.outputs[0].segments[0].urls[0]
                document.outputs[0].segments[0].urls = [primary, primary + "?mirror"]
            }
            harness.origin.inject(.status(503, retryAfter: "7"), at: harness.segmentPath("hold-server", 0, 0, size: 10_000), times: 1)
            let started = ContinuousClock.now
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            let elapsed = ContinuousClock.now - started
            #expect(harness.sleeper.delays.count == 1, "\(harness.sleeper.delays)")
            // What is left of the 7 s when the mirror is chosen: at most 7 s, and no less than
            // 7 s minus the time the whole test took (a loaded machine takes a moment).
            #expect(harness.sleeper.delays.allSatisfy { $0 <= .seconds(7) && $0 + elapsed >= .seconds(7) },
                    "\(harness.sleeper.delays) after \(elapsed)")
            #expect(harness.outputsMatch(fixture))
        }
    }

    @Test func aRetryAfterInAnHTTPDateIsHonouredOnTheFirstRetry() async throws {
        try await withManager { harness in
            let fixture = harness.fixture("hold-date")
            // The date is read against the response's Date: ask for 60 s from now (the sleeper
            // only records it; a loaded machine may take a few of those seconds to get there).
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let later = formatter.string(from: Date().addingTimeInterval(60))
            harness.origin.inject(.status(503, retryAfter: later), at: harness.segmentPath("hold-date", 0, 0, size: 10_000), times: 1)
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            let first = try #require(harness.sleeper.delays.first)
            #expect(first >= .seconds(40) && first <= .seconds(61), "\(harness.sleeper.delays)")
        }
    }

    @Test func aFileWhoseServerAskedToWaitWaitsWithoutAnErrorOfItsOwn() async throws {
        try await withManager(configure: { $0.maxConcurrentSegments = 1 }) { harness in
            // Two files on one server, one transfer at a time: the first is answered 503 with
            // Retry-After, so the second, next on the slot, finds its server asked to wait. It
            // waits as asked, and the only error told is the server's (the run makes none up).
            let fixture = harness.fixture("hold-next", outputs: 2)
            harness.origin.inject(.status(503, retryAfter: "7"), at: harness.segmentPath("hold-next", 0, 0, size: 10_000), times: 1)
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            #expect(harness.outputsMatch(fixture))
            let completed = await harness.sawEvent {
                if case .taskStateChanged(let info, _) = $0 { return info.id == fixture.id && info.state == .completed } else { return false }
            }
            #expect(completed)
            let errors = harness.log.errors(of: fixture.id)
            #expect(errors.map(\.httpStatus) == [503], "\(errors.map(\.message))")
            #expect(harness.sleeper.delays.count == 2, "\(harness.sleeper.delays)")
        }
    }

    @Test func aMirrorOnAnotherServerIsAskedAtOnce() async throws {
        try await withManager { harness in
            // The same origin under another name is another server as far as Retry-After goes.
            let fixture = harness.fixture("other-server") { document in
                let primary = document.outputs[0].segments[0].urls[0]
                document.outputs[0].segments[0].urls = [primary, primary.replacingOccurrences(of: "127.0.0.1", with: "localhost")]
            }
            harness.origin.inject(.status(503, retryAfter: "7"), at: harness.segmentPath("other-server", 0, 0, size: 10_000), times: 1)
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            #expect(harness.sleeper.delays.isEmpty, "\(harness.sleeper.delays)")
            #expect(harness.outputsMatch(fixture))
        }
    }

    @Test func theFailureCounterResetsAfterProgress() async throws {
        try await withManager(configure: {
            $0.retry = RetryPolicy(maxAttempts: 2, baseDelay: .milliseconds(10), maxDelay: .milliseconds(20))
        }) { harness in
            // Five drops in a row would exhaust two attempts, but each attempt gets further.
            let fixture = harness.fixture("progress", size: 1_000_000)
            let path = harness.segmentPath("progress", 0, 0, size: 1_000_000)
            harness.origin.inject(.dropConnection(afterBytes: 150_000), at: path, times: 5)
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            #expect(harness.origin.requestCount(for: path) == 6)
            #expect(harness.outputsMatch(fixture))
            #expect(harness.origin.bytesServed(for: path) <= 1_000_000 + 64 * 1024 * 5, "each retry resumed")
        }
    }

    @Test func exhaustedRetriesFailTheTaskWithTheError() async throws {
        try await withManager(configure: {
            $0.retry = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(10), maxDelay: .milliseconds(20))
        }) { harness in
            let fixture = harness.fixture("exhaust", segments: 2)
            harness.origin.inject(.status(502), at: harness.segmentPath("exhaust", 0, 1, size: 10_000))
            try await harness.manager.start(fixture.entity)
            let failed = try #require(await harness.waitForState(fixture.id, .failed))
            #expect(failed.error?.httpStatus == 502)
            #expect(harness.origin.requestCount(for: harness.segmentPath("exhaust", 0, 1, size: 10_000)) == 3)
            #expect(!FileManager.default.fileExists(atPath: harness.outputPath(fixture.entity, 0)), "no output with a missing segment")
            #expect(await harness.sawEvent {
                if case .taskError(_, let error, false) = $0 { return error.httpStatus == 502 } else { return false }
            })
        }
    }

    @Test func aFailingPrimaryFallsOverToTheMirror() async throws {
        try await withManager { harness in
            let mirror = "/mirror/seg.bin"
            harness.origin.serve(mirror, .generated(size: 50_000))
            let fixture = harness.fixture("mirror", size: 50_000) { document in
                document.outputs[0].segments[0].urls.append(harness.origin.url(mirror).absoluteString)
            }
            let primary = harness.segmentPath("mirror", 0, 0, size: 50_000)
            // The mirror serves the same bytes as the primary would.
            harness.origin.serve(mirror, .bytes(harness.origin.content(at: primary).bytes(0..<50_000)))
            harness.origin.inject(.status(500), at: primary)
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            #expect(harness.origin.requestCount(for: primary) == 1)
            #expect(harness.origin.requestCount(for: mirror) == 1)
            #expect(harness.sleeper.delays.isEmpty, "a mirror is tried at once, without backoff")
            #expect(harness.outputsMatch(fixture))
        }
    }

    @Test func aMirrorThatAnswered404IsTriedLastByTheNextPieces() async throws {
        try await withManager(configure: { $0.maxConcurrentSegments = 1 }) { harness in
            // One file in four pieces, each listing a dead primary and a good mirror.
            let size: Int64 = 40_000, piece: Int64 = 10_000
            let good = "/mirrors/good/file.bin", dead = "/mirrors/dead/file.bin"
            harness.origin.serve(good, .generated(size: size))
            harness.origin.inject(.status(404), at: dead)
            let urls = [harness.origin.url(dead).absoluteString, harness.origin.url(good).absoluteString]
            let segments = stride(from: Int64(0), to: size, by: Int(piece)).map { offset in
                FixtureDocument.Segment(urls: urls, size: piece, offset: offset, range: [offset, piece])
            }
            harness.serve(FixtureDocument(title: "pieces", outputs: [.init(name: "out-0.bin", segments: segments, assembly: "pieces")]), as: "pieces")
            let entity = FixtureEntity(key: "pieces", manifestURL: "http://127.0.0.1:\(harness.origin.port)/manifests/pieces.json")
            try await harness.manager.start(entity)
            await harness.waitForState(entity.taskID, .completed)
            #expect(harness.origin.requestCount(for: dead) == 1, "the dead mirror is asked once, not once per piece")
            #expect(harness.origin.requests(for: good).filter { $0.method == "GET" }.count == 4)
            #expect(await harness.origin.content(at: good).verifyFile(atPath: harness.outputPath(entity, 0), size: size))
        }
    }

    @Test func aGoneURLIsResolvedAgain() async throws {
        try await withManager { harness in
            // Attempt 1's manifest points at a URL that answers 403 (an expired signature);
            // attempt 2's at a good one.
            let good = harness.segmentPath("fresh", 0, 0, size: 30_000)
            let stale = "/signed/expired.bin"
            harness.origin.inject(.status(403), at: stale)
            harness.serve(FixtureDocument(title: "v1", outputs: [.init(name: "out-0.bin", segments: [.init(urls: [harness.origin.url(stale).absoluteString], size: 30_000)])]), as: "resolve-1")
            harness.serve(FixtureDocument(title: "v2", outputs: [.init(name: "out-0.bin", segments: [.init(urls: [harness.origin.url(good).absoluteString], size: 30_000)])]), as: "resolve-2")
            let entity = FixtureEntity(key: "fresh", manifestURL: "http://127.0.0.1:\(harness.origin.port)/manifests/resolve-{attempt}.json")
            try await harness.manager.start(entity)
            let done = try #require(await harness.waitForState(entity.taskID, .completed))
            #expect(done.resolveCount == 2)
            #expect(harness.origin.requestCount(for: stale) == 1)
            let matches = fileBytes(harness.root.file("fixtures/fresh/out-0.bin")) == harness.origin.content(at: good).bytes(0..<30_000)
            #expect(matches)
            #expect(await harness.sawEvent { if case .taskStateChanged(let info, .downloading) = $0 { return info.state == .resolving } else { return false } })
        }
    }

    @Test func anExpiredManifestIsResolvedAgain() async throws {
        try await withManager(configure: { $0.maxConcurrentSegments = 1 }) { harness in
            let fixture = harness.fixture("expiring", segments: 6, size: 100_000) { $0.expiresInSeconds = 0.4 }
            for segment in 0..<6 {
                harness.origin.inject(.throttle(bytesPerSecond: 1_000_000), at: harness.segmentPath("expiring", 0, segment, size: 100_000))
            }
            try await harness.manager.start(fixture.entity)
            let done = try #require(await harness.waitForState(fixture.id, .completed))
            #expect(done.resolveCount == 2)
            #expect(harness.origin.requestCount(for: "/manifests/expiring.json") == 2)
            #expect(harness.outputsMatch(fixture))
            for segment in 0..<6 {
                #expect(harness.origin.requestCount(for: harness.segmentPath("expiring", 0, segment, size: 100_000)) == 1, "done segments are kept across the resolve")
            }
        }
    }

    @Test func everyURLGoneMakesTheTaskInvalid() async throws {
        try await withManager(configure: { $0.retry.maxReResolves = 2 }) { harness in
            let fixture = harness.fixture("gone")
            harness.origin.inject(.status(404), at: harness.segmentPath("gone", 0, 0, size: 10_000))
            try await harness.manager.start(fixture.entity)
            let invalid = try #require(await harness.waitForState(fixture.id, .invalid))
            #expect(invalid.error?.httpStatus == 404)
            #expect(invalid.resolveCount == 3, "the first resolve and two more")
        }
    }

    @Test func anUnparseableManifestMakesTheTaskInvalid() async throws {
        try await withManager { harness in
            harness.origin.serve("/manifests/broken.json", .text("{\"title\": \"x\", \"outputs\": [ {\"name\": 5 } ]}", contentType: "application/json"))
            let entity = FixtureEntity(key: "broken", manifestURL: harness.origin.url("/manifests/broken.json").absoluteString)
            try await harness.manager.start(entity)
            let invalid = try #require(await harness.waitForState(entity.taskID, .invalid))
            #expect(invalid.error?.code == .manifestInvalid)
            #expect(harness.origin.requestCount(for: "/manifests/broken.json") == 1, "a parse error is not retried")
        }
    }

    @Test func aManifestThatCannotBeFetchedIsRetriedThenFails() async throws {
        try await withManager(configure: {
            $0.retry = RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(10), maxDelay: .milliseconds(20))
        }) { harness in
            let fixture = harness.fixture("manifest-503")
            harness.origin.inject(.status(503), at: "/manifests/manifest-503.json")
            try await harness.manager.start(fixture.entity)
            let failed = try #require(await harness.waitForState(fixture.id, .failed))
            #expect(failed.error?.httpStatus == 503)
            #expect(harness.origin.requestCount(for: "/manifests/manifest-503.json") == 3)
        }
    }

    @Test func aSegmentChecksumMismatchIsFetchedAgainOnceThenInvalid() async throws {
        try await withManager { harness in
            let path = harness.segmentPath("bad-hash", 0, 0, size: 10_000)
            let wrong = String(repeating: "ab", count: 32)
            let fixture = harness.fixture("bad-hash") { $0.outputs[0].segments[0].sha256 = wrong }
            try await harness.manager.start(fixture.entity)
            let invalid = try #require(await harness.waitForState(fixture.id, .invalid))
            #expect(invalid.error?.code == .checksumMismatch)
            #expect(harness.origin.requestCount(for: path) == 2)
            #expect(!FileManager.default.fileExists(atPath: harness.outputPath(fixture.entity, 0)))
        }
    }

    @Test func aRightSegmentChecksumPasses() async throws {
        try await withManager { harness in
            let path = harness.segmentPath("good-hash", 0, 0, size: 10_000)
            let digest = Checksum.compute(.sha256, bytes: harness.origin.content(at: path).bytes(0..<10_000)).hexDigest
            let fixture = harness.fixture("good-hash") { $0.outputs[0].segments[0].sha256 = digest }
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            #expect(harness.origin.requestCount(for: path) == 1)
        }
    }

    @Test func anOutputChecksumMismatchIsFetchedAgainOnceThenInvalid() async throws {
        try await withManager { harness in
            let fixture = harness.fixture("bad-output", segments: 3) { $0.outputs[0].sha256 = String(repeating: "0", count: 64) }
            try await harness.manager.start(fixture.entity)
            let invalid = try #require(await harness.waitForState(fixture.id, .invalid))
            #expect(invalid.error?.code == .checksumMismatch)
            for segment in 0..<3 {
                #expect(harness.origin.requestCount(for: harness.segmentPath("bad-output", 0, segment, size: 10_000)) == 2)
            }
            #expect(!FileManager.default.fileExists(atPath: harness.outputPath(fixture.entity, 0)))
        }
    }

    @Test func aRightOutputChecksumPasses() async throws {
        try await withManager { harness in
            var fixture = harness.fixture("good-output", segments: 3)
            let digest = Checksum.compute(.sha256, bytes: harness.expectedBytes(of: fixture.document, output: 0)).hexDigest
            fixture = harness.fixture("good-output", segments: 3) { $0.outputs[0].sha256 = digest }
            try await harness.manager.start(fixture.entity)
            await harness.waitForState(fixture.id, .completed)
            #expect(harness.outputsMatch(fixture))
        }
    }
}
