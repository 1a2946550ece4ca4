import HomewardProtocol

/// A walker's last position, kept so that nobody is ever shown one that a pause hid from them when it was
/// sent: not in a `friend.location`, an accept or watch reply, `session.lost`, nor after the pause ended.
///
/// It holds the newest position with the restriction it was sent under (`PositionRestriction`, as the
/// fan-out applied it), and the newest one that was sent under none. Whoever the newest is hidden from is
/// shown the older unrestricted one instead (or none): older, never hidden. Two slots, not a history, so
/// recording stays a few stores under the fan-out's one lock.
public struct LastPosition: Sendable, Equatable {
    /// The newest position, whatever the pauses: for alarms, which override them, and nobody else.
    public private(set) var latest: Position?
    /// Whom `latest` was hidden from when it was sent; nil when from nobody.
    public private(set) var restriction: PositionRestriction?
    /// The newest position sent while hidden from nobody (`latest` itself when it was).
    public private(set) var unrestricted: Position?

    public init() {}

    /// A position hidden from nobody (or none).
    public init(_ position: Position?) {
        latest = position
        unrestricted = position
    }

    public init(latest: Position?, restriction: PositionRestriction?, unrestricted: Position?) {
        self.latest = latest
        self.restriction = restriction
        self.unrestricted = restriction == nil ? latest : unrestricted
    }

    /// `position` was sent to its audience under `restriction` (nil: no pause hid it from anyone).
    public mutating func record(_ position: Position, restriction: PositionRestriction?) {
        latest = position
        self.restriction = restriction
        if restriction == nil { unrestricted = position }
    }

    /// The newest position none of `askers` was hidden from when it was sent: `latest`, or when a pause hid
    /// that from any of them, the newest unrestricted one (nil when there is none).
    public func shown(to askers: some Sequence<String>) -> Position? {
        guard let restriction, askers.contains(where: restriction.hides) else { return latest }
        return unrestricted
    }

    public var isEmpty: Bool { latest == nil }
}
