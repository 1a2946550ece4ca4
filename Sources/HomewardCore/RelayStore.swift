import HomewardProtocol

/// Durable storage behind the relay. Every call is asynchronous, so that a networked store can sit
/// behind it without holding a thread per call, never on a network event loop. A relay alone has at
/// most one `apply` under way (a batch of several operations' changes, `WriteJournal`) and decides
/// meanwhile; a relay on a shared bus starts its next operation only once the previous one is stored.
public protocol RelayStore: Sendable {
    /// Everything the relay keeps in memory, read at start-up and again after a failed write.
    func load() async throws -> StoredState
    /// Applies the changes of one operation atomically; when this returns they are durable.
    /// When it throws, none of them is applied.
    func apply(_ changes: [StoreChange]) async throws
    func passwordHash(of username: String) async throws -> String?
    func username(forTokenHash hash: String) async throws -> String?
    /// How many writes other relays must hear of the store has counted so far, or nil when the store does not
    /// count them (one relay alone). A relay whose cache was loaded at a smaller count is behind the store. A
    /// load never returns a count its data lacks; the count read here may name a write whose commit is under
    /// way, and a load then waits for that commit.
    func changeCount() async throws -> Int64?
    /// `apply`, returning the change count this write took when it counted one (see `changeCount`).
    /// A store shared by several relays refuses, with `StoreCacheBehind` and nothing applied, a counted write
    /// whose relay's cache was not loaded at the store's current count (`expecting`, the cache's count; nil
    /// checks nothing): that cache may lack another relay's write, and a session, alarm or meeting point
    /// written whole from it would undo that write. A store that counts nothing ignores `expecting`.
    func applyCounting(_ changes: [StoreChange], expecting: Int64?) async throws -> Int64?
    /// The secret `name` that every relay sharing this store must use (the VAPID key), or nil when the
    /// store is one relay's own and keeps no such secrets (the relay keeps them in its data directory).
    /// Given a `candidate`, a store without a value stores it first, once: relays starting together all get
    /// the value that was stored first. Without one, it only reads.
    func sharedSecret(_ name: String, storingIfAbsent candidate: String?) async throws -> String?
}

extension RelayStore {
    public func changeCount() async throws -> Int64? { nil }

    /// `apply`, returning the change count the write itself took (nil when it took none): a store alone
    /// behind one relay checks nothing.
    public func applyCounting(_ changes: [StoreChange], expecting: Int64?) async throws -> Int64? {
        try await apply(changes)
        return nil
    }

    /// One relay's own store shares no secrets.
    public func sharedSecret(_ name: String, storingIfAbsent candidate: String?) async throws -> String? { nil }
}

/// A write refused because the writing relay's cache is behind the store: another relay committed a
/// counted write since the cache was loaded. Nothing was applied; the relay reloads and decides again.
public struct StoreCacheBehind: Error, Sendable, Equatable, CustomStringConvertible {
    /// The count the writing relay's cache was loaded at, and the store's.
    public let expected: Int64?
    public let current: Int64

    public init(expected: Int64?, current: Int64) {
        self.expected = expected
        self.current = current
    }

    public var description: String {
        "the relay's cache (change count \(expected.map(String.init) ?? "none")) is behind the store (\(current))"
    }
}

/// What a store hands back at start-up.
public struct StoredState: Sendable {
    public var users: [UserProfile] = []
    public var lastSeen: [String: Int64] = [:]
    public var tokens: [IssuedToken] = []
    public var friendships: [(String, String)] = []
    public var friendRequests: [(from: String, to: String)] = []
    public var blocks: [(blocker: String, blocked: String)] = []
    public var alarmContacts: [String: [String]] = [:]
    public var sessions: [FollowSession] = []
    public var alarms: [Alarm] = []
    public var pushSubscriptions: [PushSubscription] = []
    /// Share links not removed yet (some may have expired while the relay was down).
    public var shares: [ShareLink] = []
    /// Friends' map: standing shares by owner, pauses, meeting points, unread messages.
    public var standingShares: [String: [String]] = [:]
    public var pauses: [LocationPause] = []
    public var meetings: [MeetingPoint] = []
    public var messages: [MessageInfo] = []
    /// The store's `changeCount()` when this was read (nil when it does not count).
    public var changeCount: Int64?

    public init() {}
}
