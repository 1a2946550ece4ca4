import Dispatch

/// The relay's write path: how what it decides becomes durable before anyone hears of it, and what
/// happens when that fails.
///
/// A relay alone (`!busIsShared`) decides from memory and does not wait for the disk between operations
/// (the LMAX way: one serial decider, its output journaled in batches, released after the journal).
/// `persist` stages an operation's changes in the `WriteJournal`; `whenStored` puts what the operation
/// makes heard (reply, events, audience, push wake) behind them. After each command the next batch goes
/// to the store when none is there (`startWrite`): all that was staged meanwhile, one transaction, one
/// fsync on SQLite. Its end comes back through the mailbox (`Mailbox.written`, handled before the next
/// command), which releases the batch's waiters in order, or fails them and everything decided after them
/// (`writeFailed`, then the state is read back from the store).
///
/// A relay on a shared bus stores each operation before it decides the next, as its writes are checked
/// against the other relays' (`onCurrentCache`): there `persist` commits at once and `whenStored` runs
/// its work at once. Its journal stays empty.
extension Relay {
    /// What waits for the journal: `release` once everything decided before it is stored, `fail` when
    /// a write it waits for failed. Both run on the relay, in the order they were decided.
    struct WriteWaiter: Sendable {
        let release: @Sendable (isolated Relay) async -> Void
        let fail: @Sendable (isolated Relay, RelayError) -> Void
    }

    /// Makes `changes` durable before anything decided after them is heard of. On a relay alone they join
    /// the next batch (refused while the state holds a failed write: `unstored`); on a shared bus they are
    /// committed now, and a refusal (`StoreCacheBehind`) is thrown for `onCurrentCache` to decide again.
    func persist(_ changes: [StoreChange]) async throws(RelayError) {
        guard !changes.isEmpty else { return }
        guard busIsShared else {
            guard !unstored else { throw Self.storageUnavailable }
            // A change no store can hold would fail its whole batch, the neighbours' decisions with it: it
            // fails here, alone, as its write would have (the state is read back before the next decision).
            if let key = changes.lazy.compactMap(\.keyWithNUL).first {
                let error = StoreKeyError(key: key)
                writeFailed(error, lost: changes)
                throw .storage("\(error)")
            }
            journal.stage(changes)
            for case .revokeToken(let hash) in changes { revokedTokens.append(hash) }
            state.noteOwnWrite(nil, changes: changes)
            return
        }
        do {
            let count = try await store.applyCounting(changes, expecting: state.loadedChangeCount)
            if changes.contains(where: \.concernsOtherRelays) {
                noticeNeeded = true
                notice.commits?.append(ChangeNotice.Commit(count: count, changes: changes.filter(\.isCached)))
            }
            for case .revokeToken(let hash) in changes { revokedTokens.append(hash) }
            state.noteOwnWrite(count, changes: changes)
        } catch let behind as StoreCacheBehind {
            // Nothing was stored and storage works: the caller decides again on a fresh cache (`onCurrentCache`).
            cacheBehind = behind.current
            logger.debug("write refused: the cache is behind the store", metadata: ["error": "\(behind)"])
            throw .storage("\(behind)")
        } catch {
            writeFailed(error, lost: changes)
            throw .storage("\(error)")
        }
    }

    /// Runs `release` once everything decided so far is stored (at once when it is), `fail` instead when a
    /// write it waits for fails (or the state holds a failed write: `unstored`).
    func whenStored(_ release: @escaping @Sendable (isolated Relay) async -> Void,
                    orElse fail: @escaping @Sendable (isolated Relay, RelayError) -> Void = { _, _ in }) async {
        guard !unstored else { return fail(self, Self.storageUnavailable) }
        if let now = journal.whenStored(WriteWaiter(release: release, fail: fail)) { await now.release(self) }
    }

    /// Answers a request with `error` once everything decided before it is stored, so that a connection's
    /// answers keep its requests' order and a refusal never tells of what is not stored.
    func answerInTurn(_ done: @escaping Completion, _ error: RelayError) async {
        await whenStored({ _ in done(.failure(error)) }, orElse: { _, failure in done(.failure(failure)) })
    }

    /// `whenStored` for work that needs no suspension, from code that has none (nothing is sent when a
    /// write it waits for fails).
    func afterStored(_ release: @escaping @Sendable (isolated Relay) -> Void) {
        guard !unstored else { return }
        if journal.whenStored(WriteWaiter(release: { release($0) }, fail: { _, _ in })) != nil { release(self) }
    }

    /// Waits until everything decided so far is stored, batch after batch; the mailbox waits meanwhile. For
    /// what needs the store in order with what was decided (a read of it, a reload) or the state exactly as
    /// stored (a sign-in's reply and backlog). Throws when a write of it failed.
    func writesSettled() async throws(RelayError) {
        let failuresBefore = writeFailures
        while !journal.isIdle {
            startWrite()
            await writeFinished(await nextWriteResult())
        }
        guard writeFailures == failuresBefore else { throw .storage(lastWriteError) }
    }

    /// Sends the next batch to the store when none is there.
    func startWrite() {
        guard let batch = journal.nextBatch() else { return }
        commit(batch)
    }

    /// Applies one batch, off the relay's queue; its end comes back through the mailbox.
    private nonisolated func commit(_ batch: [StoreChange]) {
        Task {
            let result: Result<Void, any Error>
            do {
                try await store.apply(batch)
                result = .success(())
            } catch {
                result = .failure(error)
            }
            written(result)
        }
    }

    /// A batch's end: to the command waiting for it (`writesSettled`), else to the mailbox, ahead of the commands.
    private nonisolated func written(_ result: Result<Void, any Error>) {
        let (waiter, start) = mailbox.withLock { mailbox -> (CheckedContinuation<Result<Void, any Error>, Never>?, Bool) in
            if let waiter = mailbox.writeWaiter {
                mailbox.writeWaiter = nil
                return (waiter, false)
            }
            mailbox.written = result
            guard !mailbox.running else { return (nil, false) }
            mailbox.running = true
            return (nil, true)
        }
        waiter?.resume(returning: result)
        if start { Task { await self.processMailbox() } }
    }

    /// The end of the batch with the store, for a command that waits for it inside its turn.
    private func nextWriteResult() async -> Result<Void, any Error> {
        await withCheckedContinuation { continuation in
            let ready = mailbox.withLock { mailbox -> Result<Void, any Error>? in
                if let written = mailbox.written {
                    mailbox.written = nil
                    return written
                }
                mailbox.writeWaiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Releases a stored batch's waiters in order (the next batch is sent first, so the store is not idle
    /// meanwhile), or fails a failed batch's and those of everything decided after it.
    func writeFinished(_ result: Result<Void, any Error>) async {
        switch result {
        case .success:
            let released = journal.committed()
            startWrite()
            for waiter in released { await waiter.release(self) }
        case .failure(let error):
            let (waiters, lost) = journal.failed()
            writeFailed(error, lost: lost)
            let failure = RelayError.storage("\(error)")
            for waiter in waiters { waiter.fail(self, failure) }
        }
    }

    /// The one place a failed write is handled, on a relay alone (a batch, and everything decided after it,
    /// `lost`) or on a shared bus (one operation's changes). The in-memory state may have moved ahead of the
    /// store, so the durable part is read back from it (what is on disk is the truth) while what is not
    /// stored (the safety settings, which owners are offline) is kept: as the very next operation, not
    /// before the failed ones answer, so that a request that failed because the database is down fails
    /// within one storage timeout, not two. Until then the state counts as unstored (`stateIsStored`): no
    /// decision on it is stored or heard of.
    func writeFailed(_ error: any Error, lost changes: [StoreChange]) {
        writeFailures += 1
        lastWriteError = "\(error)"
        logger.error("storage write failed; reading the state back from storage",
                     metadata: ["error": "\(error)", "changes": "\(changes.count)"])
        // Already marked unstored: its read-backs keep their own pace (`readBackInterval`).
        if !unstored {
            unstored = true
            lastReadBack = .min / 2
            // The read-back, right after this operation (also when no request comes: timers wait for it).
            submit(.fireDue(then: nil))
        }
    }

    /// Runs `attempt` (decide on the cache, store what it decided; send nothing before) and, when its write
    /// was refused because another relay wrote since the cache was loaded (`StoreCacheBehind`), runs it again
    /// on the state caught up with the store, up to `writeAttempts` times and `writeRetryTime` in all; then the refusal stands as
    /// the storage error. Nothing of a refused attempt stays: the state from before it is what is reloaded
    /// (what is not stored, such as rate limits and request notices, as it was before the attempt).
    /// A relay alone is never refused: it runs `attempt` once, and keeps no copy of the state.
    func onCurrentCache<T>(_ attempt: () async throws(RelayError) -> T) async throws(RelayError) -> T {
        guard busIsShared else { return try await attempt() }
        var attempts = 1
        let giveUp = ContinuousClock.now + Self.writeRetryTime
        while true {
            let before = state
            cacheBehind = nil
            do {
                return try await attempt()
            } catch {
                guard let current = cacheBehind else { throw error }
                cacheBehind = nil
                state = before
                let caughtUp = await catchUp(to: current)
                guard caughtUp, attempts < Self.writeAttempts, ContinuousClock.now < giveUp else { throw error }
                attempts += 1
            }
        }
    }

    /// How many times, and for how long, a request is decided and written before a refusal
    /// (`StoreCacheBehind`) is its answer. Every counted write of the cluster moves the count that the others'
    /// writes are checked against, so in a burst of writes on several relays (hundreds of friends accepting
    /// invites at once) a relay may lose many times in a row; each loss costs a catch-up of a few
    /// milliseconds, and some relay wins every round. Bounded so that a request never hangs.
    public static let writeAttempts = 100
    static let writeRetryTime = Duration.seconds(5)

    /// After a refused write: the commits this cache lacks (up to the store's count `current`) are another
    /// relay's, whose notices are usually here already or within a few milliseconds. Applying them costs
    /// microseconds where a reload reads the whole store (and the longer the catch-up, the likelier another
    /// write slips in before the next attempt). So this waits up to `refusalCatchUpWait` for those notices,
    /// and reloads only when they do not come (or cannot be placed: then `handleRemoteNotices` reloads).
    func catchUp(to current: Int64) async -> Bool {
        // Real time, not `clock()` (the rules' clock, which tests move by hand): this waits for the bus.
        let deadline = ContinuousClock.now + Self.refusalCatchUpWait
        while true {
            await handleRemoteNotices(takeRemoteNotices())
            if let applied = state.loadedChangeCount, applied >= current, !state.ownWriteAhead { return !unstored }
            guard ContinuousClock.now < deadline else { break }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return await reloadFromStore(afterRemoteChange: true)
    }

    /// How long a relay whose write was refused waits for the missing commits' notices before it reloads.
    static let refusalCatchUpWait = Duration.milliseconds(50)

    /// Reads the durable state back (after a failed write, or to catch up with other relays). When that
    /// fails (the database is down), memory may hold changes that were never stored: it is marked
    /// `unstored`, and nothing that reads or changes it runs until a later read-back succeeds (`stateIsStored`).
    @discardableResult
    func reloadFromStore(afterRemoteChange: Bool = false) async -> Bool {
        // What was decided before is stored (or failed) first: a reload never drops a decision on its way.
        try? await writesSettled()
        lastReadBack = clock()
        let stored: StoredState
        do {
            stored = try await store.load()
        } catch {
            if !unstored { logger.critical("storage cannot be read back; requests fail until it can", metadata: ["error": "\(error)"]) }
            unstored = true
            // Tries again by itself, so that timers resume without waiting for a request.
            executor.queue.asyncAfter(deadline: .now() + .milliseconds(Int(Self.readBackInterval))) { [weak self] in
                self?.submit(.fireDue(then: nil))
            }
            return false
        }
        if unstored { logger.notice("storage is back; state read back from it") }
        unstored = false
        let before = state.owners
        state = state.reloaded(from: stored, afterRemoteChange: afterRemoteChange)
        sequencer.reloaded(at: state.loadedChangeCount)
        reloads.increment()
        syncPresence(owners: before.union(state.owners))
        alarmsPending.record(state.alarms.count)
        resetTimer()
        return true
    }

    /// Whether memory matches storage; after a failed read-back, tries again at most once per
    /// `readBackInterval` (each try costs a storage timeout while the database is down, and operations
    /// wait behind it), and answers false in between, so requests fail fast.
    func stateIsStored() async -> Bool {
        guard unstored else { return true }
        guard clock() - lastReadBack >= Self.readBackInterval else { return false }
        return await reloadFromStore()
    }

    static let readBackInterval: Int64 = 1000
    static let storageUnavailable = RelayError.storage("storage is unavailable; try again shortly")
}
