/// A first-in, first-out queue with amortised O(1) operations (two stacks), for the relay's
/// mailbox and waiters, where `Array.removeFirst` would make a storm of commands quadratic.
struct FIFO<Element> {
    private var incoming: [Element] = []
    private var outgoing: [Element] = []

    var isEmpty: Bool { incoming.isEmpty && outgoing.isEmpty }
    var count: Int { incoming.count + outgoing.count }

    mutating func append(_ element: Element) {
        incoming.append(element)
    }

    /// Lets `merge` change the element appended last, if it is still there; returns what `merge` returned (false
    /// when there is none): the caller appends a new element instead.
    mutating func mergeIntoLast(_ merge: (inout Element) -> Bool) -> Bool {
        if !incoming.isEmpty { return merge(&incoming[incoming.count - 1]) }
        if !outgoing.isEmpty { return merge(&outgoing[0]) }
        return false
    }

    mutating func popFirst() -> Element? {
        if outgoing.isEmpty {
            guard !incoming.isEmpty else { return nil }
            outgoing = incoming.reversed()
            incoming.removeAll(keepingCapacity: true)
        }
        return outgoing.popLast()
    }

    /// The element `popFirst` would take, left in place.
    var first: Element? { outgoing.last ?? incoming.first }

    /// The first `maxLength` elements, first in first, without taking them (the mailbox's look at what waits).
    func prefix(_ maxLength: Int) -> [Element] {
        var first = Array(outgoing.reversed().prefix(maxLength))
        if first.count < maxLength { first += incoming.prefix(maxLength - first.count) }
        return first
    }
}

extension FIFO: Sendable where Element: Sendable {}
