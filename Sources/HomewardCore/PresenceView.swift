import HomewardProtocol

/// The live facts the rules need from the presence table.
public protocol PresenceView {
    func isOnline(_ username: String) -> Bool
    func lastSeen(_ username: String) -> Int64?
    /// The newest position of `username`, whatever the pauses: only for alarms, which override them.
    func lastPosition(_ username: String) -> Position?
    /// The newest position of `username` that none of `askers` was hidden from when it was sent
    /// (`LastPosition.shown(to:)`): what any reply or event may show them.
    func lastPosition(of username: String, shownTo askers: [String]) -> Position?
    /// The trail of `username`'s active walk recorded here, less every point hidden from any of `askers`
    /// when it was sent (`SessionTrail`); nil when none is recorded here.
    func trail(of username: String, shownTo askers: [String], now: Int64) -> TrailInfo?
}

extension PresenceView {
    /// Views that record no trails (test doubles of the rules) have none to show.
    public func trail(of username: String, shownTo askers: [String], now: Int64) -> TrailInfo? { nil }
}
