import ArgumentParser
import Foundation

/// Options read from a file before the command line's, for the commands that take inputs (`get`,
/// `cache`: every option of theirs may be in it), as yt-dlp and aria2c read theirs: `$XDG_CONFIG_HOME/tessera/config`
/// (else `~/.config/tessera/config`), or the file `--config-location` names; `--no-config`
/// reads none. One option per line, as on the command line (`--limit-rate 2M`, `-x 4`) or as
/// aria2c writes them (`limit-rate=2M`, `continue`); `#` starts a comment. The command line
/// comes after, so its options win (options that may be repeated, such as `--header`, add up).
struct ConfigOptions: ParsableArguments {
    @Option(name: .customLong("config-location"), help: ArgumentHelp("Read options from this file instead of $XDG_CONFIG_HOME/tessera/config.", valueName: "file"))
    var configLocation: String?

    @Flag(name: .customLong("no-config"), help: "Read no configuration file.")
    var noConfig = false
}

enum ConfigFile {
    static let commands: Set<String> = ["get", "cache"]

    /// `arguments` (without the program's name) with the configuration file's options inserted
    /// after the command's name.
    static func expand(_ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment) throws -> [String] {
        guard let command = arguments.first, commands.contains(command), !arguments.contains("--no-config") else { return arguments }
        let explicit = arguments.firstIndex(of: "--config-location").flatMap { index in
            arguments.indices.contains(index + 1) ? arguments[index + 1] : nil
        }
        let path = explicit ?? defaultPath(environment)
        guard let path else { return arguments }
        guard let data = FileManager.default.contents(atPath: path) else {
            if explicit != nil { throw ValidationError("cannot read the configuration file \(path)") }
            return arguments
        }
        let options = try parse(String(decoding: data, as: UTF8.self), file: path)
        return [command] + options + arguments.dropFirst()
    }

    static func defaultPath(_ environment: [String: String]) -> String? {
        if let base = environment["XDG_CONFIG_HOME"], base.hasPrefix("/") { return base + "/tessera/config" }
        return environment["HOME"].map { $0 + "/.config/tessera/config" }
    }

    /// The options of a configuration file's text.
    static func parse(_ text: String, file: String) throws -> [String] {
        var options: [String] = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            if line.hasPrefix("-") {
                // As on the command line: the option, then (after white space) its value.
                if let space = line.firstIndex(where: { $0 == " " || $0 == "\t" }) {
                    options += [String(line[..<space]), line[space...].trimmingCharacters(in: .whitespaces)]
                } else {
                    options.append(line)
                }
            } else if let equals = line.firstIndex(of: "=") {
                let name = line[..<equals].trimmingCharacters(in: .whitespaces)
                guard !name.isEmpty, !name.contains(" ") else {
                    throw ValidationError("\(file), line \(number + 1): \"\(line)\" is not an option")
                }
                options += ["--" + name, line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)]
            } else if !line.contains(" ") {
                options.append("--" + line)
            } else {
                throw ValidationError("\(file), line \(number + 1): \"\(line)\" is not an option")
            }
        }
        return options
    }
}
