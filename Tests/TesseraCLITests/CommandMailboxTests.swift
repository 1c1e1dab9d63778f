import Foundation
import Testing
import Tessera
import TesseraTesting
@testable import TesseraCLI

/// The mailbox of the `tessera` that holds a state directory: a command is taken once or taken
/// back, never told as sent when nobody took it, and never applied long after its sender gave up.
@Suite(.timeLimit(.minutes(3))) struct CommandMailboxTests {
    private static func scratch() -> String {
        let path = NSTemporaryDirectory() + "tessera-mailbox-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private static func commandFiles(_ mailbox: CommandMailbox) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: mailbox.directory)) ?? []).sorted()
    }

    @Test func commandsAreTakenOnceInTheOrderTheyWereLeft() throws {
        let state = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let mailbox = CommandMailbox(stateDirectory: state)
        for index in 0..<20 { _ = try mailbox.post(.init(action: "pause", id: "direct:\(index)")) }
        #expect(mailbox.take().map(\.id) == (0..<20).map { "direct:\($0)" })
        #expect(mailbox.take().isEmpty)
        #expect(Self.commandFiles(mailbox).isEmpty)
    }

    @Test func aCommandTakenBackIsNeverApplied() throws {
        let state = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let mailbox = CommandMailbox(stateDirectory: state)
        let withdrawn = try mailbox.post(.init(action: "remove", id: "direct:a", deleteFiles: true))
        let kept = try mailbox.post(.init(action: "pause", id: "direct:b"))
        #expect(mailbox.withdraw(withdrawn))
        #expect(mailbox.take().map(\.id) == ["direct:b"])
        // Taken already: it cannot be taken back (its sender is told it was sent).
        #expect(!mailbox.withdraw(kept))
    }

    @Test func aStaleCommandAndHalfWrittenLeftoversAreDropped() throws {
        let state = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let mailbox = CommandMailbox(stateDirectory: state)
        let old = try mailbox.post(.init(action: "remove", id: "direct:old", deleteFiles: true))
        let fresh = try mailbox.post(.init(action: "pause", id: "direct:fresh"))
        let oldTemporary = mailbox.directory + "/left-by-a-killed-sender.json.tmp"
        let freshTemporary = mailbox.directory + "/being-written.json.tmp"
        for path in [oldTemporary, freshTemporary] { #expect(FileManager.default.createFile(atPath: path, contents: Data("{".utf8))) }
        // An hour old: whoever left them is gone.
        let anHourAgo = Date().timeIntervalSince1970 - 3_600
        for path in [old, oldTemporary] {
            var times = [timeval(tv_sec: Int(anHourAgo), tv_usec: 0), timeval(tv_sec: Int(anHourAgo), tv_usec: 0)]
            #expect(utimes(path, &times) == 0)
        }
        _ = fresh
        #expect(mailbox.take().map(\.id) == ["direct:fresh"])
        #expect(Self.commandFiles(mailbox) == ["being-written.json.tmp"])
    }

    @Test func aCommandThatCannotBeReadIsDroppedAndTheRestTaken() throws {
        let state = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let mailbox = CommandMailbox(stateDirectory: state)
        _ = try mailbox.post(.init(action: "pause", id: "direct:a"))
        #expect(FileManager.default.createFile(atPath: mailbox.directory + "/00000000000000000000-garbage.json", contents: Data([0xFF, 0x00])))
        #expect(mailbox.take().map(\.id) == ["direct:a"])
        #expect(Self.commandFiles(mailbox).isEmpty)
    }

    @Test func deliveryTellsTakenFromTakenBack() async throws {
        let state = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let mailbox = CommandMailbox(stateDirectory: state)

        // Nobody holds the state directory: taken back at once, for the caller to apply.
        let orphan = try mailbox.post(.init(action: "pause", id: "direct:a"))
        #expect(try await mailbox.delivery(of: orphan, until: .now + .seconds(30)) == .holderEnded)
        #expect(Self.commandFiles(mailbox).isEmpty)

        let lock = try StateLock(directory: state)
        // Held, and never taken: taken back at the deadline.
        let ignored = try mailbox.post(.init(action: "pause", id: "direct:b"))
        #expect(try await mailbox.delivery(of: ignored, until: .now + .milliseconds(200)) == .unanswered)
        #expect(mailbox.take().isEmpty)

        // Held and taken (by another thread, as the running tessera would).
        let taken = try mailbox.post(.init(action: "pause", id: "direct:c"))
        let holder = Task.detached { () -> [String] in
            while true {
                let commands = mailbox.take()
                if !commands.isEmpty { return commands.map(\.id) }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(try await mailbox.delivery(of: taken, until: .now + .seconds(30)) == .taken)
        #expect(try await holder.value == ["direct:c"])

        // The holder ends while the sender waits: taken back, for the sender to apply.
        let late = try mailbox.post(.init(action: "pause", id: "direct:d"))
        let waiting = Task { try await mailbox.delivery(of: late, until: .now + .seconds(30)) }
        lock.release()
        #expect(try await waiting.value == .holderEnded)
        #expect(Self.commandFiles(mailbox).isEmpty)
    }
}

/// `pause`, `remove`, `resume` and `get` beside a `tessera` that holds the state directory but
/// ends, or never answers, before it takes their command.
@Suite(.timeLimit(.minutes(3))) struct CommandHandOverTests {
    /// A `tessera` holding the state directory that never looks at its mailbox (this process).
    private static func hold(_ cli: CLI) throws -> StateLock { try StateLock(directory: cli.state) }

    /// A file of 4,000 bytes downloaded into the store (its URL), then the state directory held
    /// (``hold(_:)``).
    private static func storedThenHeld(_ cli: CLI, _ origin: LoopbackOrigin, _ name: String) async throws -> (url: String, lock: StateLock) {
        let file = origin.url("/bytes/4000/" + name).absoluteString
        let get = try await cli.run(["get", file])
        #expect(get.status == 0, "\(get.errors)")
        return (file, try hold(cli))
    }

    private static func waitingCommands(_ cli: CLI) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: cli.state + "/commands")) ?? []).filter { $0.hasSuffix(".json") }.count
    }

    @Test func aCommandNobodyTakesIsTakenBackAndSaidSo() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let (file, lock) = try await Self.storedThenHeld(cli, origin, "kept.bin")
            let remove = try await cli.run(
                ["remove", "--state-dir", cli.state, "--delete-files", "kept.bin"], environment: ["TESSERA_TEST_COMMAND_TIMEOUT": "1"])
            lock.release()
            #expect(remove.status == 1)
            #expect(remove.errors.contains("did not take remove of kept.bin"), "\(remove.errors)")
            #expect(remove.errors.contains("nothing was done to it"), "\(remove.errors)")
            #expect(!remove.output.contains("sent to the running tessera"), "\(remove.output)")
            #expect(Self.waitingCommands(cli) == 0, "taken back: no later run applies it")
            // A later run finds the task and its file as they were.
            #expect(fileSize(cli.downloads + "/kept.bin") == 4_000)
            let list = try await cli.run(["list", "--json", "--state-dir", cli.state])
            let ids = (list.json?["tasks"] as? [[String: Any]])?.compactMap { $0["id"] as? String } ?? []
            #expect(ids == ["direct:\(file)"])
        }
    }

    @Test func whenTheRunningTesseraEndsFirstTheCommandRunsHere() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let (file, lock) = try await Self.storedThenHeld(cli, origin, "gone.bin")
            let (process, out, err) = try cli.start(["remove", "--state-dir", cli.state, "--delete-files", "gone.bin"])
            #expect(await eventually(within: .seconds(30)) { Self.waitingCommands(cli) == 1 })
            // The holder ends without looking at its mailbox.
            lock.release()
            #expect(await process.exited(within: .seconds(30)))
            process.terminate()
            #expect(await process.ended() == .exited(0), "\(fileText(err))")
            #expect(fileText(out).contains("removed direct:\(file)"), "\(fileText(out))")
            #expect(fileSize(cli.downloads + "/gone.bin") == nil)
            #expect(Self.waitingCommands(cli) == 0)
            let list = try await cli.run(["list", "--json", "--state-dir", cli.state])
            #expect((list.json?["tasks"] as? [[String: Any]])?.isEmpty == true, "\(list.output)")
        }
    }

    /// A holder killed after it took the command (before it applied it, or before it answered):
    /// the command does not claim it was done.
    @Test func aHolderThatEndsAfterItTookTheCommandIsNotTakenForDone() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let (_, lock) = try await Self.storedThenHeld(cli, origin, "taken.bin")
            let (process, out, err) = try cli.start(["remove", "--state-dir", cli.state, "taken.bin"])
            #expect(await eventually(within: .seconds(30)) { Self.waitingCommands(cli) == 1 })
            // Taken, and the holder ends without a word.
            #expect(CommandMailbox(stateDirectory: cli.state).take().map(\.action) == ["remove"])
            lock.release()
            #expect(await process.exited(within: .seconds(30)))
            process.terminate()
            #expect(await process.ended() == .exited(1), "\(fileText(out))")
            #expect(fileText(err).contains("took remove of taken.bin and ended before it answered; see `tessera list`"), "\(fileText(err))")
            #expect(!fileText(out).contains("sent"), "\(fileText(out))")
        }
    }

    @Test func aGetHandedToATesseraThatEndsFirstRunsHere() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let lock = try Self.hold(cli)
            let (process, out, err) = try cli.start(["get", origin.url("/bytes/30000/late.bin").absoluteString])
            #expect(await eventually(within: .seconds(30)) { Self.waitingCommands(cli) == 1 })
            lock.release()
            #expect(await process.exited(within: .seconds(30)))
            process.terminate()
            #expect(await process.ended() == .exited(0), "\(fileText(err))")
            #expect(!fileText(out).contains("handed"), "\(fileText(out))")
            #expect(await origin.content(at: "/bytes/30000/late.bin").verifyFile(atPath: cli.downloads + "/late.bin", size: 30_000))
            #expect(Self.waitingCommands(cli) == 0)
        }
    }

    @Test func resumeAllGoesToTheRunningTesseraToo() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let paused = "/bytes/3000000/paused.iso", held = "/bytes/2000000/held.iso"
            let gate = LoopbackOrigin.Gate()
            origin.inject(.hold(gate, afterBytes: 300_000), at: paused)
            // Held, it keeps the run going while the other is paused.
            origin.inject(.hold(gate, afterBytes: 300_000), at: held)
            let (process, _, err) = try cli.start(["get", origin.url(paused).absoluteString, origin.url(held).absoluteString])
            #expect(await eventually(within: .seconds(30)) { origin.bytesServed(for: paused) >= 300_000 && origin.bytesServed(for: held) >= 300_000 })
            let pause = try await cli.run(["pause", "--state-dir", cli.state, "paused.iso"])
            #expect(pause.output.contains("pause sent to the running tessera"), "\(pause.output) \(pause.errors)")
            let resume = try await cli.run(["resume", "--all", "--state-dir", cli.state])
            #expect(resume.status == 0, "\(resume.errors)")
            #expect(resume.output.contains("resume sent to the running tessera: direct:\(origin.url(paused).absoluteString)"), "\(resume.output)")
            gate.open()
            #expect(await process.exited(within: .seconds(60)))
            process.terminate()
            #expect(await process.ended() == .exited(0), "\(fileText(err))")
            #expect(await origin.content(at: paused).verifyFile(atPath: cli.downloads + "/paused.iso", size: 3_000_000))
            #expect(fileSize(cli.downloads + "/held.iso") == 2_000_000)
        }
    }

    @Test func tesseraServeTakesTheCommandsAndASecondGetsInputs() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let serve = try await ServeProcess.start(cli)
            // A `get` beside the daemon: handed to it, followed to its end.
            let get = try await cli.run(["get", origin.url("/bytes/50000/handed.bin").absoluteString])
            #expect(get.status == 0, "\(get.errors)")
            #expect(get.output.contains("handed 1 task to the tessera running on"), "\(get.output)")
            #expect(await origin.content(at: "/bytes/50000/handed.bin").verifyFile(atPath: cli.downloads + "/handed.bin", size: 50_000))

            // A task the daemon runs, held at the origin: paused, resumed and removed from another
            // shell; its RPC tells each.
            let slow = "/bytes/3000000/slow.iso"
            let gate = LoopbackOrigin.Gate()
            origin.inject(.hold(gate, afterBytes: 300_000), at: slow)
            let gid = try #require(try await serve.call("aria2.addUri", [[origin.url(slow).absoluteString]]) as? String)
            #expect(await eventually(within: .seconds(30)) { origin.bytesServed(for: slow) >= 300_000 })
            func status() async -> String? {
                ((try? await serve.call("aria2.tellStatus", [gid])) as? [String: Any])?["status"] as? String
            }
            let pause = try await cli.run(["pause", "--state-dir", cli.state, "slow.iso"])
            #expect(pause.status == 0, "\(pause.errors)")
            #expect(pause.output.contains("pause sent to the running tessera"), "\(pause.output)")
            #expect(await eventually(within: .seconds(10)) { await status() == "paused" })
            let resume = try await cli.run(["resume", "--state-dir", cli.state, "slow.iso"])
            #expect(resume.status == 0, "\(resume.errors)")
            #expect(resume.output.contains("resume sent to the running tessera"), "\(resume.output)")
            #expect(await eventually(within: .seconds(10)) { await status() == "active" })
            let remove = try await cli.run(["remove", "--state-dir", cli.state, "slow.iso"])
            #expect(remove.status == 0, "\(remove.errors)")
            #expect(remove.output.contains("remove sent to the running tessera"), "\(remove.output)")
            // Answered once its store says so: the next command sees it.
            let list = try await cli.run(["list", "--state-dir", cli.state])
            #expect(!list.output.contains("slow.iso"), "\(list.output)")
            #expect(await eventually(within: .seconds(10)) {
                ((try? await serve.tasks()) ?? []).allSatisfy { ($0["id"] as? String)?.contains("slow.iso") != true }
            })
            // A name the daemon does not know: said so, exit 1.
            let unknown = try await cli.run(["pause", "--state-dir", cli.state, "no-such-task"])
            #expect(unknown.status == 1)
            #expect(unknown.errors.contains("no task matches \"no-such-task\""), "\(unknown.errors)")
            gate.open()
            #expect(await serve.stop() == 0, "\(serve.standardError)")
        }
    }

    /// A holder that refuses commands (a fleet worker) is heard: the command says why and fails.
    @Test func aRefusedCommandSaysWhyAndFails() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let get = try await cli.run(["get", origin.url("/bytes/4000/kept.bin").absoluteString])
            #expect(get.status == 0, "\(get.errors)")
            let session = try await Session.open(Session.Settings(network: try NetworkOptions.parse([]), state: try StateOptions.parse(["--state-dir", cli.state])))
            let holder = Task { await MailboxApplier(session: session, refusal: "its tasks are the fleet's").serve() }
            let pause = try await cli.run(["pause", "--state-dir", cli.state, "kept.bin"])
            let handed = try await cli.run(["get", origin.url("/bytes/4000/other.bin").absoluteString])
            holder.cancel()
            await holder.value
            await session.close()
            #expect(pause.status == 1)
            #expect(pause.errors.contains("tessera: its tasks are the fleet's"), "\(pause.errors)")
            #expect(!pause.output.contains("sent"), "\(pause.output)")
            #expect(handed.status == 1)
            #expect(handed.errors.contains("its tasks are the fleet's"), "\(handed.errors)")
            #expect(!handed.output.contains("handed"), "nothing was handed: \(handed.output)")
            #expect(fileSize(cli.downloads + "/other.bin") == nil)
        }
    }

    /// A task the running tessera added a moment ago is found, though its store is written a
    /// few times a second: the running tessera finds the task among its own.
    @Test func aTaskAddedAMomentAgoIsFound() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let fresh = "/bytes/3000000/fresh.iso"
            let gate = LoopbackOrigin.Gate()
            origin.inject(.hold(gate, afterBytes: 100_000), at: fresh)
            var settings = Session.Settings(network: try NetworkOptions.parse(["--proxy", ""]), state: try StateOptions.parse(["--state-dir", cli.state]))
            settings.downloadRoot = cli.downloads
            let session = try await Session.open(settings)
            let holder = Task { await MailboxApplier(session: session).serve() }
            let info = try await session.manager.start(DirectEntity(url: origin.url(fresh)))
            let pause = try await cli.run(["pause", "--state-dir", cli.state, "fresh.iso"])
            #expect(pause.status == 0, "\(pause.errors)")
            #expect(pause.output.contains("pause sent to the running tessera: \(info.id)"), "\(pause.output)")
            let paused = await session.manager.check(info.id)?.state == .paused
            gate.open()
            holder.cancel()
            await holder.value
            await session.close()
            #expect(paused)
        }
    }

    /// A `get` that is finishing (merging, or pausing after Ctrl-C) starts nothing more: a command
    /// sent then waits for it to end and runs by itself, however long that takes.
    @Test func aCommandSentWhileTheRunningTesseraFinishesRunsHereAfterIt() async throws {
        let cli = CLI()
        defer { cli.cleanUp() }
        try await withLoopbackOrigin { origin in
            let stored = try await cli.run(["get", origin.url("/bytes/4000/first.bin").absoluteString])
            #expect(stored.status == 0, "\(stored.errors)")
            var settings = Session.Settings(network: try NetworkOptions.parse(["--proxy", ""]), state: try StateOptions.parse(["--state-dir", cli.state]))
            settings.downloadRoot = cli.downloads
            let session = try await Session.open(settings)
            let finishing = Task { await MailboxApplier(session: session, deferring: true).serve() }
            let (remove, removeOut, removeErr) = try cli.start(["remove", "--state-dir", cli.state, "--delete-files", "first.bin"])
            let (get, getOut, getErr) = try cli.start(["get", origin.url("/bytes/30000/second.bin").absoluteString])
            // Both answered "finishing", and both wait (well past the time a command takes).
            #expect(await eventually(within: .seconds(30)) {
                fileText(removeErr).contains("is finishing; remove waits for it to end") && fileText(getOut).contains("is finishing")
            }, "\(fileText(removeErr)) \(fileText(getOut))")
            #expect(remove.termination == nil && get.termination == nil)
            #expect(fileSize(cli.downloads + "/first.bin") == 4_000, "nothing done while it finishes")
            finishing.cancel()
            await finishing.value
            await session.close()
            #expect(await remove.exited(within: .seconds(30)))
            #expect(await get.exited(within: .seconds(30)))
            remove.terminate()
            get.terminate()
            #expect(await remove.ended() == .exited(0), "\(fileText(removeErr))")
            // Done here, or by the `get` that opened the store first and took it.
            let removed = fileText(removeOut)
            #expect(removed.contains("removed direct:") || removed.contains("remove sent to the running tessera: direct:"), "\(removed)")
            #expect(fileSize(cli.downloads + "/first.bin") == nil)
            #expect(await get.ended() == .exited(0), "\(fileText(getErr))")
            #expect(await origin.content(at: "/bytes/30000/second.bin").verifyFile(atPath: cli.downloads + "/second.bin", size: 30_000))
        }
    }
}
