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
    /// a write it waits for failed (an alarm operation's spools and delivers instead, `Relay+Spool`). Both
    /// run on the relay, in the order they were decided.
    struct WriteWaiter: Sendable {
        let release: @Sendable (isolated Relay) async -> Void
        let fail: @Sendable (isolated Relay, RelayError) async -> Void
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
            state.noteOwnWrite(changes: changes)
            return
        }
        do {
            let counted = changes.contains(where: \.concernsOtherRelays)
            // The users the write concerns, at the versions this cache holds: the store refuses it when another
            // relay wrote about one of them since (nil: a store that keeps no versions, nothing to check).
            let scope = counted ? self.versions.map { cached in
                Dictionary(uniqueKeysWithValues: (decidedFrom ?? state).writeScope(of: changes, after: state)
                    .map { ($0, cached[$0, default: 0]) })
            } : nil
            let versions = try await store.applyChecked(changes, scope: scope)
            if counted {
                noticeNeeded = true
                notice.commits?.append(ChangeNotice.Commit(versions: versions, changes: changes.filter(\.isCached)))
            }
            for case .revokeToken(let hash) in changes { revokedTokens.append(hash) }
            state.noteOwnWrite(changes: changes)
            // The store checked that the cache held every earlier write about these users: it stays in their order.
            if let versions { self.versions?.merge(versions) { max($0, $1) } }
            // Told the others, confirmed, before anyone hears of it here (`Relay+Cluster`, read freshness).
            if noticeNeeded { await publishConfirmedNotice() }
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
    /// write it waits for fails. While the state holds a failed write (`unstored`), nothing is waiting: a
    /// decision then changed nothing (the write of one that does is refused, `persist`), or it is an alarm
    /// operation, spooled.
    func whenStored(_ release: @escaping @Sendable (isolated Relay) async -> Void,
                    orElse fail: @escaping @Sendable (isolated Relay, RelayError) async -> Void = { _, _ in }) async {
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

    /// On a relay alone, the connections signed in with tokens a command revoked close once the revocation
    /// is stored, after that command's reply (the connection that sent `logout` is signed out by then and
    /// stays). On a shared bus `afterCommand` closes them, the revocation being stored already.
    func closeRevokedWhenStored() {
        guard !busIsShared, !revokedTokens.isEmpty else { return }
        let revoked = revokedTokens
        revokedTokens.removeAll()
        afterStored { relay in relay.closeConnections(signedInWith: revoked) }
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
            for waiter in waiters { await waiter.fail(self, failure) }
        }
    }

    /// The one place a failed write is handled, on a relay alone (a batch, and everything decided after it,
    /// `lost`) or on a shared bus (one operation's changes). The in-memory state may have moved ahead of the
    /// store, so the durable part is read back from it (what is on disk is the truth) while what is not
    /// stored (the safety settings, which owners are offline) is kept: as the very next operation, not
    /// before the failed ones answer, so that a request that failed because the database is down fails
    /// within one storage timeout, not two. Until then the state counts as unstored (`stateIsStored`): no
    /// decision on it is stored or heard of, but for alarm operations, which are spooled (`Relay+Spool`).
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
}
