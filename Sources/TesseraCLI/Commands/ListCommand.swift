import ArgumentParser
import Foundation
import Tessera

/// `tessera list`: the tasks and groups in the store.
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandMain.subcommand(CommandConfiguration(commandName: "list", abstract: "List the tasks and groups in the store."))

    @OptionGroup var store: StoreOptions

    @Flag(help: "One JSON document.")
    var json = false

    func run() async throws {
        let state = try store.state()
        let path = state.directory + "/tessera.sqlite"
        guard FileManager.default.fileExists(atPath: path) else {
            if json { Terminal.out(#"{"groups":[],"tasks":[]}"#) } else { Terminal.out("No tasks (no store at \(path)).") }
            return
        }
        let store: SQLiteDownloadStore
        let stored: [StoredTask]
        do {
            store = try SQLiteDownloadStore(path: path)
            stored = try await store.loadAll()
        } catch {
            Terminal.err("tessera: \(describe(error))")
            throw ExitCode(1)
        }
        let rows = stored.map(Row.init)
        var groups: [String: [Row]] = [:]
        for row in rows { if let group = row.group { groups[group, default: []].append(row) } }
        if json {
            let document: [String: Any] = [
                "tasks": rows.map(\.object),
                "groups": groups.keys.sorted().map { key in
                    let children = groups[key]!
                    return [
                        "key": key, "children": children.map(\.id),
                        "bytesDone": children.map(\.done).saturatingSum(),
                        "states": Dictionary(grouping: children, by: \.state).mapValues(\.count),
                    ] as [String: Any]
                },
            ]
            try Terminal.json(document, pretty: true)
            return
        }
        if rows.isEmpty {
            Terminal.out("No tasks.")
            return
        }
        Terminal.out("STATE        DONE                   TASK")
        for row in rows { Terminal.out(row.line) }
        for key in groups.keys.sorted() {
            let children = groups[key]!
            let done = children.filter { $0.state == "completed" }.count
            Terminal.out("group \(key): \(done) of \(children.count) completed")
        }
        for unreadable in store.unreadableTasks {
            Terminal.out("unreadable: \(unreadable.error.message)")
        }
    }

    struct Row {
        var id: String
        var title: String
        var state: String
        var done: Int64
        var total: Int64?
        var group: String?
        var error: String?
        var outputs: [String]

        init(_ stored: StoredTask) {
            id = stored.task.id.description
            title = stored.task.manifest?.title ?? stored.entity.title
            state = stored.task.state.description
            group = stored.entity.aggregationKey
            error = stored.task.lastError?.message
            let working = (stored.task.manifest?.outputs ?? []).enumerated().filter { stored.task.mode == .cacheOnly || $0.element.isSelected }
            outputs = working.map(\.element.name)
            var total: Int64? = 0
            for (_, output) in working {
                if let size = output.knownSize { total = total.map { $0 + size } } else { total = nil }
            }
            // The store's exact total first: a plain file's size is known from its response only.
            self.total = stored.task.bytesTotal ?? (stored.task.manifest == nil ? nil : total)
            done = stored.task.bytesDone
            if stored.task.state == .completed, let total = self.total { done = total }
        }

        var object: [String: Any] {
            var object: [String: Any] = ["id": id, "title": title, "state": state, "bytesDone": done, "outputs": outputs]
            if let total { object["bytesTotal"] = total }
            if let group { object["group"] = group }
            if let error { object["error"] = error }
            return object
        }

        var line: String {
            let amount = ByteCount.format(done) + (total.map { " / " + ByteCount.format($0) } ?? "")
            var text = "\(state.padding(toLength: 12, withPad: " ", startingAt: 0)) \(amount.padding(toLength: 22, withPad: " ", startingAt: 0)) \(id)"
            if title != id { text += "  \(title)" }
            if let error, state != "completed" { text += " — \(error)" }
            return text
        }
    }
}
