import Dispatch
import HomewardProtocol
import Logging

/// The cache and the store: recording what a decision removes, reading the state back (after a failed write,
/// another relay's change, or a bus outage; or only some users' part of it) and catching up with held change notices.
extension Relay {
    /// Runs `attempt` (decide on the cache and stage what it decided), recording who owned what it removes: a
    /// change that names an entity only by id (a session it ends) is given its users from there
    /// (`RelayState.writeScope`). Another relay's write that the decision missed is found when its batch is
    /// checked (`writeRefused`).
    func recordingRemovals<T>(_ attempt: () async throws(RelayError) -> T) async throws(RelayError) -> T {
        guard busIsShared else { return try await attempt() }
        if writes.decisionStarted() { state.removedOwners = RemovedOwners() }
        defer { writes.decisionEnded() }
        return try await attempt()
    }

    /// How many times, and for how long, a request is decided again after a refusal (`StoreCacheBehind`) before
    /// the refusal is its answer (`decideAgain`). Only writes about the same users refuse each other, but in a
    /// burst about one user on several relays (hundreds of friends accepting one walker's invite at once) a
    /// relay may lose many times in a row, and some relay wins every round. Bounded so that a request never hangs.
    public static let writeAttempts = 100
    static let writeRetryTime = Duration.seconds(5)

    /// Before a request, when notices wait for a commit this cache lacks (another relay's, whose notice may be
    /// published after a later one's and is usually here within a few milliseconds): applying it costs
    /// microseconds where a reload reads the whole store. So this waits up to `heldCatchUpWait` for it, and
    /// reloads only when it does not come (or cannot be placed: then `handleRemoteNotices` reloads).
    func catchUpWithHeldNotices() async -> Bool {
        // Real time, not `clock()` (the rules' clock, which tests move by hand): this waits for the bus.
        let deadline = ContinuousClock.now + Self.heldCatchUpWait
        while true {
            await handleRemoteNotices(takeRemoteNotices())
            if !cluster.sequencer.isHolding { return !writes.unstored }
            guard ContinuousClock.now < deadline else { break }
            try? await Task.sleep(for: .milliseconds(1))
        }
        // A cache that follows its users reads back only those the store has ahead (a whole one reloads).
        guard followsUsers else { return await reloadFromStore(afterRemoteChange: true) }
        guard await repairGap() else { return false }
        await handleRemoteNotices([])
        return !cluster.sequencer.isHolding && !writes.unstored
    }

    /// How long a request waits for a held notice's missing commit before the relay reloads.
    static let heldCatchUpWait = Duration.milliseconds(50)

    /// Reads the durable state back (after a failed write, or to catch up with other relays). When that
    /// fails (the database is down), memory may hold changes that were never stored: it is marked `unstored`
    /// (`WritePath.readBackFailed`), and nothing that reads or changes it runs until a later read-back succeeds
    /// (`stateIsStored`).
    @discardableResult
    ///
    /// With `giveUpAfter` (a reload nothing waits for: `catchUpAfterSilence`), a load that takes longer is left
    /// to finish unheard and the cache stays as it is, neither reloaded nor marked unstored: the mailbox waits no
    /// longer than that for a store that is slow or down, and the requests behind it fail or pass as they would.
    func reloadFromStore(afterRemoteChange: Bool = false, giveUpAfter limit: Duration? = nil) async -> Bool {
        // What was decided before is stored (or failed) first: a reload never drops a decision on its way.
        try? await writesSettled()
        // Read before the load: every commit after the load's snapshot sends its notice on this connection or a
        // later one, so a barrier on it shows every write (`catchUpBeforeRequest`).
        let generation = bus.generation
        // A cache of connected users reads back its residents' part and what it loads at start (`readBack(residents:)`).
        let residents = state.resident
        if let limit {
            guard let stored = await load(residents: residents, within: limit) else {
                logger.notice("the store did not answer in time; the cache is not caught up", metadata: ["within": "\(limit)"])
                return false
            }
            return await reloaded(from: stored, generation: generation, afterRemoteChange: afterRemoteChange)
        }
        writes.readingBack(at: clock())
        let stored: StoredState
        do {
            stored = try await readBack(residents: residents)
        } catch {
            if writes.readBackFailed() {
                logger.critical("storage cannot be read back; requests fail until it can", metadata: ["error": "\(error)"])
            }
            readBackAgainLater()
            return false
        }
        return await reloaded(from: stored, generation: generation, afterRemoteChange: afterRemoteChange)
    }

    /// Reads back only what the store holds about `users` (a slice, `RelayStore.loadSlice`) and puts it in place of
    /// what the cache holds about them (`RelayState.replaceSlice`), with their versions: for when only their part of
    /// the cache may differ from the store (a refused write's decisions about them, another relay's writes about
    /// them), at the cost of their rows instead of everyone's. The rest follows as after a reload: the presence
    /// table, the timer, connections whose token is gone. A whole reload instead when the state counts as
    /// unstored, when the store keeps no versions (a relay alone: nothing names whose part is stale), or when the
    /// slice cannot be read (the reload then marks the state unstored).
    @discardableResult
    func reloadSlices(of users: Set<String>, afterRemoteChange: Bool = false) async -> Bool {
        try? await writesSettled()
        guard !users.isEmpty, !writes.unstored, versions != nil else {
            return await reloadFromStore(afterRemoteChange: afterRemoteChange)
        }
        // Followed before the read, so that no commit about them after it is missed (`Relay+Following`).
        if state.resident != nil { await followBeforeReading(users) }
        let slice: StoredState
        do {
            slice = try await store.loadSlice(of: users)
        } catch {
            return await reloadFromStore(afterRemoteChange: afterRemoteChange)
        }
        let before = state.owners.union(state.pausedUsers)
        state.replaceSlice(of: users, with: slice, afterRemoteChange: afterRemoteChange)
        // Their whole part is in the cache now, current: resident (a cache of connected users).
        if state.resident != nil {
            state.resident?.formUnion(users)
            counters.residentUsers.record(state.resident?.count ?? 0)
        }
        tookVersions(of: slice, readFor: users)
        counters.sliceReloads.increment()
        cacheReadBack(owners: before.union(state.owners).union(state.pausedUsers))
        await followOwners(namedBy: slice, readFor: users)
        return true
    }

    /// The versions of a slice read for `users` (made resident, or replaced in a whole cache): theirs as read. A cache
    /// of connected users also takes those of the owners the slice names who are not resident (a session a resident is
    /// invited to, an alarm they receive: `StoredState.ownersNamed(besides:)`), unless it knows a later one, so that
    /// other relays' commits about those owners are placed in their order from now on rather than applied as they come
    /// (two of them arriving out of order would leave the resident's part without the earlier one). A whole cache
    /// knows every user's version and keeps its own: it may not hold those owners' other writes up to the slice's.
    func tookVersions(of slice: StoredState, readFor users: Set<String>) {
        writes.sliceReadBack(of: users, versions: slice.versions ?? [:])
        if let resident = state.resident, let read = slice.versions {
            writes.versionsMoved(ownerVersions(in: read.filter { !users.contains($0.key) && !resident.contains($0.key) }))
        }
        cluster.sequencer.reloaded(at: versions, complete: state.resident == nil, followed: placedBy)
    }

    /// Of the versions a read gave for owners not resident, those a cache of connected users may take: a slice's
    /// version of an owner vouches for what the slice holds of theirs (the residents' part), not for the rest the cache
    /// keeps of them, which a commit skipped as already held would leave behind (one committed before the read whose
    /// notice comes after it). For an owner whose timers this relay fires that rest matters (a session they started
    /// with someone else has a deadline only the cache knows), so their version is not taken and their commits are
    /// applied as they come, as before the cache heard of them.
    private func ownerVersions(in read: UserVersions) -> UserVersions {
        read.filter { !timerShards.owns($0.key) }
    }

    /// The store's state, or nil when it did not come within `limit` (the load goes on unheard).
    private nonisolated func load(residents: Set<String>?, within limit: Duration) async -> StoredState? {
        let first = FirstAnswer<StoredState?>()
        return await withCheckedContinuation { continuation in
            first.wait(continuation)
            Task { first.answer(try? await self.readBack(residents: residents)) }
            Task {
                try? await Task.sleep(for: limit)
                first.answer(nil)
            }
        }
    }

    /// The rest of a reload once the store's state is read (`reloadFromStore`).
    private func reloaded(from stored: StoredState, generation: Int?, afterRemoteChange: Bool) async -> Bool {
        // A cache of connected users read its residents' slices: their versions, and those of the owners they name
        // that it may take (`ownerVersions(in:)`).
        let read = state.resident.map { residents in
            stored.versions.map { versions in
                versions.filter { residents.contains($0.key) }.merging(ownerVersions(in: versions)) { resident, _ in resident }
            }
        } ?? stored.versions
        if writes.readBack(versions: read) { logger.notice("storage is back; state read back from it") }
        cluster.freshness.currentWithStore(onBus: generation)
        // Users with pauses too: their positions are recorded under their restriction, owners or not.
        let before = state.owners.union(state.pausedUsers)
        let residents = state.resident
        state = state.reloaded(from: stored, afterRemoteChange: afterRemoteChange)
        // Read back with their slices: the residents stay resident (a cache of connected users).
        state.resident = residents
        cluster.sequencer.reloaded(at: versions, complete: state.resident == nil, followed: placedBy)
        // Owners the residents' parts name now (an invite whose notice was lost with the bus) are followed from here on.
        if let residents { await followOwners(stored.ownersNamed(besides: residents).filter { state.ownsSomethingNamingAResident($0) }) }
        // What was read of owners nothing is heard of here would go stale.
        dropUnheardOwners()
        // Alarm spool: what was delivered unstored goes into the store, then the state is read again with it.
        if !spooled.isEmpty {
            if await replaySpool() {
                let reread = await reloadFromStore(afterRemoteChange: afterRemoteChange)
                syncPresence(owners: before)
                return reread
            }
            // The failed write marked this read-back as long ago (`persist`): the next one is a second away.
            writes.spoolNotStored(at: clock())
            readBackAgainLater()
        }
        counters.reloads.increment()
        cacheReadBack(owners: before.union(state.owners).union(state.pausedUsers))
        return !writes.unstored
    }

    /// What derives from the cache, brought up to date once it was read back (whole or some users' part): the
    /// presence table for `owners` (those who were or are owners or paused), the pending alarms, the timer, and the
    /// connections whose token the store no longer has.
    private func cacheReadBack(owners: Set<String>) {
        syncPresence(owners: owners)
        counters.alarmsPending.record(state.alarms.count)
        timer.deadline = nil
        armTimer()
        closeConnectionsWithoutToken()
    }

    /// After a failed read-back: tries again by itself, so that timers resume without waiting for a request.
    private func readBackAgainLater() {
        executor.queue.asyncAfter(deadline: .now() + .milliseconds(Int(Self.readBackInterval))) { [weak self] in
            self?.submit(.fireDue(then: nil))
        }
    }

    /// Whether memory matches storage; after a failed read-back, tries again at most once per
    /// `readBackInterval` (each try costs a storage timeout while the database is down, and operations
    /// wait behind it), and answers false in between, so requests fail fast.
    func stateIsStored() async -> Bool {
        guard writes.unstored else { return true }
        guard writes.readBackDue(now: clock()) else { return false }
        return await reloadFromStore()
    }

    static let readBackInterval = WritePath<WriteWaiter>.readBackInterval
    static let storageUnavailable = RelayError.storage("storage is unavailable; try again shortly")
}
