/// How a freshly resolved manifest's outputs get their names (a value: who holds a name, the
/// other tasks or a file on disk, is asked through `isTaken`, so it is tested without either).
///
/// - A template (``DownloadTaskManager/Configuration/outputNameTemplate``) names every selected
///   output of a download; a name it cannot make keeps the plugin's (reported in ``Result/templateFailures``).
/// - An output keeps the name it was given before (a re-resolve finds its files again) when it
///   was made from the same original name, or when a response named it both times.
/// - Otherwise the first of `name`, `name.1`, `name.2`, … (before the extension, as aria2c does)
///   that no other output of this manifest was given and `isTaken` does not hold wins; a name
///   that differs from the original keeps the original in the manifest's metadata
///   (``originalNameKey(_:)``).
/// - Outputs that are not selected are left as they are (in a cache-only task every output counts).
struct OutputNaming {
    /// The template of the manager's configuration, if any.
    var template: OutputNameTemplate?
    /// The task's mode: a cache-only task writes no output, so the template names nothing, and
    /// every output counts as selected.
    var mode: DownloadTaskMode
    /// The entity's type name, key and title (the template's fields).
    var entityType: String
    var entityKey: String
    var entityTitle: String

    /// What naming decided.
    struct Result {
        /// The manifest with its outputs named.
        var manifest: DownloadManifest
        /// The outputs the template gave no name (the plugin's was kept), by index.
        var templateFailures: [(index: Int, error: DownloadError)] = []
    }

    /// The metadata key that keeps the original name of output `index` when it was numbered.
    static func originalNameKey(_ index: Int) -> String { "tessera.originalName.\(index)" }

    /// Names `fresh`'s outputs. `previous` is the manifest the task had (its names are kept
    /// where they still apply); `isTaken(name, output)` says whether `output` named `name` would
    /// fall on a place another task or an existing file holds.
    func name(
        _ fresh: DownloadManifest, previous: DownloadManifest?, isTaken: (String, DownloadOutput) -> Bool
    ) -> Result {
        var result = Result(manifest: fresh)
        // The names given to this manifest's outputs so far: a template can give two the same.
        var assigned = Set<String>()
        for index in fresh.outputs.indices {
            let counts = result.manifest.outputs[index].isSelected || mode == .cacheOnly
            if let template, mode == .download, result.manifest.outputs[index].isSelected {
                do {
                    result.manifest.outputs[index].name = try template.name(OutputNameTemplate.Values(
                        manifest: result.manifest, index: index, type: entityType, key: entityKey, title: entityTitle))
                    result.manifest.outputs[index].isNamedByResponse = false
                } catch {
                    result.templateFailures.append((index, error))
                }
            }
            let output = result.manifest.outputs[index]
            let original = output.name
            // (Made when it is used: most outputs keep their names, and a list of files names thousands.)
            var key: String { Self.originalNameKey(index) }
            if let previous, index < previous.outputs.count {
                let earlierOriginal = previous.metadata[key] ?? previous.outputs[index].name
                if earlierOriginal == original || (output.isNamedByResponse && previous.outputs[index].isNamedByResponse) {
                    result.manifest.outputs[index].name = previous.outputs[index].name
                    if previous.outputs[index].name != original { result.manifest.metadata[key] = earlierOriginal }
                    assigned.insert(previous.outputs[index].name)
                    continue
                }
            }
            guard counts else { continue }
            var candidate = original
            var number = 0
            while assigned.contains(candidate) || isTaken(candidate, output) {
                number += 1
                candidate = OutputClaims.numbered(original, number)
            }
            // (A manifest of one output, as most are, has no other name to keep apart from.)
            if fresh.outputs.count > 1 { assigned.insert(candidate) }
            if candidate != original {
                result.manifest.outputs[index].name = candidate
                result.manifest.metadata[key] = original
            }
        }
        return result
    }
}
