/// Class names as `String(describing:)` gives them, made once per class: it reflects on the
/// type at each call, and an entity's and its group's names are asked for each task added.
enum TypeNames {
    private static let names = Locked<[ObjectIdentifier: String]>([:])

    /// The name of `type`.
    static func name(of type: AnyClass) -> String {
        let key = ObjectIdentifier(type)
        if let name = names.withLock({ $0[key] }) { return name }
        let name = String(describing: type)
        names.withLock { $0[key] = name }
        return name
    }
}
