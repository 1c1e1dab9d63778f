import Foundation
import Tessera

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// JSON written to standard output as it is made, in blocks: a document of 400,000 segments is
/// never held whole. Strings are escaped as JSON needs and, like ``Terminal/jsonData(_:pretty:)``,
/// every character a terminal would act on is written as a `\uXXXX` escape (the same string for
/// a JSON reader). Keys are written in the order the caller gives (callers give them sorted).
struct JSONStream {
    private var buffer: [UInt8] = []
    private let descriptor: Int32
    /// Set when standard output stopped taking bytes (a closed pipe): the rest is dropped.
    private(set) var failed = false

    init(descriptor: Int32 = STDOUT_FILENO) {
        self.descriptor = descriptor
        buffer.reserveCapacity(Self.blockSize + 4096)
    }

    static let blockSize = 64 << 10

    /// Structural text, as it is (ASCII).
    mutating func raw(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= Self.blockSize { flush() }
    }

    /// A JSON string.
    mutating func string(_ value: String) {
        // Printable ASCII without a quote or a backslash (every URL): as it is.
        if value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }) {
            buffer.append(0x22)
            buffer.append(contentsOf: value.utf8)
            buffer.append(0x22)
            if buffer.count >= Self.blockSize { flush() }
            return
        }
        buffer.append(0x22)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": buffer.append(contentsOf: [0x5C, 0x22])
            case "\\": buffer.append(contentsOf: [0x5C, 0x5C])
            case "\n": buffer.append(contentsOf: [0x5C, 0x6E])
            case "\r": buffer.append(contentsOf: [0x5C, 0x72])
            case "\t": buffer.append(contentsOf: [0x5C, 0x74])
            default:
                if scalar.value < 0x20 || UntrustedText.isUnsafe(scalar) {
                    escape(scalar)
                } else {
                    buffer.append(contentsOf: String(scalar).utf8)
                }
            }
        }
        buffer.append(0x22)
        if buffer.count >= Self.blockSize { flush() }
    }

    private mutating func escape(_ scalar: Unicode.Scalar) {
        func unit(_ value: UInt32) {
            let hex = String(value, radix: 16)
            buffer.append(contentsOf: ("\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex).utf8)
        }
        if scalar.value > 0xFFFF {
            let value = scalar.value - 0x10000
            unit(0xD800 + (value >> 10))
            unit(0xDC00 + (value & 0x3FF))
        } else {
            unit(scalar.value)
        }
    }

    /// Any value of the kinds `JSONSerialization` takes (strings, numbers, booleans, arrays,
    /// dictionaries, `NSNull`), compact, dictionaries with sorted keys.
    mutating func value(_ value: Any) {
        switch value {
        case let text as String: string(text)
        case let flag as Bool: raw(flag ? "true" : "false")
        case let number as Int: raw(String(number))
        case let number as Int64: raw(String(number))
        case let number as Int32: raw(String(number))
        case let number as UInt64: raw(String(number))
        case let number as Double: raw(number.isFinite ? String(number) : "null")
        case let array as [Any]:
            raw("[")
            for (index, element) in array.enumerated() {
                if index > 0 { raw(",") }
                self.value(element)
            }
            raw("]")
        case let object as [String: Any]:
            raw("{")
            for (index, key) in object.keys.sorted().enumerated() {
                if index > 0 { raw(",") }
                string(key)
                raw(":")
                self.value(object[key]!)
            }
            raw("}")
        default:
            raw("null")
        }
    }

    /// Writes what is buffered.
    mutating func flush() {
        guard !buffer.isEmpty else { return }
        defer { buffer.removeAll(keepingCapacity: true) }
        guard !failed else { return }
        var done = 0
        while done < buffer.count {
            let written = buffer.withUnsafeBytes { write(descriptor, $0.baseAddress! + done, buffer.count - done) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                failed = true
                return
            }
            done += written
        }
    }
}
