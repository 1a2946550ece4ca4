import HomewardProtocol

/// A location pause (friends' map): `owner` hides from everyone (`from` nil) or from one friend, until
/// `until` (Unix ms) or until resumed. Alarm recipients still get the owner's positions.
public struct LocationPause: Sendable, Equatable {
    public let owner: String
    public let from: String?
    public let until: Int64?

    public init(owner: String, from: String?, until: Int64?) {
        self.owner = owner
        self.from = from
        self.until = until
    }

    /// How stores and indexes name "everyone": no username is empty.
    public static let everyone = ""
    public var key: String { from ?? Self.everyone }
    public var info: PauseInfo { PauseInfo(from: from, until: until) }
}

/// A meeting point proposed by `owner` to friends, kept until `expiresAt` (a day after its time) or until
/// the owner cancels it.
public struct MeetingPoint: Sendable, Equatable {
    /// How long after its time a meeting point is forgotten.
    public static let keptAfterTime: Int64 = 24 * 3600 * 1000

    public let id: String
    public let owner: String
    public let name: String
    public let lat: Double
    public let lon: Double
    public let time: Int64
    public let createdAt: Int64
    public var invitees: [MeetingInvitee]

    public init(id: String, owner: String, name: String, lat: Double, lon: Double, time: Int64, createdAt: Int64,
                invitees: [MeetingInvitee]) {
        self.id = id
        self.owner = owner
        self.name = name
        self.lat = lat
        self.lon = lon
        self.time = time
        self.createdAt = createdAt
        self.invitees = invitees
    }

    public var expiresAt: Int64 { time + Self.keptAfterTime }

    public func invitee(_ username: String) -> MeetingInvitee? { invitees.first { $0.username == username } }

    mutating func update(_ username: String, _ change: (inout MeetingInvitee) -> Void) {
        guard let index = invitees.firstIndex(where: { $0.username == username }) else { return }
        change(&invitees[index])
    }

    func info(owner profile: UserProfile) -> MeetingInfo {
        MeetingInfo(id: id, from: profile, name: name, lat: lat, lon: lon,
                    time: time, createdAt: createdAt, invited: invitees)
    }
}

/// The friends' map limits.
public enum FriendsMapLimits {
    /// Messages one user may send per minute.
    public static let messagesPerMinute = 30
    public static let messageWindow: Int64 = 60_000
    /// Unread messages one user may hold from all senders; more is `rate_limited` for the sender.
    public static let unreadPerRecipient = 1000
    /// Live meeting points one user may have proposed.
    public static let meetingsPerOwner = 100
}
