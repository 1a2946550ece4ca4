import HomewardProtocol

/// Durable storage behind the relay. Every call is asynchronous, so that a networked store can sit
/// behind it without holding a thread per call, never on a network event loop. A relay alone has at
/// most one `apply` under way (a batch of several operations' changes, `WriteJournal`) and decides
/// meanwhile; a relay on a shared bus starts its next operation only once the previous one is stored
/// (`applyChecked`).
public protocol RelayStore: Sendable {
    /// Everything the relay keeps in memory, read at start-up and again after a failed write.
    func load() async throws -> StoredState
    /// What the store holds about `users` (a slice, `StoredState.slice(of:)`: every row that concerns any of
    /// them) and those users' write versions, read in one snapshot: what a cache replaces when only those users'
    /// part of it may be stale (`RelayState.replaceSlice`), at the cost of their rows instead of everyone's.
    func loadSlice(of users: Set<String>) async throws -> StoredState
    /// What a relay caching only its users' part (`CacheMode.connected`) loads at start: every entity that carries a
    /// deadline or is under way (`StoredState.active()`), none of the users' own rows. By default, selected from a whole load.
    func loadActive() async throws -> StoredState
    /// The profiles of up to `limit` users whose username starts with `prefix`, in username order: `user.search`
    /// on a relay that does not cache every user. A prefix no stored username can start with (empty, not of the
    /// lowercase characters usernames are made of, longer than a username: `UsernamePrefix`) finds nobody, and so
    /// does a `limit` below 1; the relay's rule normalises the query first.
    func searchUsers(prefix: String, limit: Int) async throws -> [UserProfile]
    /// Applies the changes of one operation atomically; when this returns they are durable.
    /// When it throws, none of them is applied.
    func apply(_ changes: [StoreChange]) async throws
    func passwordHash(of username: String) async throws -> String?
    func username(forTokenHash hash: String) async throws -> String?
    /// The users of those of `hashes` the store holds as tokens (hash to username), read together: the owners of
    /// several queued `hello`s, admitted with one read (`Relay.admitSignIns`).
    func usernames(forTokenHashes hashes: [String]) async throws -> [String: String]
    /// The owner of the share link whose token has `hash`, if the store holds it: `watch` on a cache that does not hear
    /// every commit (`--change-notices per-user`), for a link created on another relay (`Relay.admitLinkOwner`).
    func shareOwner(forTokenHash hash: String) async throws -> String?
    /// How many writes other relays must hear of the store has counted so far, or nil when the store does not
    /// count them (one relay alone). A relay whose cache was loaded at a smaller count is behind the store. A
    /// load never returns a count its data lacks; the count read here may name a write whose commit is under
    /// way, and a load then waits for that commit.
    /// The write versions the store holds for `users` (0 for a user no checked write concerned yet), or nil when
    /// the store keeps none (one relay alone). A relay whose cache holds a smaller version for one of them lacks
    /// another relay's write about that user (see `applyChecked`).
    func versions(of users: [String]) async throws -> UserVersions?
    /// `apply`, for a relay whose cache may lack other relays' writes (relays sharing one store). `scope` names
    /// the users the write concerns (`RelayState.writeScope`) with the version the writing relay's cache holds
    /// for each. A store shared by several relays refuses, with `StoreCacheBehind` and nothing applied, a write
    /// when any of them has another version in the store: the cache lacks another relay's write about that user,
    /// and a session, alarm or meeting point written whole from it would undo that write. Otherwise it applies
    /// the changes and moves each of those users' versions on by one, in the same transaction, and returns the
    /// new versions. Writes about other users are not checked against, and do not wait for, each other. A nil
    /// or empty `scope` checks nothing; a store that keeps no versions ignores it and returns nil.
    func applyChecked(_ changes: [StoreChange], scope: UserVersions?) async throws -> UserVersions?
    /// `applyChecked` for a caller that does not wait: `completion` gets the result once, on any thread. The relay
    /// commits its batches through this; a store that runs its own queue (SQLite's writer) calls back from there, so
    /// that a batch's end is one thread wake-up from the relay, not one per hop through the concurrency pool. By
    /// default it runs `applyChecked` in a task.
    func applyChecked(_ changes: [StoreChange], scope: UserVersions?,
                      completion: @escaping @Sendable (Result<UserVersions?, any Error>) -> Void)
    /// The secret `name` that every relay sharing this store must use (the VAPID key), or nil when the
    /// store is one relay's own and keeps no such secrets (the relay keeps them in its data directory).
    /// Given a `candidate`, a store without a value stores it first, once: relays starting together all get
    /// the value that was stored first. Without one, it only reads.
    func sharedSecret(_ name: String, storingIfAbsent candidate: String?) async throws -> String?
}

extension RelayStore {
    public func versions(of users: [String]) async throws -> UserVersions? { nil }

    /// A store that reads no slice of its own selects it from a whole load.
    public func loadSlice(of users: Set<String>) async throws -> StoredState {
        try await load().slice(of: users)
    }

    /// A store without a read of its own for several looks each up (`username(forTokenHash:)`).
    public func usernames(forTokenHashes hashes: [String]) async throws -> [String: String] {
        var found: [String: String] = [:]
        for hash in hashes { found[hash] = try await username(forTokenHash: hash) }
        return found
    }

    /// A store without a lookup of its own finds the link in a whole load.
    public func shareOwner(forTokenHash hash: String) async throws -> String? {
        try await load().shares.first { $0.tokenHash == hash }?.owner
    }

    /// A store that reads nothing less selects from a whole load.
    public func loadActive() async throws -> StoredState {
        try await load().active()
    }

    /// A store that reads nothing less filters a whole load, with the stores' guard (`UsernamePrefix`): a prefix no
    /// username can start with finds nobody.
    public func searchUsers(prefix: String, limit: Int) async throws -> [UserProfile] {
        guard let range = UsernamePrefix(prefix), limit > 0 else { return [] }
        return Array(try await load().users.filter { range.matches($0.username) }.sorted { $0.username < $1.username }.prefix(limit))
    }

    /// `apply`: a store alone behind one relay checks nothing and keeps no versions.
    public func applyChecked(_ changes: [StoreChange], scope: UserVersions?) async throws -> UserVersions? {
        try await apply(changes)
        return nil
    }

    public func applyChecked(_ changes: [StoreChange], scope: UserVersions?,
                             completion: @escaping @Sendable (Result<UserVersions?, any Error>) -> Void) {
        Task {
            do {
                completion(.success(try await applyChecked(changes, scope: scope)))
            } catch {
                completion(.failure(error))
            }
        }
    }

    /// One relay's own store shares no secrets.
    public func sharedSecret(_ name: String, storingIfAbsent candidate: String?) async throws -> String? { nil }
}

/// How many checked writes concerned each user (`RelayStore.applyChecked`); a user missing is at 0.
public typealias UserVersions = [String: Int64]

/// A write refused because the writing relay's cache is behind the store for one of the users it concerns:
/// another relay committed a write about them that this cache has not applied. Nothing was applied; the
/// relay catches up and decides again.
public struct StoreCacheBehind: Error, Sendable, Equatable, CustomStringConvertible {
    /// The versions the writing relay's cache holds for the write's users, and the store's for the same users.
    public let expected: UserVersions
    public let current: UserVersions

    public init(expected: UserVersions, current: UserVersions) {
        self.expected = expected
        self.current = current
    }

    public var description: String {
        let behind = current.keys.sorted().filter { current[$0] != expected[$0] }
            .map { "\($0): \(expected[$0] ?? 0) < \(current[$0] ?? 0)" }
        return "the relay's cache is behind the store for \(behind.joined(separator: ", "))"
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
    /// Every user's write version when this was read, users at 0 left out (nil when the store keeps none).
    public var versions: UserVersions?

    public init() {}
}
