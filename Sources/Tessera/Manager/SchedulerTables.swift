/// Values by task handle, kept at the handle's number: the manager numbers its tasks densely
/// from 1, so a lookup is an index, not a hash (the scheduler looks its entries up several times
/// per event). A removed task leaves an empty place.
struct HandleTable<Value> {
    private var slots: [Value?] = []
    /// How many handles have a value.
    private(set) var count = 0

    subscript(handle: TaskHandle) -> Value? {
        get {
            let index = handle.raw
            return index >= 0 && index < slots.count ? slots[index] : nil
        }
        _modify {
            let index = handle.raw
            precondition(index >= 0, "a task handle is not negative")
            if index >= slots.count { slots.append(contentsOf: repeatElement(nil, count: index - slots.count + 1)) }
            let had = slots[index] != nil
            yield &slots[index]
            count += (slots[index] != nil ? 1 : 0) - (had ? 1 : 0)
        }
    }

    /// Every handle with its value, in handle order.
    var pairs: some Sequence<(key: TaskHandle, value: Value)> {
        slots.lazy.enumerated().compactMap { index, value in value.map { (key: TaskHandle(index), value: $0) } }
    }

    /// Every value, in handle order.
    var values: some Sequence<Value> { slots.lazy.compactMap { $0 } }
}

extension HandleTable: Sendable where Value: Sendable {}

/// Task handles, kept by the handle's number: membership is an index, not a hash (the
/// scheduler asks whether a task runs several times per event). Iterates in insertion order,
/// except that a removal moves the last handle into the removed one's place.
struct HandleSet: Sendable, Sequence, Equatable {
    private var members: [TaskHandle] = []
    /// Each member's place in `members`.
    private var places = HandleTable<Int>()

    init() {}

    var count: Int { members.count }
    var isEmpty: Bool { members.isEmpty }

    func contains(_ handle: TaskHandle) -> Bool { places[handle] != nil }

    /// Adds `handle`; `false` when it was a member already.
    @discardableResult
    mutating func insert(_ handle: TaskHandle) -> Bool {
        guard places[handle] == nil else { return false }
        places[handle] = members.count
        members.append(handle)
        return true
    }

    /// Removes `handle`; `false` when it was not a member.
    @discardableResult
    mutating func remove(_ handle: TaskHandle) -> Bool {
        guard let place = places[handle] else { return false }
        let last = members.removeLast()
        if place < members.count {
            members[place] = last
            places[last] = place
        }
        places[handle] = nil
        return true
    }

    /// Removes every handle, keeping the room for them (it clears only the members' places).
    mutating func removeAll() {
        for handle in members { places[handle] = nil }
        members.removeAll(keepingCapacity: true)
    }

    func makeIterator() -> IndexingIterator<[TaskHandle]> { members.makeIterator() }

    /// Equal when they hold the same handles, in any order.
    static func == (lhs: HandleSet, rhs: HandleSet) -> Bool {
        lhs.count == rhs.count && lhs.members.allSatisfy(rhs.contains)
    }
}

/// Counts by host name: a task's demand and its held slots. Nearly every task has one host
/// (a segmented file may have a few mirrors), so a short list searched in order costs less
/// than a dictionary, which hashes the name at every change. No entry holds 0.
struct HostCounts: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    private var pairs: [(key: String, value: Int)] = []

    init() {}

    init(dictionaryLiteral elements: (String, Int)...) {
        for (key, value) in elements { self[key] = value }
    }

    var count: Int { pairs.count }
    var isEmpty: Bool { pairs.isEmpty }
    /// The hosts, in the order they were first counted.
    var keys: [String] { pairs.map(\.key) }
    /// The host counted first.
    var first: (key: String, value: Int)? { pairs.first }

    /// The count of `host`; `nil` when it has none. Setting `nil` or 0 removes it.
    subscript(host: String) -> Int? {
        get { pairs.first { $0.key == host }?.value }
        set {
            let index = pairs.firstIndex { $0.key == host }
            switch (index, newValue) {
            case (let index?, let value?) where value != 0: pairs[index].value = value
            case (let index?, _): pairs.remove(at: index)
            case (nil, let value?) where value != 0: pairs.append((key: host, value: value))
            case (nil, _): break
            }
        }
    }

    /// The count of `host`, or `defaultValue`; a count changed to 0 is removed.
    subscript(host: String, default defaultValue: Int) -> Int {
        get { self[host] ?? defaultValue }
        set { self[host] = newValue }
    }

    mutating func removeAll() { pairs.removeAll(keepingCapacity: true) }

    func makeIterator() -> IndexingIterator<[(key: String, value: Int)]> { pairs.makeIterator() }

    /// Equal when they count the same hosts alike, in any order.
    static func == (lhs: HostCounts, rhs: HostCounts) -> Bool {
        lhs.count == rhs.count && lhs.pairs.allSatisfy { rhs[$0.key] == $0.value }
    }

    func hash(into hasher: inout Hasher) {
        // (Order-independent, as equality is.)
        var sum = 0
        for pair in pairs {
            var one = Hasher()
            one.combine(pair.key)
            one.combine(pair.value)
            sum &+= one.finalize()
        }
        hasher.combine(pairs.count)
        hasher.combine(sum)
    }
}
