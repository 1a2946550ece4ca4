import Dispatch
import Logging

/// A cache of connected users lets go of users it no longer needs, so that its memory follows the users it serves
/// rather than everyone who signed in or was named since the start.
///
/// When: a user is noted when admitted and when their last connection here closes (`IdleResidents`); `grace`
/// (`RelayLimits.cacheEvictionGrace`) after their latest note, a sweep (`evictIdleResidents`, a mailbox command)
/// evicts them unless they are still needed: connected here, or the owner of a session whose share link has a viewer
/// watching here (the viewer's relay hears of the link's end through its owner's part). A reconnect within the
/// grace finds them resident; one after it reads their slice again (one indexed query).
///
/// Costs: a sweep takes at most `evictedTogether` due users, the users it takes and no other, and never waits for the
/// store (a store that is down must not hold up the mailbox): a user whom a decision on its way to the store concerns
/// (`sliceScope` of the journal's changes), or whose last-seen time is not written yet, stays until the next sweep;
/// then the cache's eviction (`RelayState.evict`: their
/// part, plus one pass over blocks, standing shares, pauses and messages for the batch). Sweeps are at least a second
/// apart unless a storm leaves more due, and never while memory counts as unstored or other relays' notices are held.
extension Relay {
    /// Users one sweep evicts at most; more due are swept in the next turn of the mailbox.
    static let evictedTogether = 1_024

    /// The sweep, waited for (tests with a manual clock; the relay schedules its own, `scheduleEviction`).
    package nonisolated func evictIdleResidents() async {
        await withCheckedContinuation { submit(.evictIdle(then: $0)) }
    }

    /// `users` were admitted or left at `now`: they are due for eviction `grace` later.
    func noteIdle(_ users: some Sequence<String>, at now: Int64) {
        guard state.resident != nil else { return }
        for user in users { eviction.idle.note(user, at: now) }
        scheduleEviction()
    }

    /// Submits a sweep when the first user noted falls due (at least a second from now), unless one is scheduled.
    func scheduleEviction(soon: Bool = false) {
        guard !eviction.sweepScheduled, let due = eviction.idle.nextDue else { return }
        eviction.sweepScheduled = true
        let wait = soon ? 0 : max(1_000, due - clock())
        executor.queue.asyncAfter(deadline: .now() + .milliseconds(Int(min(wait, Int64(Int32.max))))) { [weak self] in
            self?.submit(.evictIdle(then: nil))
        }
    }

    /// One sweep: the users whose grace passed and whom nothing keeps are evicted (`evict`).
    func sweepIdleResidents() async {
        eviction.sweepScheduled = false
        defer { scheduleEviction() }
        // Not the cache's, and not stored: kept whatever the store's state.
        forgetExpiredRateLimits(at: clock())
        // Nothing is dropped while the cache may hold what is not stored or waits for a commit it lacks: the read-back
        // or the gap's repair reads the residents' parts, and decides which slices they need, first.
        guard state.resident != nil, !writes.unstored, !cluster.sequencer.isHolding else { return }
        let now = clock()
        // What is on its way to the store (staged, or being committed) and the last-seen times not written yet: a user
        // they concern stays until they are stored, and is due again at the next sweep. No sweep waits for the store.
        let pending = writes.journal.isIdle ? [] : state.sliceScope(of: writes.journal.stagedChanges)
        var due: [String] = []
        for user in eviction.idle.takeDue(at: now, limit: Self.evictedTogether) where state.isResident(user) {
            // Connected here: noted again when their last connection closes.
            guard presence.connectionCount(of: user) == 0 else { continue }
            if hasViewersWatching(user) { eviction.idle.note(user, at: now); continue }
            if pending.contains(user) || writes.unsavedLastSeen[user] != nil { eviction.idle.note(user, at: now - eviction.idle.grace); continue }
            due.append(user)
        }
        if !due.isEmpty {
            await evict(Set(due))
            eviction.evictedSinceRelease += due.count
        }
        // (Also after a sweep that found only users kept for now: the last of a storm may be one.)
        if eviction.idle.nextDue.map({ $0 <= clock() }) == true {
            scheduleEviction(soon: true)
        } else if eviction.evictedSinceRelease >= Self.evictedBeforeRelease, let release = releaseFreedMemory {
            // The end of a storm: what it freed lies between what is still in use, where glibc does not give it back by
            // itself. Off the relay's queue: the trim holds each arena's lock while it walks its free chunks.
            eviction.evictedSinceRelease = 0
            let logger = logger
            DispatchQueue.global(qos: .utility).async {
                let started = ContinuousClock.now
                release()
                logger.notice("returned freed memory after evictions", metadata: ["ms": "\(Relay.millis(ContinuousClock.now - started))"])
            }
        }
    }

    /// Drops the rate limits' keys whose events have all left their windows: each limit drops them as it counts an
    /// event, a sweep those of limits nothing touched since (a relay most users left).
    func forgetExpiredRateLimits(at now: Int64) {
        signIns.forgetExpired(now: now)
        state.searches.forgetExpired(now: now)
        state.messageSends.forgetExpired(now: now)
    }

    /// How many keys (usernames, client addresses) the rate limits hold events of (tests).
    package var rateLimitedKeys: Int {
        signIns.keyCount + state.searches.keyCount + state.messageSends.keyCount
    }

    /// Users evicted before the memory freed is given back at the end of a sweep (one trim per storm of departures,
    /// not one per sweep).
    static let evictedBeforeRelease = 1_000

    nonisolated static func millis(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    /// Evicts `users` from the cache: the one place a resident stops being one. Drops their part (what no remaining
    /// resident's slice holds and a start would not load, `RelayState.evict`), the versions no remaining resident's
    /// part needs (theirs, and those of the owners only their part named), and their presence entries that hold
    /// nothing but a stored last-seen time, and stops following (`unfollow`) the users whose versions it forgets: their
    /// commits no longer concern this cache. Called with no write about them pending.
    func evict(_ users: Set<String>) async {
        let users = users.filter(state.isResident)
        guard !users.isEmpty else { return }
        let audiences = audienceOwners(concerning: users)
        let named = users.union(state.ownersOfWhatIncludes(users))
        state.evict(users)
        let unneeded = named.filter { !state.isResident($0) }
        let forgotten = unneeded.subtracting(state.ownersNamedByResidents(among: unneeded))
        writes.forgetVersions(of: forgotten)
        for user in users { eviction.idle.forget(user) }
        presence.forgetIdle(users)
        // Their lists of standing shares and open-ended pauses may be gone: whom their positions reach here follows.
        syncPresence(owners: audiences)
        counters.residentUsers.record(state.resident?.count ?? 0)
        counters.evictions.increment(by: users.count)
        // Last, and in the mailbox's turn: a later admission of one of them follows them again after this.
        await unfollow(forgotten)
    }

    /// The users whose audience what the cache holds about `users` feeds: themselves, and the owners of the lists of
    /// standing shares and pauses that name them (the rest, sessions and alarms, stay whatever the eviction).
    private func audienceOwners(concerning users: Set<String>) -> Set<String> {
        var owners = users
        for (owner, list) in state.standing where list.contains(where: users.contains) { owners.insert(owner) }
        for (owner, list) in state.pauses where list.values.contains(where: { $0.from.map(users.contains) ?? false }) {
            owners.insert(owner)
        }
        return owners
    }

    /// Whether a share link of `owner`'s active session has a viewer connected here.
    private func hasViewersWatching(_ owner: String) -> Bool {
        guard let session = state.sessionByOwner[owner] else { return false }
        return (state.sharesBySession[session] ?? []).contains { id in
            state.shares[id].map { presence.connectionCount(of: $0.viewerKey) > 0 } ?? false
        }
    }
}
