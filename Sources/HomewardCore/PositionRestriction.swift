import HomewardProtocol

/// Whom a position of a walker with pauses may reach on the other relays. The walker's relay decides it
/// when it publishes the position, since it has applied every pause the walker made there; the others
/// deliver to whom they know receives the walker, pauses ignored (`PresenceTable`), less whom this hides.
public enum PositionRestriction: Sendable, Equatable {
    /// Paused for everyone: only these, the recipients of the walker's active alarms.
    case only(Set<String>)
    /// Paused for some friends: everyone who receives the walker but these (alarm recipients never are).
    case allBut(Set<String>)

    /// Whether a position so restricted must not reach `name` (a username or a viewer key).
    public func hides(_ name: String) -> Bool {
        switch self {
        case .only(let names): !names.contains(name)
        case .allBut(let names): names.contains(name)
        }
    }
}

/// The walker's relay's answer to another relay asking for the walker's last position on behalf of some
/// users (`RelayBus.lastPosition(of:for:)`).
public struct LastPositionAnswer: Sendable, Equatable {
    /// The walker's last positions, each with the restriction it was sent under, for the asking relay to
    /// keep and show by the same rule (`LastPosition.shown(to:)`); empty when they sent none, or when a
    /// pause hides them from every asker.
    public var last: LastPosition
    /// The askers a pause hides the walker from now: they must not be shown any position of theirs.
    public var hiddenFrom: Set<String>
    /// The walker's trail as recorded there, each point with its restriction (nil when none is recorded, or a
    /// pause hides the walker from every asker).
    public var trail: SessionTrail?

    public init(last: LastPosition, hiddenFrom: Set<String> = []) {
        self.last = last
        self.hiddenFrom = hiddenFrom
    }

    /// An answer with one position hidden from nobody (or none).
    public init(position: Position?, hiddenFrom: Set<String> = []) {
        self.init(last: LastPosition(position), hiddenFrom: hiddenFrom)
    }

    /// The answer for `askers` of a walker whose last positions are `last` and whose positions are
    /// restricted now by `restriction` (nil: no pause).
    public init(last: LastPosition, restriction: PositionRestriction?, askers: [String]) {
        let hidden = Set(askers.filter { restriction?.hides($0) ?? false })
        self.init(last: !askers.isEmpty && hidden.count == Set(askers).count ? LastPosition() : last, hiddenFrom: hidden)
    }

    /// The same, with the walker's trail unless the pause hides them from every asker.
    public init(last: LastPosition, trail: SessionTrail?, restriction: PositionRestriction?, askers: [String]) {
        self.init(last: last, restriction: restriction, askers: askers)
        if askers.isEmpty || hiddenFrom.count < Set(askers).count { self.trail = trail }
    }
}
