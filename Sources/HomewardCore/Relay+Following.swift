/// A cache of connected users hears only the change notices of the users it follows (`hw.changes.USER`) and of the
/// timer shards it holds (`hw.changes.timers.SHARD`), not every notice of the cluster (`followsUsers`; a whole cache
/// reads them all). It follows each user whose version it places commits by: its residents and the owners of what
/// their parts hold (a session a resident is invited to, an alarm they receive, a list of standing shares or a pause
/// that names them), whose versions order the writes to those. The set is kept here, in `cluster.followed`.
///
/// Nothing of a followed user's is missed: a user is followed, and nats-server has confirmed the subscription, before
/// their part is read (`followBeforeReading`), so a commit after that read's snapshot publishes its notice after the
/// subscription, and one before it is in what was read. An owner is only known once a part that names them is read
/// (or a commit about them applied): followed then, and their version read once more from the store; one the store
/// has ahead is read back (`followOwners`). A commit ahead for a followed user (its predecessor's notice lost: a relay
/// died between commit and notice) is repaired by reading back the slices of the followed users the store has ahead,
/// not the whole state (`repairGap`).
extension Relay {
    /// Follows `users` before their part of the store is read (admission, a slice read back): returns once the bus
    /// has the subscriptions.
    func followBeforeReading(_ users: Set<String>) async {
        guard followsUsers else { return }
        let new = users.subtracting(cluster.followed)
        guard !new.isEmpty, !cluster.busStopped else { return }
        cluster.followed.formUnion(new)
        cluster.counters.followedUsers.record(cluster.followed.count)
        await bus.follow(users: new, unfollowing: [])
    }

    /// Stops hearing the notices about `users`: `evict` calls it once their part is dropped from the cache (never for a
    /// resident, whose part would then miss commits).
    public func unfollow(_ users: Set<String>) async {
        guard followsUsers else { return }
        let gone = users.intersection(cluster.followed)
        guard !gone.isEmpty else { return }
        cluster.followed.subtract(gone)
        cluster.counters.followedUsers.record(cluster.followed.count)
        if !cluster.busStopped { await bus.follow(users: [], unfollowing: gone) }
        dropUnheardOwners(among: gone)
    }

    /// Drops what the cache holds of owners (of `candidates`; nil: of every owner it holds something of) it neither
    /// follows nor fires the timers of: nothing of theirs is heard here, so it would go stale and stay
    /// (`RelayState+UnheardOwners.swift`). At start, after a whole read-back, when a shard is released, when users are
    /// unfollowed, and after other relays' commits were applied. Not an owner whose entities name a resident (followed
    /// anyway, `followOwners`). Taking a shard reads the store (`takeTimerShards`), which brings its owners' back.
    /// `candidates` is worked out only on such a cache: a whole cache, the default, applies every commit of the
    /// cluster and must not pay for it.
    func dropUnheardOwners(among candidates: @autoclosure () -> Set<String>? = nil) {
        guard followsUsers else { return }
        let unheard = (candidates() ?? state.activeOwners()).filter { !cluster.followed.contains($0) && !timerShards.owns($0) }
        guard !unheard.isEmpty else { return }
        let dropped = unheard.subtracting(state.ownersNamedByResidents(among: unheard))
        guard !dropped.isEmpty else { return }
        state.dropActive(ownedBy: dropped)
        syncPresence(owners: dropped)
        counters.alarmsPending.record(state.alarms.count)
    }

    /// Once a shard's owners' entities are read (`takeTimerShards`): those of owners whose session the cache did not hold
    /// (`dropUnheardOwners`) come without the time since when the owner is offline, which is not stored and which
    /// presence deltas set only for an owner whose session the cache holds. An owner connected nowhere counts as offline
    /// since their last-seen time as presence knows it, not before this relay's start (at start, presence from the
    /// others is not known yet, as for the sessions loaded then), or from now when presence does not know it: lost
    /// contact may fire late, never early.
    func noteOfflineOwners(in shards: TimerShards) {
        guard followsUsers else { return }
        let now = clock()
        for owner in state.sessionByOwner.keys where shards.owns(owner) && state.offlineOwners[owner] == nil
            && presence.connectionCount(of: owner) == 0 && !presence.isOnlineElsewhere(owner) {
            state.ownerWentOffline(owner, at: presence.lastSeen(owner).map { max($0, startedAt) } ?? now)
        }
    }

    /// Follows the owners `slice` (read for `users`) names that are not followed yet, then reads their versions again:
    /// a commit about them between the slice's snapshot and the subscription sent its notice to nobody here, so those
    /// the store has ahead of the cache are read back.
    func followOwners(namedBy slice: StoredState, readFor users: Set<String>) async {
        guard followsUsers else { return }
        await followOwners(slice.ownersNamed(besides: users))
    }

    /// Follows `owners` that are not followed yet and reads back those the store has ahead of the cache.
    func followOwners(_ owners: Set<String>) async {
        let new = owners.subtracting(cluster.followed)
        guard !new.isEmpty else { return }
        await followBeforeReading(new)
        guard let current = try? await store.versions(of: Array(new)) else {
            // The store did not answer: their versions stay as read, and a later commit about them that is ahead is
            // repaired as a gap.
            return
        }
        let behind = Set(current.filter { $0.value > (versions?[$0.key] ?? 0) }.keys)
        if !behind.isEmpty { await reloadSlices(of: behind, afterRemoteChange: true) }
    }

    /// After other relays' commits were applied: the owners they name that now own something naming a resident (an
    /// invite, an alarm, a list or a pause) are followed, as if a slice had named them.
    func followOwners(namedBy commits: [ChangeNotice.Commit]) async {
        guard followsUsers else { return }
        var candidates = Set<String>()
        for commit in commits { candidates.formUnion((commit.versions ?? [:]).keys) }
        candidates.subtract(cluster.followed)
        let owners = candidates.filter { state.ownsSomethingNamingAResident($0) }
        if !owners.isEmpty { await followOwners(owners) }
    }

    /// A commit waited too long for an earlier one about a followed user: reads the store's versions of every followed
    /// user (one query) and the slices of those behind. Returns false when that could not be read (then the cache is
    /// reloaded whole, as a whole cache does for every gap).
    @discardableResult
    func repairGap() async -> Bool {
        guard followsUsers, !writes.unstored, let cached = versions else { return await reloadFromStore(afterRemoteChange: true) }
        let followed = cluster.followed
        guard let current = try? await store.versions(of: Array(followed)) else { return await reloadFromStore(afterRemoteChange: true) }
        let behind = Set(current.filter { $0.value > (cached[$0.key] ?? 0) }.keys)
        cluster.counters.gapRepairs.increment()
        guard !behind.isEmpty else { return true }
        return await reloadSlices(of: behind, afterRemoteChange: true)
    }

    /// A share link created on another relay reaches this cache only if it follows the link's owner (a whole cache, or a
    /// connected one reading `hw.changes`, holds every live link): at `watch`, a token it does not know is looked up in
    /// the store and its owner admitted, followed before their part (which holds the link) is read; their notices (the
    /// link revoked, the session ended) reach the viewer from then on. An unknown token costs one lookup, and fails as
    /// before (counted per address).
    func admitLinkOwner(tokenHash hash: String) async throws(RelayError) {
        guard followsUsers, state.sharesByHash[hash] == nil else { return }
        let owner: String?
        do { owner = try await store.shareOwner(forTokenHash: hash) } catch { throw .storage("\(error)") }
        if let owner { try await admit([owner]) }
    }

    /// The users a placement counts (nil: every user whose version the cache knows).
    var placedBy: Set<String>? { followsUsers ? cluster.followed : nil }
}
