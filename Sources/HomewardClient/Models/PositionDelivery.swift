import HomewardProtocol

/// Whether a position went out at once or waits for the connection to come back.
public enum PositionDelivery: Sendable, Equatable {
    case sent
    /// Offline: kept as the newest position and sent right after reconnecting. Only the newest
    /// is kept, as the relay does for slow observers: an old fix is worth less than a new one.
    case deferred
}
