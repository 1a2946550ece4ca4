import HomewardProtocol
import Logging

/// A relay that caches only its connected users' part (`CacheMode.connected`): it starts from what the timers
/// fire on (`RelayStore.loadActive`) with nobody resident, and before any rule runs it admits the users that rule
/// reads and that are not resident yet (`admit`): one slice read each time (`RelayStore.loadSlice`, one indexed
/// query for all of them), after which they stay resident and are kept current like a whole cache (own decisions,
/// other relays' notices, read-backs). A whole cache (`CacheMode.whole`) admits nothing: every user is resident.
///
/// The cost: the first request that names a user not yet resident (a sign-in, a friend request to someone not
/// connected, a timer of an owner not connected) waits for one slice read inside its command, and the commands
/// behind it in the mailbox wait with it; once resident, a user costs nothing more. An admission first waits for
/// the writes decided before it (`writesSettled`): a slice replaces what the cache holds about its users, and a
/// decision on its way to the store about one of them would be dropped from the cache.
extension Relay {
    /// Admits what `needs` names and is not resident, asking again until it names only residents: a rule's needs may
    /// depend on what the cache holds about its actor (which session an id names), so the first round admits the
    /// actor and the next what the actor's part names. Bounded, as every round admits someone new.
    func admitNeeded(_ needs: () -> Set<String>) async throws(RelayError) {
        guard state.resident != nil else { return }
        for _ in 0..<Self.admissionRounds {
            let missing = needs().filter { !state.isResident($0) }
            guard !missing.isEmpty else { return }
            try await admit(missing)
        }
    }

    /// Rounds of `admitNeeded`: the actor, then what their part names, then what those parts name (a session's
    /// invitees named by its owner's part); the rules' needs go no deeper.
    static let admissionRounds = 4

    /// Makes `users` resident: reads their slice (every row that concerns them, with their versions, in one snapshot)
    /// and puts it in place of what the cache holds about them (`RelayState.admit`), with their versions given to
    /// the write path as `reloadSlices` gives them. Nothing is read while memory counts as unstored (only alarm
    /// operations run then, on what the cache holds).
    func admit(_ users: Set<String>) async throws(RelayError) {
        guard state.resident != nil, !writes.unstored else { return }
        guard !users.allSatisfy(state.isResident) else { return }
        // A decision on its way to the store may concern them (the other side of a resident's relation): stored
        // first, so that the slice holds it.
        try await writesSettled()
        // Followed first, confirmed: a commit about them after the slice's snapshot sends its notice here (`Relay+Following`).
        await followBeforeReading(users)
        let slice: StoredState
        do { slice = try await store.loadSlice(of: users) } catch {
            logger.warning("could not read users' part of the store", metadata: ["users": "\(users.count)", "error": "\(error)"])
            throw .storage("\(error)")
        }
        let before = ownersConcerning(users)
        state.admit(slice, of: users)
        tookVersions(of: slice, readFor: users)
        // Last-seen times the presence table does not have yet (it keeps newer ones: a user who left here).
        presence.seedLastSeen(slice.lastSeen.filter { user, time in (presence.lastSeen(user) ?? .min) < time })
        counters.residentUsers.record(state.resident?.count ?? 0)
        noteIdle(users, at: clock())
        syncPresence(owners: before.union(ownersConcerning(users)).union(Self.owners(in: slice)))
        counters.alarmsPending.record(state.alarms.count)
        // Only what the slice brought can be due sooner than the timer, which points at or before every deadline the
        // cache held: the slice's deadlines are read, not every one the cache holds. What it replaced or dropped can
        // only leave the timer early, and a timer that fires early finds nothing due and points itself again.
        if !timerShards.isEmpty, let next = state.nextDeadline(in: timerShards, among: slice), next < timer.deadline ?? .max {
            armTimer(at: next)
        }
        await followOwners(namedBy: slice, readFor: users)
    }

    /// The owners whose audience what the cache holds about `users` feeds: the users themselves, the owners of the
    /// sessions they are invited to and of the alarms they receive.
    private func ownersConcerning(_ users: Set<String>) -> Set<String> {
        var owners = users
        for user in users {
            for id in state.sessionsByInvitee[user] ?? [] { if let owner = state.sessions[id]?.owner { owners.insert(owner) } }
            for id in state.alarmsByRecipient[user] ?? [] { if let owner = state.alarms[id]?.owner { owners.insert(owner) } }
        }
        return owners
    }

    /// The owners of what a slice holds: sessions, alarms, lists of standing shares and pauses.
    private static func owners(in slice: StoredState) -> Set<String> {
        Set(slice.sessions.map(\.owner)).union(slice.alarms.map(\.owner)).union(slice.standingShares.keys)
            .union(slice.pauses.map(\.owner))
    }

    /// Sign-ins whose users one admission reads at most (`admitSignIns`): the one in turn and those queued behind it.
    static let signInsAdmittedTogether = 256

    /// Who a sign-in signs in: a token's holder (`hello`), or a user whose password was right (`login`).
    enum SignInSubject {
        case token(hash: String, peer: String)
        case user(String)
    }

    /// Before a sign-in: admits together the users of this sign-in and of the sign-ins queued behind it in the mailbox
    /// (`hello`s, logins whose password was right), with one read of the tokens' users the cache does not know
    /// (`usernames(forTokenHashes:)`), one slice read for them, and one for those their backlogs name
    /// (`usersNeeded(forSignInOf:)`). A storm of sign-ins then costs three reads and one wait for the writes decided
    /// before (`admit`) per batch, not per sign-in: each sign-in finds its users resident when its turn comes. It
    /// decides nothing: admitting users early changes which parts the cache holds, not what a rule decides (a resident's
    /// part is the store's, kept current). A failure here is no sign-in's: each admits what it still lacks in its turn
    /// and answers its own failure.
    func admitSignIns(startingWith first: SignInSubject) async {
        guard state.resident != nil, !writes.unstored else { return }
        // Admitted with an earlier batch: the sign-ins queued behind it are looked at by the next one that is not.
        let username: String? = switch first {
        case .token(let hash, _): state.tokens[hash]?.username
        case .user(let username): username
        }
        if let username, state.usersNeeded(forSignInOf: username).allSatisfy(state.isResident) { return }
        let queued = mailbox.withLock { $0.commands.prefix(Self.signInsAdmittedTogether - 1) }
        let now = clock()
        var users = Set<String>()
        var unknownTokens: [String] = []
        for subject in [first] + queued.compactMap(Self.signInSubject) {
            switch subject {
            case .user(let username): users.insert(username)
            case .token(let hash, let peer):
                if let token = state.tokens[hash] {
                    users.insert(token.username)
                } else if !signIns.helloFailures.isLimited(peer, now: now) {
                    // An address over its failures signs in only with a token the cache holds (`mayCheckToken`).
                    unknownTokens.append(hash)
                }
            }
        }
        if !unknownTokens.isEmpty {
            guard let owners = try? await store.usernames(forTokenHashes: unknownTokens) else { return }
            users.formUnion(owners.values)
        }
        try? await admitNeeded {
            users.reduce(into: Set<String>()) { needed, user in needed.formUnion(state.usersNeeded(forSignInOf: user)) }
        }
    }

    /// The sign-in a queued command makes, if it makes one.
    private static func signInSubject(of command: Command) -> SignInSubject? {
        switch command {
        case .serve(.hello(let token), _, let peer, _, _): .token(hash: Token.hash(token), peer: peer)
        case .passwordChecked(.verified(let username, valid: true), _, _, _, _): .user(username)
        default: nil
        }
    }

    /// A `hello` with a token whose user is not resident: its user is read from the store (`username(forTokenHash:)`)
    /// and admitted. A token the store does not know is left to `useToken` to refuse.
    func admitOwner(ofToken hash: String) async throws(RelayError) {
        guard state.resident != nil, state.tokens[hash] == nil, !writes.unstored else { return }
        let owner: String?
        do { owner = try await store.username(forTokenHash: hash) } catch { throw .storage("\(error)") }
        if let owner { try await admit([owner]) }
    }

    /// `user.search`: from the cache's users when it holds every user, else among the store's matches
    /// (`RelayStore.searchUsers`), read only when the search is not over its rate limit.
    func searchUsers(_ user: String, _ query: String, now: Int64) async throws(RelayError) -> Outcome {
        guard state.resident != nil else { return try state.searchUsers(user, query, now: now) }
        var candidates: [UserProfile] = []
        if let prefix = RelayState.searchPrefix(of: query), !state.searches.isLimited(user, now: now) {
            do { candidates = try await store.searchUsers(prefix: prefix, limit: RelayState.searchLimit) } catch {
                throw .storage("\(error)")
            }
        }
        return try state.searchUsers(user, query, now: now, among: candidates)
    }

    /// What a whole read-back reads. A cache of connected users reads what it loads at start and its residents'
    /// slices, not everyone's rows (`readBack(residents:)`).
    nonisolated func readBack(residents: Set<String>?) async throws -> StoredState {
        guard let residents else { return try await store.load() }
        return try await Self.readBack(residents: residents, from: store)
    }

    /// Two reads, each one snapshot: what timers fire on (`loadActive`), then the residents' slices with their
    /// versions. Why two are enough: everything about a resident, and their version, comes from the second read
    /// (of the first, only what concerns no resident is kept), so the invariant (a resident's part is current, at
    /// their version) holds as after one read; what concerns nobody resident may be a moment older, and no rule
    /// reads that as complete (the users it reads are admitted first, which reads it again). Both begin after every
    /// notice received before the read-back, so the read-back covers those notices as a whole load does.
    static func readBack(residents: Set<String>, from store: any RelayStore) async throws -> StoredState {
        let active = try await store.loadActive()
        // Also with no residents: a store that keeps versions answers with an empty set of them, not none.
        var read = try await store.loadSlice(of: residents)
        read.addActive(active, concerningNone: residents)
        return read
    }

    /// Logged once the relay has loaded what it starts with.
    func logStart(_ stored: StoredState, in mode: CacheMode, tookMillis: Int64) {
        logger.notice("cache loaded", metadata: [
            "cache": "\(mode.rawValue)", "users": "\(stored.users.count)", "sessions": "\(stored.sessions.count)",
            "alarms": "\(stored.alarms.count)", "share_links": "\(stored.shares.count)", "pauses": "\(stored.pauses.count)",
            "meeting_points": "\(stored.meetings.count)", "ms": "\(tookMillis)",
        ])
    }
}

private extension StoredState {
    /// Adds the entities of `active` that concern none of `residents` (owned by, or naming, none of them): what
    /// concerns a resident is in their slice, read after `active`, and one gone since must stay gone.
    mutating func addActive(_ active: StoredState, concerningNone residents: Set<String>) {
        func concerns(_ names: some Sequence<String>) -> Bool { names.contains(where: residents.contains) }
        let sessionIds = Set(sessions.map(\.id))
        sessions += active.sessions.filter { !sessionIds.contains($0.id) && !concerns([$0.owner] + $0.invitees) }
        let shareIds = Set(shares.map(\.id))
        shares += active.shares.filter { !shareIds.contains($0.id) && !residents.contains($0.owner) }
        let alarmIds = Set(alarms.map(\.id))
        alarms += active.alarms.filter { !alarmIds.contains($0.id) && !concerns([$0.owner] + $0.recipients) }
        pauses += active.pauses.filter { !concerns([$0.owner] + ($0.from.map { [$0] } ?? [])) }
        let meetingIds = Set(meetings.map(\.id))
        meetings += active.meetings.filter { !meetingIds.contains($0.id) && !concerns([$0.owner] + $0.invitees.map(\.username)) }
    }
}

extension Relay {
    /// The users whose whole part the cache holds (nil: every user's). For tests and the metric.
    package var residents: Set<String>? { state.resident }

    /// Who the work due at `now` needs resident (tests: that the owners of what is due are named).
    package func usersNeededForDueWork(at now: Int64) -> Set<String> { state.usersNeeded(forDueAt: now, shards: timerShards) }
}
