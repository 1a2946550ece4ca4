import HomewardProtocol

/// A walker's last position, kept so that nobody is ever shown one that a pause hid from them when it was
/// sent: not in a `friend.location`, an accept or watch reply, `session.lost`, nor after the pause ended.
///
/// It holds the newest position with the restriction it was sent under (`PositionRestriction`, as the
/// fan-out applied it), and the newest one that was sent under none. Whoever the newest is hidden from is
/// shown the older unrestricted one instead (or none): older, never hidden. Two slots, not a history, so
/// recording stays a few stores under the fan-out's one lock.
public struct LastPosition: Sendable, Equatable {
    /// The three slots below, out of line: most users a relay keeps presence for (every owner and observer of an
    /// active session) never send a position there, so an empty record costs 8 bytes and no allocation instead of
    /// two inline positions (over 200 bytes in every presence entry).
    private var slots = OutOfLine<Slots>()

    private struct Slots: Sendable, Equatable {
        var latest: Position?
        var restriction: PositionRestriction?
        var unrestricted: Position?
    }

    /// The newest position, whatever the pauses: for alarms, which override them, and nobody else.
    public var latest: Position? { slots.value?.latest ?? nil }
    /// Whom `latest` was hidden from when it was sent; nil when from nobody.
    public var restriction: PositionRestriction? { slots.value?.restriction ?? nil }
    /// The newest position sent while hidden from nobody (`latest` itself when it was).
    public var unrestricted: Position? { slots.value?.unrestricted ?? nil }

    public init() {}

    /// A position hidden from nobody (or none).
    public init(_ position: Position?) {
        if let position { slots.value = Slots(latest: position, restriction: nil, unrestricted: position) }
    }

    public init(latest: Position?, restriction: PositionRestriction?, unrestricted: Position?) {
        guard latest != nil || unrestricted != nil || restriction != nil else { return }
        slots.value = Slots(latest: latest, restriction: restriction, unrestricted: restriction == nil ? latest : unrestricted)
    }

    /// `position` was sent to its audience under `restriction` (nil: no pause hid it from anyone).
    public mutating func record(_ position: Position, restriction: PositionRestriction?) {
        let unrestricted = restriction == nil ? position : self.unrestricted
        slots.value = Slots(latest: position, restriction: restriction, unrestricted: unrestricted)
    }

    /// The newest position none of `askers` was hidden from when it was sent: `latest`, or when a pause hid
    /// that from any of them, the newest unrestricted one (nil when there is none).
    public func shown(to askers: some Sequence<String>) -> Position? {
        guard let restriction, askers.contains(where: restriction.hides) else { return latest }
        return unrestricted
    }

    public var isEmpty: Bool { latest == nil }
}
