import HomewardProtocol

/// A follow-me session: one owner asking friends to watch them.
public struct FollowSession: Sendable, Equatable {
    public enum InviteState: String, Sendable {
        case invited, accepted, declined, left
    }

    public let id: String
    public let owner: String
    public var note: String?
    public let startedAt: Int64
    /// Invitees in the order they were invited.
    public private(set) var invitees: [String] = []
    /// Each invitee's state, at the invitee's index: a session has a few invitees, and a relay caching connected
    /// users holds every active session from its start, so an array costs less than a dictionary per session.
    private var states: [InviteState] = []

    // Safety extensions.
    /// Unix ms by which the owner must check in; cleared when the deadline fires.
    public var checkInBy: Int64?
    public var destination: Destination?
    public var expiresAt: Int64?
    /// Since when observers have been told contact with the owner is lost; nil while in contact.
    public var lostSince: Int64?

    public init(id: String, owner: String, note: String?, startedAt: Int64) {
        self.id = id
        self.owner = owner
        self.note = note
        self.startedAt = startedAt
    }

    public var observers: [String] { zip(invitees, states).filter { $0.1 == .accepted }.map(\.0) }

    public func state(of username: String) -> InviteState? { invitees.firstIndex(of: username).map { states[$0] } }

    public mutating func set(_ state: InviteState, for username: String) {
        if let index = invitees.firstIndex(of: username) {
            states[index] = state
        } else {
            invitees.append(username)
            states.append(state)
        }
    }

    public mutating func remove(_ username: String) {
        guard let index = invitees.firstIndex(of: username) else { return }
        invitees.remove(at: index)
        states.remove(at: index)
    }

    /// The session as clients see it.
    public func info(owner profile: UserProfile) -> SessionInfo {
        SessionInfo(id: id, owner: profile, note: note, startedAt: startedAt, observers: observers, invited: invitees,
                    checkInBy: checkInBy, destination: destination, expiresAt: expiresAt)
    }
}
