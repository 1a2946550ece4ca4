import HomewardProtocol

/// A position relayed to us: who sent it and where they were.
public struct PositionReport: Sendable, Equatable {
    public var from: String
    public var position: Position

    public init(from: String, position: Position) {
        self.from = from
        self.position = position
    }
}

/// A presence change of a friend.
public struct PresenceChange: Sendable, Equatable {
    public var username: String
    public var online: Bool
    public var lastSeen: Int64?
}

/// Whether a position went out at once or waits for the connection to come back.
public enum PositionDelivery: Sendable, Equatable {
    case sent
    /// Offline: kept as the newest position and sent right after reconnecting. Only the newest
    /// is kept, as the relay does for slow observers: an old fix is worth less than a new one.
    case deferred
}
