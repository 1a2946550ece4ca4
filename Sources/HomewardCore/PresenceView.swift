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
}
