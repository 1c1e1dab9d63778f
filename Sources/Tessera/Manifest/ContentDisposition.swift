import Foundation

/// The file name in a `Content-Disposition` header (RFC 6266): `filename*` (RFC 8187,
/// percent-encoded with a charset) wins over `filename`.
enum ContentDisposition {
    static func fileName(_ value: String) -> String? {
        var plain: String?
        var extended: String?
        for parameter in parameters(value) {
            switch parameter.name.lowercased() {
            case "filename*":
                // charset'language'percent-encoded
                let parts = parameter.value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
                guard parts.count == 3 else { continue }
                let charset = parts[0].lowercased()
                let encoded = String(parts[2])
                if charset == "utf-8" {
                    extended = encoded.removingPercentEncoding
                } else if charset == "iso-8859-1", let bytes = percentDecodedBytes(encoded) {
                    extended = String(bytes: bytes, encoding: .isoLatin1)
                }
            case "filename":
                plain = parameter.value
            default:
                continue
            }
        }
        let name = extended ?? plain
        guard let name, !name.isEmpty else { return nil }
        // Keep only the last path component: a name is not a path.
        return name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init)
    }

    private static func parameters(_ value: String) -> [(name: String, value: String)] {
        var result: [(String, String)] = []
        var rest = Substring(value)
        // Skip the disposition type.
        guard let semicolon = rest.firstIndex(of: ";") else { return [] }
        rest = rest[rest.index(after: semicolon)...]
        while !rest.isEmpty {
            rest = rest.drop(while: { $0 == " " || $0 == "\t" || $0 == ";" })
            guard let equals = rest.firstIndex(of: "=") else { break }
            let name = rest[..<equals].trimmingCharacters(in: .whitespaces)
            rest = rest[rest.index(after: equals)...].drop(while: { $0 == " " })
            var parameterValue = ""
            if rest.first == "\"" {
                rest = rest.dropFirst()
                var escaped = false
                while let character = rest.first {
                    rest = rest.dropFirst()
                    if escaped {
                        parameterValue.append(character)
                        escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == "\"" {
                        break
                    } else {
                        parameterValue.append(character)
                    }
                }
                rest = rest.drop(while: { $0 != ";" })
            } else {
                let end = rest.firstIndex(of: ";") ?? rest.endIndex
                parameterValue = rest[..<end].trimmingCharacters(in: .whitespaces)
                rest = rest[end...]
            }
            result.append((name, parameterValue))
        }
        return result
    }

    private static func percentDecodedBytes(_ text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(),
                    let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        return bytes
    }
}
