import Foundation
import Testing
@testable import Tessera

/// How a manifest's outputs are named, decided without a disk or other tasks: `isTaken` stands
/// for both.
@Suite struct OutputNamingTests {
    let segment = DownloadSegment(url: URL(string: "http://127.0.0.1/s")!)

    func manifest(_ names: [String], selected: Set<Int>? = nil, byResponse: Bool = false, metadata: [String: String] = [:])
        -> DownloadManifest
    {
        DownloadManifest(
            outputs: names.enumerated().map { index, name in
                DownloadOutput(
                    name: name, segments: [segment], isSelected: selected?.contains(index) ?? true, isNamedByResponse: byResponse)
            },
            metadata: metadata)
    }

    func naming(template: String? = nil, mode: DownloadTaskMode = .download) throws -> OutputNaming {
        OutputNaming(
            template: try template.map { try OutputNameTemplate($0) }, mode: mode, entityType: "fixture", entityKey: "k1",
            entityTitle: "Title")
    }

    @Test func aFreeNameIsKept() throws {
        let result = try naming().name(manifest(["a.bin"]), previous: nil) { _, _ in false }
        #expect(result.manifest.outputs[0].name == "a.bin")
        #expect(result.manifest.metadata.isEmpty)
    }

    @Test func aTakenNameIsNumberedBeforeItsExtensionAndTheOriginalKept() throws {
        let taken: Set = ["a.bin", "a.1.bin"]
        let result = try naming().name(manifest(["a.bin"]), previous: nil) { name, _ in taken.contains(name) }
        #expect(result.manifest.outputs[0].name == "a.2.bin")
        #expect(result.manifest.metadata[OutputNaming.originalNameKey(0)] == "a.bin")
    }

    @Test func twoOutputsOfOneManifestNeverShareAName() throws {
        let result = try naming().name(manifest(["a.bin", "a.bin"]), previous: nil) { _, _ in false }
        #expect(result.manifest.outputs.map(\.name) == ["a.bin", "a.1.bin"])
    }

    @Test func aReResolveKeepsTheNamesGivenBefore() throws {
        let first = try naming().name(manifest(["a.bin"]), previous: nil) { name, _ in name == "a.bin" }
        // The file that made it a.1.bin is its own now: the name given before stays.
        let again = try naming().name(manifest(["a.bin"]), previous: first.manifest) { name, _ in name != "a.9.bin" }
        #expect(again.manifest.outputs[0].name == "a.1.bin")
        #expect(again.manifest.metadata[OutputNaming.originalNameKey(0)] == "a.bin")
    }

    @Test func aNameAResponseGaveStaysAcrossAReResolve() throws {
        let previous = manifest(["server-name.bin"], byResponse: true)
        let again = try naming().name(manifest(["placeholder"], byResponse: true), previous: previous) { _, _ in false }
        #expect(again.manifest.outputs[0].name == "server-name.bin")
    }

    @Test func outputsNotSelectedAreLeftAsTheyAre() throws {
        let taken: Set = ["a.bin", "b.bin"]
        let result = try naming().name(manifest(["a.bin", "b.bin"], selected: [0]), previous: nil) { name, _ in taken.contains(name) }
        #expect(result.manifest.outputs.map(\.name) == ["a.1.bin", "b.bin"])
    }

    @Test func inACacheOnlyTaskEveryOutputCountsAndNoTemplateApplies() throws {
        let naming = try naming(template: "%(title)s.%(ext)s", mode: .cacheOnly)
        let result = naming.name(manifest(["a.bin", "b.bin"], selected: [0]), previous: nil) { name, _ in name == "b.bin" }
        #expect(result.manifest.outputs.map(\.name) == ["a.bin", "b.1.bin"])
    }

    @Test func theTemplateNamesSelectedOutputsAndTwoSameNamesAreNumbered() throws {
        let result = try naming(template: "%(title)s.%(ext)s").name(manifest(["a.mp4", "b.mp4"]), previous: nil) { _, _ in false }
        #expect(result.manifest.outputs.map(\.name) == ["Title.mp4", "Title.1.mp4"])
        #expect(result.templateFailures.isEmpty)
    }

    @Test func aNameTheTemplateCannotMakeKeepsThePluginsAndIsReported() throws {
        // (An empty title and nothing else: no name.)
        let naming = OutputNaming(
            template: try OutputNameTemplate("%(title)s"), mode: .download, entityType: "fixture", entityKey: "k1", entityTitle: "")
        let result = naming.name(manifest(["a.bin"]), previous: nil) { _, _ in false }
        #expect(result.manifest.outputs[0].name == "a.bin")
        #expect(result.templateFailures.map(\.index) == [0])
    }
}
