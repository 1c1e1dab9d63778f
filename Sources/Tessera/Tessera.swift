/// Facts about the Tessera library itself.
public enum Tessera {
    /// The library's version.
    public static let version = "0.1.0"
}
