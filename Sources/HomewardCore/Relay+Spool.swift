import Dispatch
import HomewardProtocol

/// An alarm gets through when storage fails.
///
/// Everything else is stored before anyone hears of it, and fails with `internal` when the store fails. A
/// panic alarm, its acknowledgements and its cancellation instead go out at once when the store fails (a
/// write error or timeout, or the relay already knows the store is down): the relay appends the operation's
/// alarm changes to its `AlarmSpool` (fsync'd), then replies and delivers as usual, by WebSocket, Web Push
/// and webhook, marked `"stored": false`. Memory keeps the spooled changes meanwhile, so acknowledgements
/// and cancellations of such an alarm are decided on it. When the store answers again (the next read-back
/// of `reloadFromStore`, and at start after a crash), the spooled changes are applied to the state read back
/// and stored in one write, then the spool is emptied; storing them again changes nothing (by alarm id), so a
/// crash in between loses and duplicates nothing. Recipients who were offline then find the alarm in their
/// backlog at sign-in, as for any stored alarm.
///
/// On a relay alone an alarm operation's write goes to the store with its batch (group commit, `Relay+Writes`),
/// after it was decided: when that batch fails, the operation is spooled then, and heard unstored instead of
/// failing (`AlarmWrite.staged`).
///
/// Hooks in `Relay.swift`, each marked "alarm spool": `persistOrSpool` in place of `persistWithPushes` for
/// alarm requests, the answer to a lost batch's alarm operation in `serveSignedIn`, `replaySpool` after a
/// read-back, `loadSpool` at start, and the mailbox's storage guard letting alarm requests through while the
/// store is down.
extension Relay {
    /// Stores an alarm operation's outcome with its pushes (`persistWithPushes`), or, when that fails for any
    /// reason, or the store is known to be down, spools it and sends its pushes at once (`spoolAndSend`). On a relay alone the
    /// outcome is staged for the next batch, whose failure comes later: what goes out then is returned
    /// (`.staged`). Without a spool, or for anything but an alarm operation, the store's failure stands.
    func persistOrSpool(_ outcome: inout Outcome, request: Request, now: Int64) async throws(RelayError) -> AlarmWrite {
        guard spool != nil, request.spoolsWhenStorageFails, !outcome.changes.isEmpty else {
            try await persistWithPushes(&outcome, now: now)
            return .persisted
        }
        if !writes.unstored {
            let decided = outcome
            do {
                try await persistWithPushes(&outcome, now: now)
                guard let ifLost = unstoredAlarm(decided, now: now) else { return .persisted }
                return .staged(ifLost: ifLost)
            } catch {
                outcome = decided
            }
        }
        guard let alarm = unstoredAlarm(outcome, now: now) else { throw Self.storageUnavailable }
        try await spoolAndSend(alarm)
        outcome = alarm.outcome
        return .spooled
    }

    /// The outcome as it goes out unstored: marked `"stored": false`, with the spool's record and the pushes
    /// to send from memory (planned for the marked events). Nil when the outcome holds more than an alarm's
    /// changes: it is not spooled, and fails like any write.
    private func unstoredAlarm(_ decided: Outcome, now: Int64) -> UnstoredAlarm? {
        var outcome = decided
        outcome.markNotStored()
        let pushes = planner.plan(outcome, state: state, presence: presence, now: now)
        guard let record = SpooledAlarms.spooledPart(of: outcome.changes + pushes) else { return nil }
        let entries = pushes.compactMap { change -> OutboxEntry? in
            if case .enqueueOutbox(let entry) = change { return entry }
            return nil
        }
        return UnstoredAlarm(outcome: outcome, record: record, pushes: entries)
    }

    /// Appends the alarm's changes to the spool (fsync'd) and keeps them in memory until the store takes them,
    /// then hands its pushes and webhook calls to the push side. Throws when the spool cannot be written
    /// either: the alarm is refused then.
    func spoolAndSend(_ alarm: UnstoredAlarm) async throws(RelayError) {
        guard let spool else { throw Self.storageUnavailable }
        do {
            try await spool.append(alarm.record)
        } catch {
            logger.critical("the alarm spool cannot be written either: the alarm is refused", metadata: ["error": "\(error)"])
            throw .storage("\(error)")
        }
        spooled.append(alarm.record)
        markUnstored()
        counters.alarmsSpooled.record(spooled.alarmCount)
        logger.warning("alarm delivered while storage fails; spooled until the store takes it",
                       metadata: ["alarm": "\(alarm.record.compactMap(\.spooledAlarmId).joined(separator: ","))"])
        if !alarm.pushes.isEmpty { push.sendUnstored(alarm.pushes) }
    }

    /// After a successful read-back (`reloadFromStore`): the spooled changes are stored in one write, then the
    /// spool is emptied, and the caller reads the state back again (the store's truth, with them: an alarm the
    /// spool saves again after it ended stays ended). Returns whether that worked. When the write fails, the
    /// changes go back onto the state just read (an acknowledgement of such an alarm is decided on memory),
    /// the relay counts as unstored (`persist`), and the next read-back tries again.
    func replaySpool() async -> Bool {
        guard !spooled.isEmpty, let spool else { return true }
        let changes = spooled.changes
        do {
            try await persist(changes)
            // A relay alone stages them: stored once the journal has written them.
            try await writesSettled()
        } catch {
            logger.warning("spooled alarms not stored yet; trying again shortly", metadata: ["error": "\(error)"])
            putSpooledInMemory()
            return false
        }
        let alarms = spooled.alarmCount
        spooled.removeAll()
        counters.alarmsSpooled.record(0)
        do {
            try await spool.removeAll()
        } catch {
            // Stored already: storing them again at the next start changes nothing.
            logger.error("spooled alarms stored, but the spool cannot be emptied", metadata: ["error": "\(error)"])
        }
        logger.notice("spooled alarms stored", metadata: ["alarms": "\(alarms)"])
        return true
    }

    /// The spooled changes applied to the state, as if stored: a state read back from the store lacks them, and
    /// counts the alarms it lacks as ended elsewhere (`RelayState.reloaded`), which these are not.
    private func putSpooledInMemory() {
        for record in spooled.records {
            for id in record.compactMap(\.spooledAlarmId) { state.endedAlarms.remove(id) }
        }
        syncPresence(owners: state.apply(spooled.changes))
    }

    /// At start: what the spool holds (a crash while the store was down) is put back in memory and stored at
    /// the first read-back, right after start.
    func loadSpool() async throws {
        guard let spool else { return }
        let contents = try await spool.records()
        if contents.skipped > 0 {
            logger.warning("alarm spool: records that cannot be read (a write cut short by a crash) are skipped",
                           metadata: ["skipped": "\(contents.skipped)", "kept": "\(contents.records.count)"])
        }
        guard !contents.records.isEmpty else { return }
        for record in contents.records { spooled.append(record) }
        putSpooledInMemory()
        counters.alarmsSpooled.record(spooled.alarmCount)
        markUnstored()
        logger.warning("alarm spool holds alarms not stored yet; storing them", metadata: ["alarms": "\(spooled.alarmCount)"])
    }

    /// Memory holds what the store lacks: the next operation reads back (and replays the spool).
    private func markUnstored() {
        if writes.markUnstored() { submit(.fireDue(then: nil)) }
    }

    /// Whether a request may run although storage is known to be down: a signed-in alarm operation with a
    /// spool to fall back on. It then waits for no read-back (each costs up to a store timeout while the store
    /// is down): it is spooled at once.
    func servesWhileUnstored(_ request: Request, auth: Authentication?) -> Bool {
        writes.unstored && spool != nil && auth != nil && request.spoolsWhenStorageFails
    }
}
