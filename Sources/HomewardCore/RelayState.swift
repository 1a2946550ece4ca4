import HomewardProtocol

/// Everything durable the relay knows, held in memory, and the rules that change it.
///
/// A value type with no I/O: every operation takes the acting user and the time, checks the
/// contract's rules and returns an `Outcome`. The `Relay` persists the outcome's changes before
/// anyone hears of them, so this type can be tested with nothing but values.
public struct RelayState: Sendable {
    public internal(set) var users: [String: UserProfile] = [:]
    package internal(set) var friends: [String: Set<String>] = [:]
    /// Pending friend requests, keyed by recipient and by requester.
    package internal(set) var incoming: [String: Set<String>] = [:]
    package internal(set) var outgoing: [String: Set<String>] = [:]
    package internal(set) var contacts: [String: [String]] = [:]
    /// Who each user has blocked. A request from a blocked user is kept only on its sender's side
    /// (`outgoing`), so the sender sees what an ignored request looks like and the blocker sees nothing.
    package internal(set) var blocked: [String: Set<String>] = [:]
    /// Recent `user.search` requests per user (counted like failed logins: a sliding window).
    var searches = SlidingWindowLimit(limit: RelayState.searchesPerWindow, window: RelayState.searchWindow)
    /// Sign-in tokens by hash, and each user's.
    package internal(set) var tokens: [String: IssuedToken] = [:]
    package internal(set) var tokensByUser: [String: Set<String>] = [:]
    /// When each requester last made the relay push a `friend.request` event to each target.
    var requestNotices = FriendRequestNotices()
    public internal(set) var sessions: [String: FollowSession] = [:]
    package internal(set) var sessionByOwner: [String: String] = [:]
    package internal(set) var sessionsByInvitee: [String: Set<String>] = [:]
    public internal(set) var alarms: [String: Alarm] = [:]
    package internal(set) var alarmsByOwner: [String: Set<String>] = [:]
    package internal(set) var alarmsByRecipient: [String: Set<String>] = [:]
    /// Web Push subscriptions by id, and each user's ids in the order they subscribed.
    package internal(set) var pushSubscriptions: [String: PushSubscription] = [:]
    package internal(set) var pushByUser: [String: [String]] = [:]
    /// Live share links by id, by their token's hash and by session.
    package internal(set) var shares: [String: ShareLink] = [:]
    package internal(set) var sharesByHash: [String: String] = [:]
    package internal(set) var sharesBySession: [String: Set<String>] = [:]
    /// Friends' map: who receives each owner's positions at all times (in the order chosen), each owner's
    /// pauses by `LocationPause.key`, meeting points (by id, and by proposer and invitee), unread messages.
    package internal(set) var standing: [String: [String]] = [:]
    package internal(set) var pauses: [String: [String: LocationPause]] = [:]
    package internal(set) var meetings: [String: MeetingPoint] = [:]
    package internal(set) var meetingsByUser: [String: Set<String>] = [:]
    package internal(set) var messages: [String: MessageInfo] = [:]
    package internal(set) var messagesByRecipient: [String: Set<String>] = [:]
    /// Messages sent per user in the last minute (a sliding window, like searches).
    var messageSends = SlidingWindowLimit(limit: FriendsMapLimits.messagesPerMinute, window: FriendsMapLimits.messageWindow)

    public var safety = SafetySettings() {
        // The lost-contact deadlines count from it.
        didSet { if safety.lostContactGrace != oldValue.lostContactGrace { noteAllDeadlines() } }
    }
    /// Share-link lifetimes and the viewer page's address (configuration, not stored).
    public var shareSettings = ShareSettings()
    /// Sessions and alarms that ended lately, kept across reloads: a later save of one is ignored, as the
    /// store ignores it (see `RecentlyEnded`).
    var endedSessions = RecentlyEnded()
    var endedAlarms = RecentlyEnded()
    /// Who owned what the decisions in flight removed, on a relay sharing its store (nil: not recorded).
    var removedOwners: RemovedOwners?
    /// Owners of active sessions without a connection, and since when (not stored: after a
    /// restart every owner counts as offline from the moment the relay started).
    package internal(set) var offlineOwners: [String: Int64] = [:]

    /// Each owner's next deadline, in due order per timer shard (`RelayState+Deadlines`).
    var deadlines = DeadlineIndex()

    /// The users whose whole part is cached (`RelayState+Residency`); nil: every user's (`CacheMode.whole`).
    package internal(set) var resident: Set<String>?

    /// Makes identifiers for new sessions and alarms.
    var makeID: @Sendable (_ prefix: String) -> String

    public init(makeID: @escaping @Sendable (_ prefix: String) -> String = RandomID.make) {
        self.makeID = makeID
    }

    public init(_ stored: StoredState, makeID: @escaping @Sendable (_ prefix: String) -> String = RandomID.make) {
        self.init(makeID: makeID)
        // A load is the slice of everyone, indexed into an empty cache.
        index(stored, of: [])
    }

    /// `a` and `b` became friends on another relay (a `friend.added` in its notice).
    mutating func forgetRequestNotices(_ a: String, _ b: String) {
        requestNotices.forget(a, b)
    }

    /// The same state with its durable part replaced by `stored`, as after a storage failure: what is
    /// not stored (the safety settings, which owners are offline and since when, how identifiers are
    /// made) is kept, so one failed write does not reset the relay's configuration or its timers.
    /// With `afterRemoteChange` (another relay committed something; nothing failed here) the friend request
    /// notices are kept as well.
    public func reloaded(from stored: StoredState, afterRemoteChange: Bool = false) -> RelayState {
        var fresh = RelayState(stored, makeID: makeID)
        fresh.safety = safety
        fresh.shareSettings = shareSettings
        fresh.offlineOwners = offlineOwners.filter { fresh.sessionByOwner[$0.key] != nil }
        for owner in fresh.offlineOwners.keys { fresh.noteDeadlines(of: owner) }
        // Not stored either: a failed write must not reset who may search. (Friend request notices do
        // start afresh: the failed operation may itself have been a request that was never stored.)
        fresh.searches = searches
        fresh.messageSends = messageSends
        // What the reload shows ended (it was active here and is not in the store any more) counts as
        // ended too, as what this relay heard end did.
        fresh.endedSessions = endedSessions
        for id in sessions.keys where fresh.sessions[id] == nil { fresh.endedSessions.insert(id) }
        fresh.endedAlarms = endedAlarms
        fresh.removedOwners = removedOwners
        // A cache of connected users reads back the slices of its residents (and what it loads at start): they
        // stay resident.
        fresh.resident = resident
        for id in alarms.keys where fresh.alarms[id] == nil { fresh.endedAlarms.insert(id) }
        if afterRemoteChange {
            // Another relay's accept clears a pair as this relay's own would (see `FriendRequestNotices`).
            var notices = requestNotices
            notices.filter { !fresh.areFriends($0, $1) }
            fresh.requestNotices = notices
        }
        return fresh
    }

    // MARK: Queries

    /// Users whose positions someone may receive: owners of active sessions, of active alarms and of
    /// standing shares.
    public var owners: Set<String> {
        Set(sessionByOwner.keys).union(alarmsByOwner.filter { !$0.value.isEmpty }.keys).union(standing.keys)
    }

    /// Whether `username` owns an active session, alarm or standing share (one of `owners`).
    public func isOwner(_ username: String) -> Bool {
        sessionByOwner[username] != nil || !(alarmsByOwner[username]?.isEmpty ?? true) || standing[username] != nil
    }

    public func profile(_ username: String) -> UserProfile {
        users[username] ?? UserProfile(username: username, name: username)
    }

    public func friends(of username: String) -> [String] { (friends[username] ?? []).sorted() }

    public func areFriends(_ a: String, _ b: String) -> Bool { friends[a]?.contains(b) ?? false }

    public func hasBlocked(_ blocker: String, _ other: String) -> Bool { blocked[blocker]?.contains(other) ?? false }

    /// Everyone who receives `username`'s positions: observers of their active session, its share-link
    /// viewers and the friends they share with at all times, less whom a pause hides from; and, whatever
    /// the pauses, recipients of their active alarms. `ignoringPauses`: whom a position of theirs that
    /// another relay restricted may reach (`PositionRestriction`), also while this cache still has a pause.
    public func audience(of username: String, ignoringPauses: Bool = false) -> Set<String> {
        var audience = sharingAudience(of: username, ignoringPauses: ignoringPauses)
        for id in alarmsByOwner[username] ?? [] {
            if let alarm = alarms[id] { audience.formUnion(alarm.recipients) }
        }
        return audience
    }

    public func ownSession(of username: String) -> FollowSession? {
        sessionByOwner[username].flatMap { sessions[$0] }
    }

    // MARK: Indexes

    mutating func link(_ a: String, _ b: String) {
        friends[a, default: []].insert(b)
        friends[b, default: []].insert(a)
    }

    mutating func index(_ session: FollowSession) {
        sessions[session.id] = session
        sessionByOwner[session.owner] = session.id
        for invitee in session.invitees { sessionsByInvitee[invitee, default: []].insert(session.id) }
        noteDeadlines(of: session.owner)
    }

    mutating func unindex(session id: String) {
        guard let session = sessions.removeValue(forKey: id) else { return }
        noteRemoved(.session(id), session.owner)
        noteRemoved(.session(id), members: session.invitees)
        if sessionByOwner[session.owner] == id { sessionByOwner[session.owner] = nil }
        for invitee in session.invitees { sessionsByInvitee[invitee]?.remove(id) }
    }

    mutating func index(_ alarm: Alarm) {
        alarms[alarm.id] = alarm
        alarmsByOwner[alarm.owner, default: []].insert(alarm.id)
        for recipient in alarm.recipients { alarmsByRecipient[recipient, default: []].insert(alarm.id) }
        noteDeadlines(of: alarm.owner)
    }

    mutating func unindex(alarm id: String) {
        guard let alarm = alarms.removeValue(forKey: id) else { return }
        noteRemoved(.alarm(id), alarm.owner)
        noteRemoved(.alarm(id), members: alarm.recipients)
        alarmsByOwner[alarm.owner]?.remove(id)
        for recipient in alarm.recipients { alarmsByRecipient[recipient]?.remove(id) }
    }

    func requireUser(_ username: String) throws(RelayError) {
        guard users[username] != nil else { throw .notFound("no user named \(username)") }
    }
}
