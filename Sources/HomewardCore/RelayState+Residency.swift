import HomewardProtocol

/// A cache that holds only some users' part of the state (`CacheMode.connected`).
///
/// The invariant: for a resident user, every stored row that concerns them is in the cache and current (their
/// slice, `StoredState.slice(of:)`, kept up to date as a whole cache is). What the cache holds about anyone else
/// may be partial (the other side of a resident's relation, an entity with a deadline, a remote notice) and no
/// rule reads it as complete: before a rule runs, the relay admits the slices of the users it reads
/// (`usersNeeded`).
///
/// How to call the `usersNeeded` functions: admit what one returns that is not resident, then call it again, until
/// it returns only residents. A rule's needs may depend on what the cache holds about its actor (which session an
/// id names, who their friends are): the first call, made with the actor not yet resident, names the actor; the
/// second, with the actor resident, names everything else, and the third returns nothing new. What the functions
/// read of users not resident is only used to name more users (an active session or alarm, loaded at start, names
/// its owner and invitees), never to decide.
///
/// What is needed, and why (the reads of the rules, `RelayState+*.swift`):
/// - every user a request names: `requireUser` and `profile` read their row, which only a resident's slice
///   brings for sure ("no profile" is "no such user" only for a resident);
/// - the users a reply or an event shows the profile of (friends and requests in `friend.list`, blocked users,
///   the owners of sessions and meeting points listed);
/// - every user an outcome writes an entity of (`writeScope`: its owner, both sides of a relation), so that the
///   cache holds the whole entity and the store's check knows their version;
/// - every user an event may be pushed to (`PushPlanner`: alarms to all recipients; invitations, lost contact and
///   friend requests to the offline), since the planner reads their subscriptions and tokens.
/// `friend.list` needs every friend resident: their profiles are shown (the presence table holds their last-seen
/// times and whether they are online, not the cache).
extension RelayState {
    /// A cache of connected users as it starts: `active` (`StoredState.active()`, what `RelayStore.loadActive`
    /// reads: the entities with deadlines, without their users' rows) indexed, and nobody resident yet.
    public init(connected active: StoredState, makeID: @escaping @Sendable (_ prefix: String) -> String = RandomID.make) {
        self.init(active, makeID: makeID)
        resident = []
    }

    /// Whether `username`'s whole part is in the cache (always, for a whole cache).
    public func isResident(_ username: String) -> Bool { resident?.contains(username) ?? true }

    /// The users whose whole part deciding `request` by `actor` reads (see the calling contract above).
    public func usersNeeded(for request: Request, by actor: String) -> Set<String> {
        var users: Set<String> = [actor]
        guard isResident(actor) else { return users }
        switch request {
        case .friendRequest(let other), .friendAccept(let other), .friendDecline(let other), .friendRemove(let other),
             .userBlock(let other), .userUnblock(let other), .friendLocation(let other), .friendTrail(let other):
            users.insert(other)
        case .msgSend(let to, _): users.insert(to)
        case .friendList:
            users.formUnion(friends[actor] ?? [])
            users.formUnion(incoming[actor] ?? [])
            users.formUnion(outgoing[actor] ?? [])
        case .userBlocks: users.formUnion(blocked[actor] ?? [])
        case .sessionStart(let options): users.formUnion(options.invite ?? friends(of: actor))
        case .sessionInvite(let id, let invite):
            users.formUnion(invite)
            users.formUnion(participants(ofSession: id))
        case .sessionCheckin(let id, _), .sessionAccept(let id), .sessionDecline(let id), .sessionLeave(let id),
             .sessionEnd(let id), .shareCreate(let id, _):
            users.formUnion(participants(ofSession: id))
        case .sessionList:
            users.formUnion((sessionsByInvitee[actor] ?? []).compactMap { sessions[$0]?.owner })
        case .alarmRaise(let raise):
            users.formUnion((try? alarmRecipients(actor, to: raise.to)) ?? raise.to ?? [])
        case .alarmAck(let id), .alarmCancel(let id, _):
            if let alarm = alarms[id] { users.formUnion([alarm.owner] + alarm.recipients) }
        case .alarmContacts(let usernames): users.formUnion(usernames ?? [])
        case .shareAlways(let with): users.formUnion(with ?? [])
        case .locationPause(let from, _), .locationResume(let from): if let from { users.insert(from) }
        case .meetPropose(let proposal): users.formUnion(proposal.to)
        case .meetAccept(let id), .meetDecline(let id), .meetCancel(let id):
            if let owner = meetings[id]?.owner { users.insert(owner) }
        case .meetList:
            users.formUnion((meetingsByUser[actor] ?? []).compactMap { meetings[$0]?.owner })
        case .msgRead(let id): if let from = messages[id]?.from { users.insert(from) }
        case .register(let username, _, _), .login(let username, _): users.insert(username)
        case .logout, .logoutAll, .authSessions, .authRevoke, .userSearch, .pushSubscribe, .pushUnsubscribe, .pushList,
             .shareList, .shareRevoke, .position, .ping, .hello, .watch:
            // Their own rows only: tokens, subscriptions, share links of their own session (a link of someone
            // else's is `forbidden` whoever owns it: every active link is loaded at start).
            break
        }
        return users
    }

    /// The users whose whole part a sign-in's work reads (`backlog(for:)`, `markAlarmsDelivered`,
    /// `deliverQueued`, `ownerCameBack`): the requesters shown, the owners of the sessions, alarms and meeting
    /// points waiting (their profiles are shown, their entities written), the senders of the messages delivered.
    public func usersNeeded(forSignInOf username: String) -> Set<String> {
        var users: Set<String> = [username]
        guard isResident(username) else { return users }
        users.formUnion(incoming[username] ?? [])
        users.formUnion((sessionsByInvitee[username] ?? []).compactMap { sessions[$0]?.owner })
        users.formUnion((alarmsByRecipient[username] ?? []).compactMap { alarms[$0]?.owner })
        users.formUnion((meetingsByUser[username] ?? []).compactMap { meetings[$0]?.owner })
        users.formUnion((messagesByRecipient[username] ?? []).compactMap { messages[$0]?.from })
        return users
    }

    /// The users whose whole part a `watch` with the link of `tokenHash` reads (`watch`, `viewerBacklog`): the
    /// owner of its session (their profile, their pauses). Every live link is loaded at start (a cache hearing only the
    /// users it follows looks a link it does not hold up in the store first: `Relay.admitLinkOwner`).
    public func usersNeeded(forWatching tokenHash: String) -> Set<String> {
        guard let id = sharesByHash[tokenHash], let share = shares[id] else { return [] }
        return [sessions[share.sessionId]?.owner ?? share.owner]
    }

    /// The users whose whole part the work due at `now` in `shards` reads (`fireDue`), of all owners or of `owners`
    /// (one batch of a storm): the owner of everything due (their entities are written), and for a session the users
    /// its alarm or `session.lost` may go to (observers, contacts or friends, each pushed to), for an alarm its
    /// recipients. Every entity with a deadline is loaded at start, so the owners are known; the rest once the owners
    /// are resident.
    public func usersNeeded(forDueAt now: Int64, shards: TimerShards = .all, owners: Set<String>? = nil) -> Set<String> {
        let due = DueOwners(shards: shards, only: owners)
        var users = Set<String>()
        forEachDue(at: now, in: due) { owner in users.insert(owner) } session: { session, checkInMissed in
            users.insert(session.owner)
            users.formUnion(session.invitees)
            if checkInMissed, isResident(session.owner) {
                users.formUnion(contacts[session.owner] ?? [])
                if session.observers.isEmpty { users.formUnion(friends[session.owner] ?? []) }
            }
        } alarm: { alarm in
            users.insert(alarm.owner)
            users.formUnion(alarm.recipients)
        }
        return users
    }

    /// What `fireDue` fires at `now` for `due`: the owners of links, pauses and meeting points that end, the sessions
    /// that expire, miss a check-in (`checkInMissed`) or lose contact, the alarms that repeat.
    private func forEachDue(at now: Int64, in due: DueOwners, owner: (String) -> Void,
                            session visit: (FollowSession, _ checkInMissed: Bool) -> Void, alarm repeating: (Alarm) -> Void) {
        let candidates = dueCandidates(due)
        for share in candidates.shares where share.expiresAt <= now && due.owns(share.owner) { owner(share.owner) }
        for name in candidates.pauseOwners where due.owns(name) && (pauses[name] ?? [:]).values.contains(where: { ($0.until ?? .max) <= now }) {
            owner(name)
        }
        for meeting in candidates.meetings where meeting.expiresAt <= now && due.owns(meeting.owner) { owner(meeting.owner) }
        for session in candidates.sessions where due.owns(session.owner) {
            let expires = session.expiresAt.map { $0 <= now } ?? false
            let checkInMissed = session.checkInBy.map { $0 <= now } ?? false
            let lost = session.lostSince == nil && offlineOwners[session.owner].map { $0 + safety.lostContactGrace <= now } ?? false
            guard expires || checkInMissed || lost else { continue }
            visit(session, checkInMissed)
        }
        for alarm in candidates.alarms where due.owns(alarm.owner) && (alarm.nextRepeatAt.map { $0 <= now } ?? false) {
            repeating(alarm)
        }
    }

    /// Makes `users` resident: their part of the cache is replaced by `slice` (`replaceSlice`), read from the
    /// store in one snapshot. Does nothing to which users are resident in a whole cache.
    /// Whether `owner` owns something that names a resident other than them: a session a resident is invited to, an alarm
    /// they receive, a meeting point they are invited to, a list of standing shares or a pause that names them (what
    /// `StoredState.ownersNamed(besides:)` finds in a slice).
    func ownsSomethingNamingAResident(_ owner: String) -> Bool {
        guard let resident else { return false }
        func names(_ users: some Sequence<String>) -> Bool { users.contains { $0 != owner && resident.contains($0) } }
        if let id = sessionByOwner[owner], let session = sessions[id], names(session.invitees) { return true }
        if (alarmsByOwner[owner] ?? []).contains(where: { alarms[$0].map { names($0.recipients) } ?? false }) { return true }
        if (meetingsByUser[owner] ?? []).contains(where: { id in
            meetings[id].map { $0.owner == owner && names($0.invitees.map(\.username)) } ?? false
        }) { return true }
        return names(standing[owner] ?? []) || names(pauses[owner]?.keys ?? [:].keys)
    }

    /// Friend request notices about them are kept (less pairs now friends), as a whole cache keeps them: one about a
    /// user evicted and admitted again was noted by a decision that is stored (`evict`).
    public mutating func admit(_ slice: StoredState, of users: Set<String>) {
        replaceSlice(of: users, with: slice, afterRemoteChange: true)
        resident?.formUnion(users)
    }

    /// The owner and everyone invited (in any state) to the active session `id`, if there is one.
    private func participants(ofSession id: String) -> [String] {
        guard let session = sessions[id] else { return [] }
        return [session.owner] + session.invitees
    }
}
