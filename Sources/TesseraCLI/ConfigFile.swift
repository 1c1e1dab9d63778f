import ArgumentParser
import Foundation
import Tessera

/// Options read from a file before the command line's, for the commands that take inputs (`get`,
/// `cache`: every option of theirs may be in it), as yt-dlp and aria2c read theirs: `$XDG_CONFIG_HOME/tessera/config`
/// (else `~/.config/tessera/config`), or the file `--config-location` names; `--no-config`
/// reads none. Options are written as on the command line (`--limit-rate 2M`, `-x 4`, several on
/// a line), split into words the way yt-dlp reads its file (a shell's quoting: `'…'`, `"…"`,
/// `\`; `#` starts a comment), or one per line as aria2c writes them (`limit-rate=2M`,
/// `continue`). The command line comes after, so its options win (options that may be
/// repeated, such as `--header`, add up).
struct ConfigOptions: ParsableArguments {
    @Option(name: .customLong("config-location"), help: ArgumentHelp("Read options from this file instead of $XDG_CONFIG_HOME/tessera/config.", valueName: "file"))
    var configLocation: String?

    @Flag(name: .customLong("no-config"), help: "Read no configuration file.")
    var noConfig = false
}

/// A command that reads the configuration file.
protocol ReadsConfigFile: ParsableCommand {
    var config: ConfigOptions { get }
    var input: InputOptions { get }
}

extension GetCommand: ReadsConfigFile {}
extension CacheCommand: ReadsConfigFile {}

enum ConfigFile {
    /// The commands that read it, by name.
    static let commands: [String: any ReadsConfigFile.Type] = ["get": GetCommand.self, "cache": CacheCommand.self]

    /// `arguments` (without the program's name) with the configuration file's options inserted
    /// after the command's name. Whether the command line says `--no-config` or
    /// `--config-location` (either spelling, `--config-location FILE` or `=FILE`) is read by the
    /// command's own parser, so a value that looks like one (`--user-agent=--no-config`, an input
    /// after `--`) is not taken for it. A command line the parser refuses is returned as it is:
    /// its error is reported as usual.
    static func expand(_ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment) throws -> [String] {
        guard let name = arguments.first, let command = commands[name] else { return arguments }
        // A command line that names neither option reads the default file, if there is one: with
        // none there is nothing to do, and the command line is parsed once, by the command.
        let mentions = arguments.contains { $0.hasPrefix("--no-config") || $0.hasPrefix("--config-location") }
        // (The default file, read once.)
        let preread = mentions ? nil : defaultPath(environment).flatMap { FileOperations.contents($0) }
        if !mentions, preread == nil { return arguments }
        guard let parsed = try? command.parse(Array(arguments.dropFirst())) else { return arguments }
        let config = parsed.config
        guard !config.noConfig else { return arguments }
        let explicit = config.configLocation
        guard let path = explicit ?? defaultPath(environment) else { return arguments }
        guard let data = preread ?? FileOperations.contents(path) else {
            if explicit != nil { throw ValidationError("cannot read the configuration file \(path): \(readProblem(path))") }
            return arguments
        }
        let options = try parse(String(decoding: data, as: UTF8.self), file: path, command: command)
        return [name] + options + arguments.dropFirst()
    }

    static func defaultPath(_ environment: [String: String]) -> String? {
        if let base = environment["XDG_CONFIG_HOME"], base.hasPrefix("/") { return base + "/tessera/config" }
        return environment["HOME"].map { $0 + "/.config/tessera/config" }
    }

    /// The system's words for why `path` cannot be read.
    private static func readProblem(_ path: String) -> String {
        var info = stat()
        if stat(path, &info) != 0 { return String(cString: strerror(errno)) }
        if info.st_mode & S_IFMT == S_IFDIR { return String(cString: strerror(EISDIR)) }
        return String(cString: strerror(access(path, R_OK) != 0 ? errno : EIO))
    }

    /// The arguments a configuration file's text stands for. Each line is checked on its own
    /// by `command`'s parser (when given), so an unknown option or a bad value is reported with
    /// the file and the line.
    static func parse(_ text: String, file: String, command: (any ReadsConfigFile.Type)? = nil) throws -> [String] {
        var options: [String] = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let place = "\(file), line \(number + 1)"
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let words: [String]
            do {
                words = try lineArguments(line)
            } catch let problem as Problem {
                throw ValidationError("\(place): \(problem.message)")
            }
            for word in words {
                let option = word.split(separator: "=", maxSplits: 1).first.map(String.init) ?? word
                if option == "--no-config" || option == "--config-location" {
                    throw ValidationError("\(place): \(option) belongs on the command line, not in a configuration file")
                }
            }
            if let command {
                let parsed: any ReadsConfigFile
                do {
                    parsed = try command.parse(words)
                } catch {
                    throw ValidationError("\(place): \(command.message(for: error))")
                }
                if let stray = parsed.input.inputs.first {
                    // A word left over is a value with blanks that lost its quotes, more often
                    // than an input that belongs in the file.
                    throw ValidationError(
                        "\(place): \"\(stray)\" is not an option (quote a value with blanks: --user-agent 'Name 1.0'; inputs go on the command line or in -i FILE)")
                }
            }
            options += words
        }
        return options
    }

    /// Why a line cannot be read.
    struct Problem: Error {
        var message: String
    }

    /// One line's arguments: options as on the command line (`--header 'A: b' -x 4`), or
    /// aria2c's `name=value` and `name`.
    static func lineArguments(_ line: String) throws -> [String] {
        if line.hasPrefix("-") { return try words(line) }
        guard let equals = line.firstIndex(of: "=") else {
            guard !line.contains(where: \.isWhitespace) else { throw Problem(message: "\"\(line)\" is not an option") }
            return ["--" + line]
        }
        let name = line[..<equals].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, !name.contains(where: \.isWhitespace) else { throw Problem(message: "\"\(line)\" is not an option") }
        let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        guard let first = value.first, first == "\"" || first == "'" else {
            // aria2c's way: the rest of the line, as it is.
            return ["--" + name, value]
        }
        // A quoted value is one word, its quotes removed.
        let quoted = try words(value)
        guard quoted.count == 1 else { throw Problem(message: "the value of \(name) is more than one quoted word") }
        return ["--" + name, quoted[0]]
    }

    /// A line split into words as a POSIX shell (and yt-dlp's `shlex`) splits it: blanks
    /// separate words; `'…'` keeps everything; `"…"` keeps everything but `\` before `"`, `\`,
    /// `$` and `` ` ``; `\` outside quotes keeps the next character; `#` at the start of a word
    /// starts a comment. No expansion of any kind.
    static func words(_ line: String) throws -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var characters = line.makeIterator()
        while let character = characters.next() {
            switch character {
            case " ", "\t", "\r", "\n":
                if inWord { words.append(current) }
                current = ""
                inWord = false
            case "#" where !inWord:
                return words
            case "'":
                inWord = true
                var closed = false
                while let next = characters.next() {
                    if next == "'" {
                        closed = true
                        break
                    }
                    current.append(next)
                }
                guard closed else { throw Problem(message: "a ' is not closed") }
            case "\"":
                inWord = true
                var closed = false
                while let next = characters.next() {
                    if next == "\"" {
                        closed = true
                        break
                    }
                    if next == "\\" {
                        guard let escaped = characters.next() else { break }
                        if !"\"\\$`".contains(escaped) { current.append("\\") }
                        current.append(escaped)
                        continue
                    }
                    current.append(next)
                }
                guard closed else { throw Problem(message: "a \" is not closed") }
            case "\\":
                inWord = true
                guard let escaped = characters.next() else { throw Problem(message: "the line ends with a \\") }
                current.append(escaped)
            default:
                inWord = true
                current.append(character)
            }
        }
        if inWord { words.append(current) }
        return words
    }
}
