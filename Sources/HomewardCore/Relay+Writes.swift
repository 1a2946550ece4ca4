import Dispatch
import HomewardProtocol

/// The relay's write path: how what it decides becomes durable before anyone hears of it, and what
/// happens when that fails or another relay wrote first.
///
/// The relay decides from memory and does not wait for the store between operations (the LMAX way: one
/// serial decider, its output journaled in batches, released after the journal). `persist` stages an
/// operation's changes in the `WriteJournal`; `whenStored` puts what the operation makes heard (reply,
/// events, audience, push wake) behind them. After each command the next batch goes to the store when none
/// is there (`startWrite`): all that was staged meanwhile, one transaction (one fsync on SQLite). Its end
/// comes back through the mailbox (`Mailbox.written`, handled before the next command), which releases the
/// batch's waiters in order, or fails them and everything decided after them (`writeFailed`, then the state
/// is read back from the store).
///
/// On a shared store (a cluster) the batch is checked against the other relays' writes about the same users
/// (`RelayStore.applyChecked`): each decision stages, with its changes, the version of each user it concerns
/// that it saw, less this relay's own commits since (`WriteJournal.ownCommits`), so that a batch is checked with what its
/// decisions saw plus what this relay itself committed meanwhile. A committed batch is told to the other
/// relays (its notice confirmed by nats-server) before its waiters are released. A refused batch
/// (`writeRefused`) means a decision in it missed another relay's write: the state, which holds it and what
/// was decided on top of it, is read back, and each of their requests is decided again (`decideAgain`).
extension Relay {
    /// What waits for the journal: `release` once everything decided before it is stored, `fail` when
    /// a write it waits for failed (an alarm operation's spools and delivers instead, `Relay+Spool`),
    /// `refused` when another relay wrote first (a request is decided again; by default it fails). All run
    /// on the relay, in the order they were decided. `prepare`, when given, runs once the write is stored,
    /// for every waiter of the batch before any `release`: what changes no connection yet (audiences, the
    /// events put in the notice that tells the other relays of the commit).
    struct WriteWaiter: Sendable {
        var prepare: (@Sendable (isolated Relay) -> Void)?
        let release: @Sendable (isolated Relay) async -> Void
        let fail: @Sendable (isolated Relay, RelayError) async -> Void
        var refused: (@Sendable (isolated Relay) async -> Void)?
    }

    /// Makes `changes` durable before anything decided after them is heard of: they join the next batch
    /// (refused while the state holds a failed write: `WritePath.unstored`).
    func persist(_ changes: [StoreChange]) async throws(RelayError) {
        guard !changes.isEmpty else { return }
        guard !writes.unstored else { throw Self.storageUnavailable }
        // A change no store can hold would fail its whole batch, the neighbours' decisions with it: it
        // fails here, alone, as its write would have (the state is read back before the next decision).
        if let key = changes.lazy.compactMap(\.keyWithNUL).first {
            let error = StoreKeyError(key: key)
            writeFailed(error, lost: changes)
            throw .storage("\(error)")
        }
        writes.stage(changes, bases: writeBases(of: changes), address: noticeAddress(of: changes))
        state.noteOwnWrite(changes: changes)
    }

    /// On a bus that publishes per user, where the notice that tells of `changes` goes, in the state they were decided
    /// into (what they remove is recorded meanwhile, `recordingRemovals`). Empty otherwise (`addressesNotices`).
    private func noticeAddress(of changes: [StoreChange]) -> NoticeAddress {
        guard addressesNotices, changes.contains(where: \.concernsOtherRelays) else { return NoticeAddress() }
        return NoticeAddress(users: state.noticeUsers(of: changes), timerOwners: state.timerOwners(of: changes))
    }

    /// On a shared store, for each user `changes` concern (`RelayState.writeScope`): the version this decision
    /// saw, less this relay's own commits since the journal was last idle. Empty on a relay alone.
    private func writeBases(of changes: [StoreChange]) -> UserVersions {
        guard busIsShared, let cached = versions, changes.contains(where: \.concernsOtherRelays) else { return [:] }
        let users = state.writeScope(of: changes)
        // A cache of connected users may know the version of someone not resident (from notices) without holding
        // their whole part: a write about them is checked as from a cache that knows nothing of them, so the store
        // refuses it and their part is read back (which admits them) before it is decided again.
        return Dictionary(uniqueKeysWithValues: users.map { user in
            (user, writes.journal.base(state.isResident(user) ? cached[user, default: 0] : 0, of: user))
        })
    }

    /// Runs `release` once everything decided so far is stored (at once when it is), `fail` instead when a
    /// write it waits for fails, `refused` (when given; else `fail`) when another relay wrote first. While the
    /// state holds a failed write (`WritePath.unstored`), nothing is waiting: a decision then changed nothing
    /// (the write of one that does is refused, `persist`), or it is an alarm operation, spooled.
    func whenStored(_ release: @escaping @Sendable (isolated Relay) async -> Void,
                    preparing prepare: (@Sendable (isolated Relay) -> Void)? = nil,
                    orElse fail: @escaping @Sendable (isolated Relay, RelayError) async -> Void = { _, _ in },
                    orRefused refused: (@Sendable (isolated Relay) async -> Void)? = nil) async {
        let waiter = WriteWaiter(prepare: prepare, release: release, fail: fail, refused: refused)
        guard let now = writes.journal.whenStored(waiter) else { return }
        now.prepare?(self)
        await now.release(self)
    }

    /// Answers a request with `error` once everything decided before it is stored, so that a connection's
    /// answers keep its requests' order and a refusal never tells of what is not stored.
    func answerInTurn(_ done: @escaping Completion, _ error: RelayError,
                      orRefused refused: (@Sendable (isolated Relay) async -> Void)? = nil) async {
        await whenStored({ _ in done(.failure(error)) }, orElse: { _, failure in done(.failure(failure)) }, orRefused: refused)
    }

    /// `whenStored` for work that needs no suspension, from code that has none (nothing is sent when a
    /// write it waits for fails).
    func afterStored(_ release: @escaping @Sendable (isolated Relay) -> Void) {
        if writes.journal.whenStored(WriteWaiter(release: { release($0) }, fail: { _, _ in })) != nil { release(self) }
    }

    /// Waits until everything decided so far is stored, batch after batch; the mailbox waits meanwhile. For
    /// what needs the store in order with what was decided (a read of it, a reload) or the state exactly as
    /// stored (a sign-in's reply and backlog). Throws when a write of it failed.
    func writesSettled() async throws(RelayError) {
        let failuresBefore = writes.failures
        while !writes.journal.isIdle {
            startWrite()
            await writeFinished(await nextWriteResult())
        }
        if let failure = writes.failedSince(failuresBefore) { throw .storage(failure) }
    }

    /// The connections signed in with tokens a command revoked close once the revocation is stored, after
    /// that command's reply (the connection that sent `logout` is signed out by then and stays); the other
    /// relays hear of the revocation with the notice that follows.
    func closeRevokedWhenStored() {
        let revoked = writes.takeRevokedTokens()
        guard !revoked.isEmpty else { return }
        let owners = addressesNotices ? revokedTokenOwners(revoked) : []
        afterStored { relay in
            relay.closeConnections(signedInWith: revoked)
            if relay.busIsShared { relay.tellRevoked(revoked, owners: owners) }
        }
    }

    /// Sends the next batch to the store when none is there.
    func startWrite() {
        guard let batch = writes.journal.nextBatch() else { return }
        // Checked on a shared store: each user at the oldest version a decision in the batch saw, plus this
        // relay's own commits since (a decision that missed another relay's write then fails the check).
        let counted = busIsShared && batch.contains(where: \.concernsOtherRelays)
        let scope: UserVersions? = counted && versions != nil
            ? writes.journal.committingScope : nil
        commit(batch, scope: scope)
    }

    /// Applies one batch, off the relay's queue; its end comes back through the mailbox.
    private nonisolated func commit(_ batch: [StoreChange], scope: UserVersions?) {
        store.applyChecked(batch, scope: scope) { result in self.written(result) }
    }

    /// A batch's end: to the command waiting for it (`writesSettled`), else to the mailbox, ahead of the commands.
    private nonisolated func written(_ result: Result<UserVersions?, any Error>) {
        let (waiter, start) = mailbox.withLock { mailbox -> (CheckedContinuation<Result<UserVersions?, any Error>, Never>?, Bool) in
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
        if start { startMailbox() }
    }

    /// The end of the batch with the store, for a command that waits for it inside its turn.
    private func nextWriteResult() async -> Result<UserVersions?, any Error> {
        await withCheckedContinuation { continuation in
            let ready = mailbox.withLock { mailbox -> Result<UserVersions?, any Error>? in
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
    /// meanwhile), or fails a failed batch's and those of everything decided after it. On a shared store a
    /// stored batch is told to the others first, and a refused one is decided again.
    func writeFinished(_ result: Result<UserVersions?, any Error>) async {
        let batch = writes.journal.committingChanges
        let address = writes.journal.committingAddress
        switch result {
        case .success(let moved):
            let told = busIsShared && batch.contains(where: \.concernsOtherRelays)
            if told, let moved { writes.versionsMoved(moved) }
            let released = writes.journal.committed(moving: moved)
            // Audiences, and the events for the notice, before anything is sent: one notice tells the others of
            // the commit and of what it makes heard.
            for waiter in released { waiter.prepare?(self) }
            // The next batch goes to the store while this one's notice is confirmed: nothing of it is heard before
            // its own end, which comes through the mailbox after this one's, so its notice follows this one's.
            startWrite()
            if told {
                cluster.noticeNeeded = true
                cluster.outgoing.commits?.append(ChangeNotice.Commit(versions: moved, changes: batch.filter(\.isCached)))
                cluster.outgoing.address.formUnion(address)
                // The walkers connections here now receive from other relays are subscribed to before those
                // relays hear of it (the outbox keeps that order), as the replies below would have done.
                await syncInterest()
                // Told the others, confirmed, before anyone hears of it here (`Relay+Cluster`, read freshness).
                await publishConfirmedNotice()
            }
            for waiter in released { await waiter.release(self) }
            // Another relay's commit that came after this one's may be waiting for it.
            if busIsShared, cluster.sequencer.isHolding { await handleRemoteNotices([]) }
        case .failure(let behind as StoreCacheBehind):
            await writeRefused(behind)
        case .failure(let error):
            let (waiters, lost) = writes.journal.failed()
            writeFailed(error, lost: lost)
            let failure = RelayError.storage("\(error)")
            for waiter in waiters { await waiter.fail(self, failure) }
        }
        // What the waiters sent (events, alarms heard unstored, revoked tokens) goes to the other relays now, not
        // after the next command.
        if busIsShared { publishNotice() }
    }

    /// Another relay wrote about a user of the batch since a decision in it saw that user: nothing of the batch
    /// was stored. The state holds its decisions and those on top of them, and lacks the other relay's write, so
    /// the part of it those concern is read back from the store: the slices of every user the staged decisions
    /// named (their scopes, and whose sign-in bookkeeping they record) and of those the refusal names; then every
    /// waiter of the batch and of what was decided after it is refused: a request is decided again on the fresh
    /// state (`decideAgain`), in the order they were decided.
    func writeRefused(_ behind: StoreCacheBehind) async {
        let staged = writes.journal.stagedUsers
        let (waiters, lost) = writes.journal.failed()
        logger.debug("write refused: another relay wrote about the same user first", metadata: ["refusal": "\(behind)"])
        // As after a failed write: what the refused decisions noted in memory only about those users (a friend
        // request's notice, which would hold back the event of the same request decided again) starts afresh.
        let users = staged.union(state.sliceScope(of: lost)).union(behind.expected.keys).union(behind.current.keys)
        await reloadSlices(of: users)
        for waiter in waiters {
            if let refused = waiter.refused {
                await refused(self)
            } else {
                await waiter.fail(self, .storage("\(behind)"))
            }
        }
    }

    /// A request whose write was refused, to be decided again: in turn, behind what is in the mailbox now, up
    /// to `writeAttempts` times and `writeRetryTime` in all; then the refusal is its answer (`internal`).
    func decideAgain(_ request: Redecision) {
        let deciding = ContinuousClock.now - request.since
        let gaveUp = request.attempts >= Self.writeAttempts || deciding >= Self.writeRetryTime
        contention.record(WriteContention.Attempt(refusals: 1, retries: gaveUp ? 0 : 1, gaveUp: gaveUp, deciding: deciding))
        if gaveUp {
            request.done(.failure(.storage("the write was refused \(request.attempts) times: other relays kept writing about the same users")))
        } else {
            submit(.decideAgain(request))
        }
    }

    /// A signed-in request decided again after a refusal, with how often and since when.
    struct Redecision: Sendable {
        let request: Request
        let auth: Authentication
        let peer: String
        let sink: any ClientSink
        let done: Completion
        let attempts: Int
        let since: ContinuousClock.Instant
    }

    /// The one place a failed write is handled, on a relay alone (a batch, and everything decided after it,
    /// `lost`) or on a shared bus (one operation's changes). The in-memory state may have moved ahead of the
    /// store, so the durable part is read back from it (what is on disk is the truth) while what is not
    /// stored (the safety settings, which owners are offline) is kept: as the very next operation, not
    /// before the failed ones answer, so that a request that failed because the database is down fails
    /// within one storage timeout, not two. Until then the state counts as unstored (`stateIsStored`): no
    /// decision on it is stored or heard of, but for alarm operations, which are spooled (`Relay+Spool`).
    func writeFailed(_ error: any Error, lost changes: [StoreChange]) {
        logger.error("storage write failed; reading the state back from storage",
                     metadata: ["error": "\(error)", "changes": "\(changes.count)"])
        // Already marked unstored: its read-backs keep their own pace (`readBackInterval`).
        if writes.writeFailed(error) {
            // The read-back, right after this operation (also when no request comes: timers wait for it).
            submit(.fireDue(then: nil))
        }
    }
}
