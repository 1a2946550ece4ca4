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
    public private(set) var states: [String: InviteState] = [:]

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

    public var observers: [String] { invitees.filter { states[$0] == .accepted } }

    public func state(of username: String) -> InviteState? { states[username] }

    public mutating func set(_ state: InviteState, for username: String) {
        if states.updateValue(state, forKey: username) == nil { invitees.append(username) }
    }

    public mutating func remove(_ username: String) {
        guard states.removeValue(forKey: username) != nil else { return }
        invitees.removeAll { $0 == username }
    }

    /// The session as clients see it.
    public func info(owner profile: UserProfile) -> SessionInfo {
        SessionInfo(id: id, owner: profile, note: note, startedAt: startedAt, observers: observers, invited: invitees,
                    checkInBy: checkInBy, destination: destination, expiresAt: expiresAt)
    }
}
