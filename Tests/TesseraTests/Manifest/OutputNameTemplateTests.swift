import Foundation
import Testing

@testable import Tessera

/// `OutputNameTemplate`: yt-dlp's `%(field)s` names, safe values, clear refusals.
@Suite struct OutputNameTemplateTests {
    func values(title: String? = "A Show", name: String = "stream/v720.mp4", media: String? = "v720", index: Int = 0) -> OutputNameTemplate.Values {
        var outputs = (0...index).map { _ in DownloadOutput(name: "x", segments: [DownloadSegment(url: URL(string: "http://h/x")!)]) }
        outputs[index] = DownloadOutput(
            name: name, segments: [DownloadSegment(url: URL(string: "http://h/x")!)], media: media.map { MediaInfo(kind: .video, identifier: $0) })
        return OutputNameTemplate.Values(
            manifest: DownloadManifest(title: title, outputs: outputs), index: index, type: "dash", key: "http://h/s.mpd", title: "entity title")
    }

    @Test func fieldsAreFilledIn() throws {
        #expect(try OutputNameTemplate("%(title)s.%(ext)s").name(values()) == "A Show.mp4")
        #expect(try OutputNameTemplate("%(title)s/%(format_id)s.%(ext)s").name(values()) == "A Show/v720.mp4")
        #expect(try OutputNameTemplate("%(type)s-%(name)s-%(part)d.%(ext)s").name(values(index: 2)) == "dash-v720-3.mp4")
        #expect(try OutputNameTemplate("100%% %(title)s").name(values()) == "100% A Show")
        #expect(try OutputNameTemplate("%(title)s.%(ext)s").name(values(title: nil)) == "entity title.mp4")
        #expect(try OutputNameTemplate("%(format_id)s").name(values(media: nil, index: 1)) == "2")
    }

    @Test func aMissingExtensionLeavesNoStrayDot() throws {
        #expect(try OutputNameTemplate("%(title)s.%(ext)s").name(values(name: "download")) == "A Show")
    }

    @Test func valuesAreMadeSafeAndTheNameMustStayInside() throws {
        #expect(try OutputNameTemplate("%(title)s.%(ext)s").name(values(title: "../../etc/passwd")).contains("/") == false)
        #expect(try !OutputNameTemplate("%(title)s").name(values(title: "a\u{1}b\u{202E}c")).unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x202E })
        #expect(throws: DownloadError.self) { try OutputNameTemplate("../%(title)s").name(values()) }
        #expect(throws: DownloadError.self) { try OutputNameTemplate("/abs/%(title)s").name(values()) }
        #expect(throws: DownloadError.self) { try OutputNameTemplate("../%(title)s").check() }
        #expect(throws: Never.self) { try OutputNameTemplate("%(title)s/%(format_id)s.%(ext)s").check() }
    }

    @Test func badTemplatesAreRefusedWithTheFields() {
        for bad in ["%(uploader)s", "%(title)x", "%(title", "100%", ""] {
            #expect(throws: DownloadError.self, "\(bad)") { try OutputNameTemplate(bad) }
        }
        do {
            _ = try OutputNameTemplate("%(uploader)s")
        } catch {
            #expect(error.message.contains("format_id") && error.message.contains("uploader"))
        }
    }
}
