/// Class names as `String(describing:)` gives them, made once per class: it reflects on the
/// type at each call, and an entity's and its group's names are asked for each task added.
enum TypeNames {
    private static let names = Locked<[ObjectIdentifier: String]>([:])

    /// The name of `type`.
    static func name(of type: AnyClass) -> String {
        let key = ObjectIdentifier(type)
        if let name = names.withLock({ $0[key] }) { return name }
        // (What `String(describing:)` prints for a type, without its way through `print`, which
        // casts the type to the printing protocols: a search of every conformance of the binary
        // at startup.)
        let name = _typeName(type, qualified: false)
        names.withLock { $0[key] = name }
        return name
    }
}
