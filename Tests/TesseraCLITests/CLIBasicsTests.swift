import Foundation
import Testing
import Tessera
import TesseraTesting

@Suite(.timeLimit(.minutes(3))) struct CLIBasicsTests {
    @Test func aPlainURLIsSavedUnderItsOwnNameAndTheExitCodeIsZero() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let path = "/bytes/300000/files/report.bin"
            let result = try await cli.run(["get", origin.url(path).absoluteString])
            #expect(result.status == 0, "\(result.errors)")
            #expect(await origin.content(at: path).verifyFile(atPath: cli.downloads + "/report.bin", size: 300_000))
            #expect(result.output.contains("completed"))
            // Nothing else is left in the download directory (no empty `.tessera/work`).
            #expect(try FileManager.default.contentsOfDirectory(atPath: cli.downloads) == ["report.bin"])
        }
    }

    @Test func theSummaryOfAListLongerThanTheRunKeepsIsTheSame() async throws {
        // A run keeps the end states of up to 10,000 tasks; a longer list's summary asks the
        // manager for them a thousand at a time: the same lines, in the same order.
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let urls = (1...5).map { origin.url("/bytes/\($0 * 1000)/f\($0).bin").absoluteString }
            let kept = try await cli.run(["get"] + urls)
            #expect(kept.status == 0, "\(kept.errors)")
            let asked = try await cli.run(["get"] + urls, environment: ["TESSERA_TEST_KEPT_TASKS": "2"])
            #expect(asked.status == 0, "\(asked.errors)")
            func summary(_ output: String) -> [Substring] {
                output.split(separator: "\n").filter { $0.hasPrefix("✓") || $0.hasPrefix("    →") || $0.contains(" completed") }
            }
            #expect(summary(kept.output).count == 11, "\(kept.output)")
            #expect(summary(asked.output) == summary(kept.output), "\(asked.output)")
            #expect(asked.output.contains("5 of 5 completed"))
        }
    }

    @Test func contentDispositionNamesTheFileAndNamesNeverCollide() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            origin.serve("/download?id=7", .init(.generated(size: 1000), extraHeaders: [("Content-Disposition", #"attachment; filename="paper.pdf""#)]))
            origin.serve("/download", .init(.generated(size: 1000), extraHeaders: [("Content-Disposition", #"attachment; filename="paper.pdf""#)]))
            try FileManager.default.createDirectory(atPath: cli.downloads, withIntermediateDirectories: true)
            try Data("keep me".utf8).write(to: URL(fileURLWithPath: cli.downloads + "/paper.pdf"))
            let result = try await cli.run(["get", origin.url("/download").absoluteString])
            #expect(result.status == 0, "\(result.errors)")
            #expect(fileSize(cli.downloads + "/paper.1.pdf") == 1000)
            #expect((try? String(contentsOfFile: cli.downloads + "/paper.pdf", encoding: .utf8)) == "keep me")
        }
    }

    @Test func jsonLinesEndWithASummaryOfOutputs() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let result = try await cli.run(["get", "--json", origin.url("/bytes/5000/a.bin").absoluteString, origin.url("/bytes/7000/b.bin").absoluteString])
            #expect(result.status == 0)
            let lines = result.jsonLines
            #expect(lines.allSatisfy { $0["type"] is String })
            #expect(lines.contains { $0["type"] as? String == "task_state" && $0["state"] as? String == "completed" })
            let summary = try #require(lines.last)
            #expect(summary["type"] as? String == "summary")
            #expect(summary["exitCode"] as? Int == 0)
            let tasks = try #require(summary["tasks"] as? [[String: Any]])
            #expect(tasks.count == 2)
            let sizes = tasks.compactMap { ($0["outputs"] as? [[String: Any]])?.first?["size"] as? Int }.sorted()
            #expect(sizes == [5000, 7000])
        }
    }

    @Test func inputsComeFromAFileToo() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let list = cli.directory + "/inputs.txt"
            try "# a comment\n\(origin.url("/bytes/100/one.bin").absoluteString)\n\n\(origin.url("/bytes/200/two.bin").absoluteString)\n".write(toFile: list, atomically: true, encoding: .utf8)
            let result = try await cli.run(["get", "-i", list])
            #expect(result.status == 0, "\(result.errors)")
            #expect(fileSize(cli.downloads + "/one.bin") == 100)
            #expect(fileSize(cli.downloads + "/two.bin") == 200)
        }
    }

    @Test func usageErrorsExitWithTwo() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        #expect(try await cli.run(["get"]).status == 2)
        #expect(try await cli.run(["get", "--limit-rate", "fast", "http://127.0.0.1:1/x"]).status == 2)
        #expect(try await cli.run(["get", "-j", "0", "http://127.0.0.1:1/x"]).status == 2)
        #expect(try await cli.run(["frobnicate"]).status == 2)
        let typo = try await cli.run(["gte", "http://127.0.0.1:1/x"])
        #expect(typo.status == 2)
        #expect(typo.errors.contains("did you mean \"get\""), "\(typo.errors)")
        let missing = try await cli.run(["get", "-i", cli.directory + "/no-such-list"])
        #expect(missing.status == 2)
        #expect(missing.errors.contains("No such file or directory"), "\(missing.errors)")
        #expect(!missing.errors.contains("could not be completed"))
        // Commands that download nothing take no cache option.
        #expect(try await cli.run(["list", "--no-cache"]).status == 2)
        #expect(try await cli.run(["pause", "--no-cache", "x"]).status == 2)
        #expect(try await cli.run(["--help"]).status == 0)
        #expect(try await cli.run(["--version"]).output.contains("0."))
    }

    /// An error page is quoted by its first line of text, not whole (an nginx page filled the
    /// line with its HTML).
    @Test func anHTTPErrorQuotesItsPageShortly() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let page = """
                <!DOCTYPE HTML PUBLIC "-//IETF//DTD HTML 2.0//EN">
                <html><head>
                <title>404 Not Found</title>
                </head><body>
                <h1>Not Found</h1>
                <p>The requested URL was not found on this server.</p>
                <hr>
                <address>Apache/2.4.62 (Debian) Server at 127.0.0.1 Port 80</address>
                </body></html>
                """
            origin.inject(.answer(status: 404, body: page), at: "/missing.bin")
            let gone = try await cli.run(["get", origin.url("/missing.bin").absoluteString])
            #expect(gone.status == 1)
            let lines = (gone.output + gone.errors).split(separator: "\n").filter { $0.contains("404") }
            #expect(
                lines.contains { $0.contains("the server answered 404 Not Found: The requested URL was not found on this server.") },
                "\(gone.output) \(gone.errors)")
            for line in lines {
                #expect(!line.contains("<") && !line.contains("Apache"), "\(line)")
            }
        }
    }

    @Test func errorsAreOneClearLineNamingTheInput() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let unknown = try await cli.run(["get", "nosuchplugin:42"])
            #expect(unknown.status == 1)
            #expect(unknown.errors.contains("nosuchplugin:42"))
            #expect(unknown.errors.contains("no plugin is called \"nosuchplugin\""))

            let scheme = try await cli.run(["get", "ftp://127.0.0.1/file.iso"])
            #expect(scheme.status == 1)
            #expect(scheme.errors.contains("ftp://127.0.0.1/file.iso: only http and https"))

            origin.inject(.status(404), at: "/gone.bin")
            let gone = try await cli.run(["get", origin.url("/gone.bin").absoluteString])
            #expect(gone.status == 1)
            #expect(gone.output.contains("404") || gone.errors.contains("404"), "\(gone.output) \(gone.errors)")

            let readOnly = cli.directory + "/readonly"
            try FileManager.default.createDirectory(atPath: readOnly, withIntermediateDirectories: true)
            try "x".write(toFile: readOnly + "/file", atomically: true, encoding: .utf8)
            // A file where the download directory should be: nobody can write into it.
            let unwritable = try await cli.run(["get", origin.url("/bytes/100/x.bin").absoluteString, "-o", readOnly + "/file/sub"])
            #expect(unwritable.status == 1)
            #expect((unwritable.output + unwritable.errors).contains(readOnly + "/file"), "\(unwritable.output) \(unwritable.errors)")

            // Nothing listens on the port: after --network-wait, one line and exit status 1.
            let down = try DownPort()
            let refused = try await cli.run(["get", "--network-wait", "0", "http://127.0.0.1:\(down.port)/file.bin"])
            #expect(refused.status == 1)
            #expect(refused.output.contains("Couldn't connect to server") && refused.output.contains("gave up"), "\(refused.output)")
            down.release()  // (held until here: nothing else takes the port meanwhile)

            for result in [unknown, scheme, gone, unwritable, refused] {
                #expect(!result.errors.contains("Fatal error") && !result.errors.contains("Stack trace"))
            }
        }
    }

    @Test func pluginsAreListed() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let result = try await cli.run(["plugins"])
        #expect(result.status == 0)
        for plugin in ["direct", "playurl", "dash", "metalink", "hls"] {
            #expect(result.output.contains(plugin), "\(plugin) is missing from `tessera plugins`")
        }
    }

    @Test func completedMeansTheFileIsThere() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let path = "/bytes/50000/report.bin"
            let url = origin.url(path).absoluteString
            let first = try await cli.run(["get", "-o", cli.directory + "/A", url])
            #expect(first.status == 0, "\(first.errors)")
            #expect(fileSize(cli.directory + "/A/report.bin") == 50_000)
            // The same task, another download root: fetched there, not "completed" elsewhere.
            let second = try await cli.run(["get", "-d", cli.directory + "/B", url])  // aria2c's spelling
            #expect(second.status == 0, "\(second.errors)")
            #expect(await origin.content(at: path).verifyFile(atPath: cli.directory + "/B/report.bin", size: 50_000))
            #expect(origin.requestCount(for: path) == 2)
            // Deleted by hand: fetched again.
            try FileManager.default.removeItem(atPath: cli.directory + "/A/report.bin")
            let third = try await cli.run(["get", "-v", "-P", cli.directory + "/A", url])  // yt-dlp's spelling
            #expect(third.status == 0, "\(third.errors)")
            #expect(third.errors.contains("output is missing"), "-v tells why: \(third.errors)")
            #expect(await origin.content(at: path).verifyFile(atPath: cli.directory + "/A/report.bin", size: 50_000))
            #expect(origin.requestCount(for: path) == 3)
            // There and whole: nothing is fetched.
            let fourth = try await cli.run(["get", "-o", cli.directory + "/A", url])
            #expect(fourth.status == 0)
            #expect(origin.requestCount(for: path) == 3)
        }
    }

    @Test func aSecondGetHandsItsInputsToTheRunningOne() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let slow = "/bytes/3000000/slow.iso", quick = "/bytes/70000/quick.bin", missing = "/nothing-here.bin"
            origin.inject(.stall(.seconds(30), afterBytes: 600_000), at: slow)
            origin.inject(.status(404), at: missing)
            let (first, out, _) = try cli.start(["get", origin.url(slow).absoluteString])
            defer { first.terminate() }
            #expect(await eventually(within: .seconds(30)) { origin.bytesServed(for: slow) >= 500_000 })
            // The same state directory: not refused; the running tessera fetches, this one follows.
            let second = try await cli.run(["get", origin.url(quick).absoluteString, origin.url(missing).absoluteString])
            #expect(second.output.contains("handed 2 tasks"), "\(second.output) \(second.errors)")
            #expect(second.output.contains("completed direct:\(origin.url(quick).absoluteString)"), "\(second.output)")
            #expect(second.status == 1, "one of the two failed")
            #expect(await origin.content(at: quick).verifyFile(atPath: cli.downloads + "/quick.bin", size: 70_000))
            // The running one counts them as its own, and still runs its first task.
            #expect(first.termination == nil)
            first.interrupt()
            #expect(await first.exited(within: .seconds(20)))
            let output = fileText(out)
            #expect(output.contains("quick.bin"), "\(output)")
        }
    }

    @Test func aConfigurationFileGivesDefaultsTheCommandLineOverrides() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let config = cli.directory + "/config-home"
            try FileManager.default.createDirectory(atPath: config + "/tessera", withIntermediateDirectories: true)
            try """
                # defaults, as yt-dlp and aria2c read theirs
                header=X-From-Config: yes
                --user-agent from-config/1
                continue
                """.write(toFile: config + "/tessera/config", atomically: true, encoding: .utf8)
            let environment = ["XDG_CONFIG_HOME": config]
            let first = try await cli.run(["get", origin.url("/bytes/1000/a.bin").absoluteString], environment: environment)
            #expect(first.status == 0, "\(first.errors)")
            let request = try #require(origin.requests(for: "/bytes/1000/a.bin").first)
            #expect(request.header("X-From-Config") == "yes")
            #expect(request.header("User-Agent") == "from-config/1")
            // The command line wins; --no-config reads none.
            _ = try await cli.run(["get", "--user-agent", "from-line/2", origin.url("/bytes/1000/b.bin").absoluteString], environment: environment)
            #expect(origin.requests(for: "/bytes/1000/b.bin").first?.header("User-Agent") == "from-line/2")
            _ = try await cli.run(["get", "--no-config", origin.url("/bytes/1000/c.bin").absoluteString], environment: environment)
            #expect(origin.requests(for: "/bytes/1000/c.bin").first?.header("X-From-Config") == nil)
            // A line that is no option is an error that names the file and the line.
            try "header=X-Ok: 1\nnot an option\n".write(toFile: config + "/tessera/config", atomically: true, encoding: .utf8)
            let bad = try await cli.run(["get", origin.url("/bytes/1000/d.bin").absoluteString], environment: environment)
            #expect(bad.status == 2)
            #expect(bad.errors.contains("config, line 2"), "\(bad.errors)")
            // --dry-run resolves and downloads nothing.
            let dry = try await cli.run(["get", "--no-config", "--dry-run", origin.url("/bytes/1000/e.bin").absoluteString])
            #expect(dry.status == 0, "\(dry.errors)")
            #expect(dry.output.contains("e.bin"), "\(dry.output)")
            #expect(fileSize(cli.downloads + "/e.bin") == nil)
        }
    }

    /// Ctrl-C (or SIGTERM) while a task waits for a host that refuses connections: the task is
    /// paused with what it had, not failed "after waiting", and the same command continues it.
    @Test(arguments: [SIGINT, SIGTERM]) func aSignalWhileATaskWaitsForItsHostPausesIt(signal: Int32) async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let down = try DownPort()
        let url = "http://127.0.0.1:\(down.port)/bytes/60000/later.bin"
        let (process, out, _) = try cli.start(["get", "--json", "--network-wait", "30", url])
        let waiting = await eventually(within: .seconds(30)) {
            (fileText(out)).contains("interrupted(network)")
        }
        #expect(waiting)
        process.send(signal)
        #expect(await process.exited(within: .seconds(20)))
        process.terminate()
        #expect(await process.ended() == .exited(130))
        let list = try await cli.run(["list", "--json", "--state-dir", cli.state])
        let task = try #require((list.json?["tasks"] as? [[String: Any]])?.first, "\(list.output)")
        #expect(task["state"] as? String == "paused", "\(task)")
        #expect((task["error"] as? String)?.contains("gave up") != true, "\(task)")
        let origin = try await LoopbackOrigin.start(replacing: down)
        let again = try await cli.run(["get", "--network-wait", "30", url])
        #expect(again.status == 0, "\(again.errors)")
        #expect(await origin.content(at: "/bytes/60000/later.bin").verifyFile(atPath: cli.downloads + "/later.bin", size: 60_000))
        try await origin.shutdown()
    }

    /// The configuration file as yt-dlp users write theirs: shell quoting, several options on
    /// a line, comments; `--config-location=FILE`; `--no-config` only where it is an option;
    /// an unknown option named with its file and line.
    @Test func theConfigurationFileIsReadAsAShellWouldSplitIt() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let file = cli.directory + "/my.conf"
            try #"""
                # quoted values lose their quotes
                --user-agent "Quoted Agent/1.0"   # a comment after the option
                --header 'X-Single: a b'  --header X-Escaped:\ c\ d
                header="X-Aria: e f"
                """#.write(toFile: file, atomically: true, encoding: .utf8)
            let a = try await cli.run(["get", "--config-location=\(file)", origin.url("/bytes/1000/a.bin").absoluteString])
            #expect(a.status == 0, "\(a.errors)")
            let request = try #require(origin.requests(for: "/bytes/1000/a.bin").first)
            #expect(request.header("User-Agent") == "Quoted Agent/1.0")
            #expect(request.header("X-Single") == "a b")
            #expect(request.header("X-Escaped") == "c d")
            #expect(request.header("X-Aria") == "e f")

            // The default file, and --no-config as the value of another option: the file counts.
            let home = cli.directory + "/config-home"
            try FileManager.default.createDirectory(atPath: home + "/tessera", withIntermediateDirectories: true)
            try "--header 'X-Default: yes'\n".write(toFile: home + "/tessera/config", atomically: true, encoding: .utf8)
            let environment = ["XDG_CONFIG_HOME": home]
            let b = try await cli.run(["get", "--user-agent=--no-config", origin.url("/bytes/1000/b.bin").absoluteString], environment: environment)
            #expect(b.status == 0, "\(b.errors)")
            #expect(origin.requests(for: "/bytes/1000/b.bin").first?.header("X-Default") == "yes")
            #expect(origin.requests(for: "/bytes/1000/b.bin").first?.header("User-Agent") == "--no-config")

            // An unknown option, a value that lost its quotes, an open quote: the file and the line.
            for (text, line) in [("--limit-rate 1M\n--no-such-option 3\n", 2), ("\n--user-agent Two Words\n", 2), ("--header 'X: open\n", 1)] {
                try text.write(toFile: file, atomically: true, encoding: .utf8)
                let bad = try await cli.run(["get", "--config-location", file, origin.url("/bytes/1000/c.bin").absoluteString])
                #expect(bad.status == 2, "\(text): \(bad.errors)")
                #expect(bad.errors.contains("\(file), line \(line)"), "\(text): \(bad.errors)")
            }
            #expect(origin.requests(for: "/bytes/1000/c.bin").isEmpty)
            // A file that cannot be read says so.
            let missing = try await cli.run(["get", "--config-location=\(file).missing", origin.url("/bytes/1000/d.bin").absoluteString])
            #expect(missing.status == 2 && missing.errors.contains("No such file"), "\(missing.errors)")
        }
    }

    @Test func aStateDirectoryThatCannotBeMadeSaysWhy() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let blocker = cli.directory + "/a-file"
        _ = FileManager.default.createFile(atPath: blocker, contents: Data("x".utf8))
        let result = try await cli.run(["get", "--state-dir", blocker + "/state", "http://127.0.0.1:1/x.bin"])
        #expect(result.status == 1)
        #expect(result.errors.contains("not a directory"), "\(result.errors)")
        #expect(!result.errors.contains("could not be completed"), "\(result.errors)")
        // A file where the cache's directory goes, inside a usable state directory.
        try FileManager.default.createDirectory(atPath: cli.state, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: cli.state + "/cache", contents: Data("x".utf8))
        let cache = try await cli.run(["get", "http://127.0.0.1:1/x.bin"])
        #expect(cache.status == 1)
        #expect(cache.errors.contains("not a directory"), "\(cache.errors)")
        #expect(!cache.errors.contains("could not be completed"), "\(cache.errors)")
    }

    @Test func ctrlCWhileAManifestIsFetchedPausesInsteadOfKilling() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let metalink = """
                <?xml version="1.0" encoding="UTF-8"?>
                <metalink xmlns="urn:ietf:params:xml:ns:metalink">
                  <file name="a.bin"><size>100</size><url>\(origin.url("/bytes/100/a.bin").absoluteString)</url></file>
                </metalink>
                """
            origin.serve("/slow.meta4", .text(metalink, contentType: "application/metalink4+xml"))
            origin.inject(.stall(.seconds(30), afterBytes: nil), at: "/slow.meta4")
            let (process, _, err) = try cli.start(["get", origin.url("/slow.meta4").absoluteString])
            #expect(await eventually(within: .seconds(30)) { origin.requestCount(for: "/slow.meta4") > 0 })
            process.interrupt()
            #expect(await process.exited(within: .seconds(10)), "tessera ends on SIGINT while it expands its inputs")
            process.terminate()
            // It exits; the signal does not kill it.
            #expect(await process.ended() == .exited(130))
            let errors = fileText(err)
            #expect(!errors.contains("cancelled"), "\(errors)")
        }
    }

    @Test func ctrlCPausesAndTheSameCommandContinuesWithoutRefetching() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let paths = (0..<4).map { "/bytes/1500000/slow-\($0).bin" }
            // Each file stops flowing half-way (however busy the machine is, none can finish first).
            for path in paths { origin.inject(.stall(.seconds(30), afterBytes: 750_000), at: path) }
            let arguments = ["get", "--json", "-j", "4"] + paths.map { origin.url($0).absoluteString }
            let (process, out, _) = try cli.start(arguments)
            // Let the first halves arrive, then Ctrl-C.
            #expect(await eventually(within: .seconds(30)) { origin.totalBytesServed >= 3_000_000 }, "served \(origin.totalBytesServed)")
            process.interrupt()
            #expect(await process.exited(within: .seconds(20)), "tessera ends on SIGINT")
            process.terminate()
            #expect(await process.ended() == .exited(130))
            let servedBefore = origin.totalBytesServed
            // The paused tasks' partial files wait in the work directory.
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: cli.downloads + "/.tessera/work")) ?? []).count { $0.hasSuffix(".part") } == 4)
            let list = try await cli.run(["list", "--json", "--state-dir", cli.state])
            let tasks = try #require(list.json?["tasks"] as? [[String: Any]])
            #expect(tasks.count == 4)
            #expect(tasks.allSatisfy { $0["state"] as? String == "paused" })
            // The summary and the store agree on what each paused task kept: the store learns it
            // when the run has stopped, not only when the pause was asked for.
            let lines = (fileText(out)).split(separator: "\n")
            let summary = lines.last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            let summarized = try #require(summary?["tasks"] as? [[String: Any]], "\(lines.suffix(3))")
            let kept = Dictionary(uniqueKeysWithValues: summarized.compactMap { task in
                (task["id"] as? String).map { ($0, task["bytes"] as? Int ?? -1) }
            })
            for task in tasks {
                let id = task["id"] as? String ?? ""
                #expect(task["bytesDone"] as? Int == kept[id], "\(id)")
                #expect((kept[id] ?? 0) > 0, "\(id) kept what arrived before the pause")
            }

            origin.clearFaults()
            let again = try await cli.run(arguments)
            #expect(again.status == 0, "\(again.errors)")
            for path in paths {
                #expect(await origin.content(at: path).verifyFile(atPath: cli.downloads + "/" + (path as NSString).lastPathComponent, size: 1_500_000))
                let requests = origin.requests(for: path).filter { $0.method == "GET" }
                #expect(requests.count == 2)
                #expect(requests.last?.header("Range") != nil, "\(path) continued where it stopped")
            }
            // Only the missing half crossed the wire again (plus what was in flight).
            #expect(origin.totalBytesServed - servedBefore < 6_000_000 - 3_000_000 + 1_000_000)
            // All four done: the work directory went with its last files.
            #expect(!FileManager.default.fileExists(atPath: cli.downloads + "/.tessera"))
        }
    }

    @Test func pauseAndResumeReachTheRunningTesseraAndRemoveDeletesTheFiles() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let slow = "/bytes/3000000/slow.iso", quick = "/bytes/200000/quick.bin"
            origin.inject(.stall(.seconds(30), afterBytes: 600_000), at: slow)  // it cannot finish before the pause
            let (process, out, _) = try cli.start(["get", origin.url(slow).absoluteString, origin.url(quick).absoluteString])
            #expect(await eventually(within: .seconds(30)) { origin.bytesServed(for: slow) >= 500_000 }, "served \(origin.bytesServed(for: slow))")
            // Another tessera, the same state directory: the command goes through the running one.
            let pause = try await cli.run(["pause", "--state-dir", cli.state, "slow.iso"])
            #expect(pause.status == 0, "\(pause.errors)")
            #expect(pause.output.contains("sent to the running tessera"))
            #expect(await process.exited(within: .seconds(20)), "the running tessera ends once its only unfinished task is paused")
            process.terminate()
            // It ended with a task paused: not a success (aria2c's "unfinished downloads").
            #expect(await process.ended() == .exited(7))
            let output = fileText(out)
            #expect(output.contains("paused direct:\(origin.url(slow).absoluteString)"), "\(output)")
            #expect(fileSize(cli.downloads + "/quick.bin") == 200_000)

            // Nobody holds the store now: resume runs the task itself, from where it stopped.
            origin.clearFaults()
            let resume = try await cli.run(["resume", "--state-dir", cli.state, "--proxy", "", "slow.iso"])
            #expect(resume.status == 0, "\(resume.errors)")
            #expect(await origin.content(at: slow).verifyFile(atPath: cli.downloads + "/slow.iso", size: 3_000_000))
            #expect(origin.requests(for: slow).filter { $0.method == "GET" }.last?.header("Range") != nil)

            // Remove with its files: gone from the store and the disk.
            let remove = try await cli.run(["remove", "--state-dir", cli.state, "--delete-files", "slow.iso"])
            #expect(remove.status == 0, "\(remove.errors)")
            #expect(fileSize(cli.downloads + "/slow.iso") == nil)
            let list = try await cli.run(["list", "--json", "--state-dir", cli.state])
            let ids = (list.json?["tasks"] as? [[String: Any]])?.compactMap { $0["id"] as? String } ?? []
            #expect(ids == ["direct:\(origin.url(quick).absoluteString)"])

            let unknown = try await cli.run(["pause", "--state-dir", cli.state, "no-such-task"])
            #expect(unknown.status == 1)
            #expect(unknown.errors.contains("no task matches \"no-such-task\""))
        }
    }

    /// With `-q` the run is told only the changes it follows (not into `resolving` and
    /// `downloading`): a task paused and resumed from another shell is followed again through
    /// `waiting`, and the run waits for it to the end.
    @Test func aQuietRunFollowsTasksResumedFromAnotherShellToTheirEnd() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let resumed = "/bytes/3000000/resumed.iso", other = "/bytes/2000000/other.bin"
            origin.inject(.stall(.seconds(60), afterBytes: 600_000), at: resumed)
            // The other task keeps the run going (stalled) while the first is paused and resumed.
            origin.inject(.stall(.seconds(60), afterBytes: 100_000), at: other)
            let (process, _, err) = try cli.start(["get", "-q", origin.url(resumed).absoluteString, origin.url(other).absoluteString])
            #expect(await eventually(within: .seconds(30)) { origin.bytesServed(for: resumed) >= 500_000 && origin.bytesServed(for: other) >= 100_000 })
            func command(_ action: String, _ name: String) async throws {
                let result = try await cli.run([action, "--state-dir", cli.state, name])
                #expect(result.status == 0, "\(result.errors)")
                #expect(result.output.contains("sent to the running tessera"), "\(action) \(name): \(result.output)")
            }
            // Resumed, it is held again halfway until the other task has finished: the run must
            // wait for it (a timed throttle could let it finish first on a loaded machine, and the
            // run end at the other's pause, before its resume came).
            try await command("pause", "resumed.iso")
            let gate = LoopbackOrigin.Gate()
            origin.clearFaults(at: resumed)
            origin.inject(.hold(gate, afterBytes: 500_000), at: resumed)
            try await command("resume", "resumed.iso")
            // The other one, paused and resumed, asks again and finishes at once.
            try await command("pause", "other.bin")
            origin.clearFaults(at: other)
            try await command("resume", "other.bin")
            #expect(await eventually(within: .seconds(30)) { fileSize(cli.downloads + "/other.bin") == 2_000_000 })
            #expect(process.termination == nil, "the run waits for the task still held: \(fileText(err))")
            gate.open()
            #expect(await process.exited(within: .seconds(60)))
            process.terminate()
            #expect(await process.ended() == .exited(0), "\(fileText(err))")
            #expect(await origin.content(at: resumed).verifyFile(atPath: cli.downloads + "/resumed.iso", size: 3_000_000))
            #expect(fileSize(cli.downloads + "/other.bin") == 2_000_000)
        }
    }

    /// `tessera demo`'s table times each task from its start to its end as the events tell them,
    /// also when its output is not a terminal (it printed 0.00 s and no speed then, and the live
    /// board's redraws, every 250 ms, were the clock on a terminal).
    @Test func theDemoTimesEachTaskFromItsEvents() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        let result = try await cli.run(["demo", "--large-size", "8", "--large-rate", "16M"])
        #expect(result.status == 0, "\(result.errors)")
        let lines = result.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let header = try #require(lines.firstIndex { $0.hasPrefix("task ") && $0.contains("time") }, "\(result.output)")
        let rows = lines[(header + 1)...].prefix { !$0.isEmpty }
        #expect(rows.count == 9, "\(rows)")
        let total = try #require(lines.compactMap { line -> Double? in
            guard let range = line.range(of: #" in ([0-9.]+) s, "#, options: .regularExpression) else { return nil }
            return Double(line[range].dropFirst(4).dropLast(4))
        }.first, "\(result.output)")
        for row in rows {
            let time = try #require(row.range(of: #"[0-9]+\.[0-9]{2} s"#, options: .regularExpression).flatMap { Double(row[$0].dropLast(2)) }, "\(row)")
            #expect(time > 0 && time <= total + 0.1, "\(row) (all in \(total) s)")
            #expect(row.contains("/s"), "a speed: \(row)")
            #expect(row.hasSuffix("yes"), "\(row)")
        }
        // 8 MiB at 16 MB/s per connection over at most 8 connections: not faster than 64 ms.
        let large = try #require(rows.first { $0.hasPrefix("large-file.bin") })
        let largeTime = try #require(large.range(of: #"[0-9]+\.[0-9]{2} s"#, options: .regularExpression).flatMap { Double(large[$0].dropLast(2)) })
        #expect(largeTime >= 0.06, "\(large)")
    }
}
