import Foundation
import Testing

/// The folders of the framework depend on each other in one direction only (DESIGN.md, "Each
/// step has one home"): the neutral HTTP values depend on nothing, the engine only moves bytes,
/// manifests only describe. A name declared in a folder that a folder must not know is a failure
/// here, with the file and the name.
@Suite struct LayeringTests {
    static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/Tessera").path

    /// The folders of what every layer may use (HTTP's values, files, processes, locks, hostile
    /// input, metrics); they know none of the layers.
    static let neutral = ["HTTP", "Files", "Process", "Concurrency", "Safety", "Metrics"]

    /// The layers the neutral folders must not refer to.
    static let layers = ["Engine", "Manager", "Entity", "Store", "Cache", "Manifest", "Monitor", "Events", "Crypto", "PostProcessing", "Live"]

    /// What each folder must not refer to.
    static let forbidden: [String: [String]] = Dictionary(uniqueKeysWithValues: neutral.map { ($0, layers) }).merging([
        "Engine": ["Manager", "Entity", "Store", "Cache", "Manifest", "Monitor", "Events"],
        "Manifest": ["Engine", "Manager", "Store", "Cache", "Monitor", "Events"],
        "Store": ["Engine", "Manager", "Cache", "Monitor"],
        "Cache": ["Engine", "Manager", "Entity", "Store", "Monitor", "Events"],
    ]) { neutral, _ in neutral }

    /// Every folder of the framework, so a new one is a decision (it appears in README.md's
    /// "Layout" and, when it is a layer, in ``forbidden``).
    static let folders: Set<String> = Set(neutral + layers + ["Tessera.docc"])

    /// The Swift files of a folder.
    static func files(in folder: String) -> [String] {
        let directory = sources + "/" + folder
        guard let names = FileManager.default.subpaths(atPath: directory) else { return [] }
        return names.filter { $0.hasSuffix(".swift") }.map { directory + "/" + $0 }.sorted()
    }

    /// Source text without comments and string literals (a name in a doc comment is no dependency).
    static func code(of path: String) -> String {
        stripped((try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
    }

    static func stripped(_ text: String) -> String {
        var result = ""
        var index = text.startIndex
        while index < text.endIndex {
            let rest = text[index...]
            if rest.hasPrefix("//") {
                index = rest.firstIndex(of: "\n") ?? text.endIndex
            } else if rest.hasPrefix("/*") {
                index = rest.range(of: "*/").map(\.upperBound) ?? text.endIndex
            } else if rest.hasPrefix("\"") {
                // Skip to the closing quote (interpolations hold code, but never a type name we check).
                var cursor = text.index(after: index)
                while cursor < text.endIndex, text[cursor] != "\"" {
                    if text[cursor] == "\\" { cursor = text.index(after: cursor) }
                    if cursor < text.endIndex { cursor = text.index(after: cursor) }
                }
                index = cursor < text.endIndex ? text.index(after: cursor) : text.endIndex
                result += " "
            } else {
                result.append(text[index])
                index = text.index(after: index)
            }
        }
        return result
    }

    /// The types a folder declares at the top level (classes, structs, enums, protocols, actors,
    /// type aliases).
    static func declaredTypes(in folder: String) -> Set<String> {
        let pattern = try! NSRegularExpression(
            pattern: #"^(?:public |package |open |final |internal |private |fileprivate )*(?:class|struct|enum|protocol|actor|typealias) ([A-Z][A-Za-z0-9_]*)"#,
            options: [.anchorsMatchLines])
        var names = Set<String>()
        for file in files(in: folder) {
            let text = code(of: file)
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                if let range = Range(match.range(at: 1), in: text) { names.insert(String(text[range])) }
            }
        }
        return names
    }

    static func identifiers(in text: String) -> Set<String> {
        var names = Set<String>()
        var current = ""
        for character in text {
            if character.isLetter || character.isNumber || character == "_" {
                current.append(character)
            } else {
                if let first = current.first, first.isUppercase { names.insert(current) }
                current = ""
            }
        }
        if let first = current.first, first.isUppercase { names.insert(current) }
        return names
    }

    @Test(arguments: forbidden.keys.sorted())
    func aFolderReferstoNothingItMustNotKnow(_ folder: String) {
        let banned = (Self.forbidden[folder] ?? []).reduce(into: [String: String]()) { result, other in
            for name in Self.declaredTypes(in: other) { result[name] = other }
        }
        #expect(!Self.files(in: folder).isEmpty, "no sources found for \(folder)")
        for file in Self.files(in: folder) {
            for name in Self.identifiers(in: Self.code(of: file)).sorted() {
                if let owner = banned[name] {
                    Issue.record("\((file as NSString).lastPathComponent) in \(folder)/ refers to \(name) from \(owner)/")
                }
            }
        }
    }

    @Test func everyFolderIsAKnownLayer() throws {
        let present = try FileManager.default.contentsOfDirectory(atPath: Self.sources).filter { name in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: Self.sources + "/" + name, isDirectory: &isDirectory) && isDirectory.boolValue
        }
        #expect(Set(present) == Self.folders)
    }

    @Test func theHelpersLiveInFoldersThatNameThem() {
        // HTTP/ holds HTTP's values only; the rest have homes of their own.
        for (folder, type) in [
            ("Files", "FileOperations"), ("Process", "SpawnedProcess"), ("Process", "CrashPoint"),
            ("Concurrency", "Locked"), ("Safety", "UntrustedText"),
        ] {
            #expect(Self.declaredTypes(in: folder).contains(type), "\(type) is not in \(folder)/")
        }
        #expect(Self.files(in: "Safety").contains { $0.hasSuffix("/SaturatingArithmetic.swift") })
        #expect(Self.declaredTypes(in: "HTTP").isDisjoint(with: ["FileOperations", "SpawnedProcess", "CrashPoint", "Locked", "UntrustedText"]))
    }

    @Test func theCheckFindsAReferenceWhenThereIsOne() {
        // The check itself: a type of Manager/ named in text is found.
        let managerTypes = Self.declaredTypes(in: "Manager")
        #expect(managerTypes.contains("Scheduler"))
        #expect(managerTypes.contains("DownloadTaskManager"))
        #expect(Self.identifiers(in: Self.code(of: Self.sources + "/Manager/TaskRun.swift")).contains("CurlEngine"))
        #expect(!Self.identifiers(in: Self.stripped("// Scheduler in a comment\nlet x = \"Scheduler\"")).contains("Scheduler"))
        #expect(Self.identifiers(in: Self.stripped("let s = Scheduler() // a comment")).contains("Scheduler"))
    }
}
