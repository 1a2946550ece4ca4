/// Per-account limits the core enforces.
public struct RelayLimits: Sendable {
    public var maxConnectionsPerUser = 16
    /// Failed logins allowed per username, and per client address, within `loginFailureWindow`.
    public var loginFailuresPerUsername = 10
    public var loginFailuresPerAddress = 50
    public var loginFailureWindow: Int64 = 15 * 60 * 1000
    /// Failed `hello`s (unknown, revoked or expired tokens) allowed per client address within
    /// `loginFailureWindow`; past that, a token the relay does not already hold as valid gets
    /// `rate_limited` without being looked up. 0 for no limit.
    public var helloFailuresPerAddress = 50
    /// Accounts one client address may create within `registrationWindow`; 0 for no limit.
    public var registrationsPerAddress = 10
    public var registrationWindow: Int64 = 60 * 60 * 1000
    /// How long a sign-in token stays valid after its last use (sliding: each `hello` extends it).
    public var tokenLifetime: Int64 = 30 * 24 * 3600 * 1000
    /// Password hashes computed at once; more registrations or logins wait their turn.
    public var concurrentPasswordHashes = 4
    /// Failed `watch` attempts (unknown, expired or revoked share-link tokens) one client address may make
    /// within `watchFailureWindow`; after that every `watch` from it is `rate_limited`, so tokens cannot be guessed.
    public var watchFailuresPerAddress = 20
    public var watchFailureWindow: Int64 = 15 * 60 * 1000
    /// Connections watching with one share link at once: a link is a bearer secret that may leak, and
    /// viewers count against no account, so each link's fan-out is bounded.
    public var viewersPerShare = 16
    /// A cache of connected users (`CacheMode.connected`): milliseconds a user stays resident after they were
    /// admitted or their last connection closed, so that a reconnect within it reads nothing (`Relay+Eviction`).
    public var cacheEvictionGrace: Int64 = 5 * 60 * 1000
    /// How much of each active walk the relay keeps in memory to show late watchers (`SessionTrail`).
    public var trail = TrailLimits()

    public init() {}
}

/// The timings of the safety extensions, in milliseconds.
public struct SafetySettings: Sendable, Equatable {
    /// How long the owner of an active session may be without a connection before observers are told.
    public var lostContactGrace: Int64 = 60_000
    public var alarmRepeatInterval: Int64 = 30_000
    public var alarmRepeatMax = 10

    public init() {}
}
