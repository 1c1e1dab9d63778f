/// A digest a manifest gives for a file or a segment, e.g. Metalink's
/// `<hash type="sha-256">…</hash>` or a `SHA256SUMS` line: an algorithm and the lowercase hex of
/// the digest.
///
/// The value is validated when it is made: ``hexDigest`` always holds exactly
/// `2 × algorithm.digestLength` lowercase hex digits, so two checksums of the same bytes are
/// `==` however the manifest spelled them. Compute and verify with ``compute(_:bytes:)-(_,Collection<UInt8>)``,
/// ``compute(_:fileAt:range:)`` and ``verify(fileAt:range:)``, or stream with
/// `ChecksumHasher`. The hashing is OpenSSL's libcrypto.
public struct Checksum: Hashable, Sendable, Codable, CustomStringConvertible {
    /// A hash function, ordered by strength: `md5 < sha1 < sha256 < sha384 < sha512`.
    ///
    /// The raw value is the short lowercase name used in ``Checksum/description`` and in the
    /// encoded form. MD5 and SHA-1 are broken against deliberate collisions; they still catch
    /// corruption in transit, but prefer the strongest hash a manifest offers
    /// (``Checksum/strongest(_:)``).
    public enum Algorithm: String, Sendable, Codable, CaseIterable, Comparable {
        /// MD5 (RFC 1321), 16 bytes.
        case md5
        /// SHA-1 (FIPS 180-4), 20 bytes.
        case sha1
        /// SHA-256 (FIPS 180-4), 32 bytes.
        case sha256
        /// SHA-384 (FIPS 180-4), 48 bytes.
        case sha384
        /// SHA-512 (FIPS 180-4), 64 bytes.
        case sha512

        /// The size of a digest in bytes (its hex form has twice as many characters).
        public var digestLength: Int {
            switch self {
            case .md5: 16
            case .sha1: 20
            case .sha256: 32
            case .sha384: 48
            case .sha512: 64
            }
        }

        /// The name in the IANA "Hash Function Textual Names" registry (RFC 5854), which
        /// Metalink's `type` attribute uses: `md5`, `sha-1`, `sha-256`, `sha-384`, `sha-512`.
        public var textualName: String {
            switch self {
            case .md5: "md5"
            case .sha1: "sha-1"
            case .sha256: "sha-256"
            case .sha384: "sha-384"
            case .sha512: "sha-512"
            }
        }

        /// Parses the names manifests use, ignoring case and surrounding white space: the IANA
        /// "Hash Function Textual Names" (`md5`, `sha-1`, `sha-256`, `sha-384`, `sha-512`;
        /// RFC 5854) and the same without the hyphen (`sha1`, `sha256`, …). `nil` for any
        /// other name, such as `sha-224` or `crc32`.
        public init?(name: String) {
            var normalized = ""
            for scalar in name.unicodeScalars {
                // ASCII-only lowercasing, so no locale or Unicode case folding is involved.
                guard scalar.isASCII else { return nil }
                let value = scalar.value
                normalized.unicodeScalars.append(
                    (65...90).contains(value) ? Unicode.Scalar(value + 32)! : scalar)
            }
            switch normalized.trimmingASCIIWhitespace() {
            case "md5": self = .md5
            case "sha1", "sha-1": self = .sha1
            case "sha256", "sha-256": self = .sha256
            case "sha384", "sha-384": self = .sha384
            case "sha512", "sha-512": self = .sha512
            default: return nil
            }
        }

        /// The position in the strength order.
        private var strength: Int {
            switch self {
            case .md5: 0
            case .sha1: 1
            case .sha256: 2
            case .sha384: 3
            case .sha512: 4
            }
        }

        /// Whether `lhs` is the weaker hash.
        public static func < (lhs: Algorithm, rhs: Algorithm) -> Bool {
            lhs.strength < rhs.strength
        }
    }

    /// The hash function.
    public private(set) var algorithm: Algorithm
    /// The digest as lowercase hex, `2 × algorithm.digestLength` characters.
    public private(set) var hexDigest: String

    /// Creates a checksum from a hex digest as a manifest gives it. Upper- and lowercase digits
    /// are accepted; the value is stored lowercase.
    ///
    /// - Throws: ``DownloadError/Code/manifestInvalid`` when `hex` has a character other than
    ///   an ASCII hex digit (white space included), or is not exactly
    ///   `2 × algorithm.digestLength` characters long.
    public init(_ algorithm: Algorithm, hex: String) throws(DownloadError) {
        let expected = 2 * algorithm.digestLength
        var lowercase = [UInt8]()
        lowercase.reserveCapacity(expected)
        for byte in hex.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"):
                lowercase.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "F"):
                lowercase.append(byte + 32)
            default:
                throw DownloadError(
                    .manifestInvalid,
                    "a \(algorithm) checksum must be hex digits only, got \(Self.quoted(hex))")
            }
        }
        guard lowercase.count == expected else {
            throw DownloadError(
                .manifestInvalid,
                "a \(algorithm) checksum has \(expected) hex digits, got \(lowercase.count): \(Self.quoted(hex))")
        }
        self.algorithm = algorithm
        self.hexDigest = String(decoding: lowercase, as: UTF8.self)
    }

    /// Creates a checksum from the raw digest bytes, e.g. as a hash function returns them.
    ///
    /// - Precondition: `digest.count == algorithm.digestLength`.
    public init(_ algorithm: Algorithm, digest: [UInt8]) {
        precondition(
            digest.count == algorithm.digestLength,
            "a \(algorithm) digest is \(algorithm.digestLength) bytes, not \(digest.count)")
        self.algorithm = algorithm
        self.hexDigest = Self.hex(digest)
    }

    /// The raw digest bytes.
    public var digest: [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(algorithm.digestLength)
        var high: UInt8?
        for character in hexDigest.utf8 {
            let nibble =
                character <= UInt8(ascii: "9") ? character - UInt8(ascii: "0") : character - UInt8(ascii: "a") + 10
            if let first = high {
                bytes.append(first << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return bytes
    }

    /// The strongest of several checksums of the same bytes (Metalink lists several hashes for
    /// a file): the one with the greatest ``Algorithm``, the first of those on a tie; `nil` for
    /// an empty list.
    public static func strongest(_ checksums: [Checksum]) -> Checksum? {
        checksums.max { $0.algorithm < $1.algorithm }
    }

    /// `algorithm:hex`, e.g. `sha256:e3b0c442…`.
    public var description: String { "\(algorithm.rawValue):\(hexDigest)" }

    // MARK: Codable

    private enum CodingKeys: String, CodingKey {
        case algorithm
        case hexDigest
    }

    /// Decodes `{"algorithm": "sha256", "hexDigest": "…"}`, validating the digest as
    /// ``init(_:hex:)`` does.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let algorithm = try container.decode(Algorithm.self, forKey: .algorithm)
        let hex = try container.decode(String.self, forKey: .hexDigest)
        do {
            try self.init(algorithm, hex: hex)
        } catch {
            throw DecodingError.dataCorruptedError(
                forKey: .hexDigest, in: container, debugDescription: error.message)
        }
    }

    /// Encodes `{"algorithm": "sha256", "hexDigest": "…"}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(algorithm, forKey: .algorithm)
        try container.encode(hexDigest, forKey: .hexDigest)
    }

    // MARK: Helpers

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Lowercase hex of `bytes`.
    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        var characters = [UInt8]()
        characters.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            characters.append(hexDigits[Int(byte >> 4)])
            characters.append(hexDigits[Int(byte & 0x0F)])
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// `text` quoted and escaped for a message, cut to its first 80 characters.
    private static func quoted(_ text: String) -> String {
        let limit = 80
        guard text.count > limit else { return text.debugDescription }
        return String(text.prefix(limit)).debugDescription + "… (\(text.utf8.count) bytes)"
    }
}

extension String {
    /// The string without leading and trailing ASCII spaces, tabs and line breaks.
    fileprivate func trimmingASCIIWhitespace() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return self[first...last]
    }
}
