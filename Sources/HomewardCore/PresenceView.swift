import HomewardProtocol

/// The live facts the rules need from the presence table.
public protocol PresenceView {
    func isOnline(_ username: String) -> Bool
    func lastSeen(_ username: String) -> Int64?
    func lastPosition(_ username: String) -> Position?
}
