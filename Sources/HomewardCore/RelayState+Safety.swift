import HomewardProtocol

/// The safety extensions: the relay watching over a walk when the walker's phone cannot.
///
/// Every schedule is data in the sessions and alarms (and so survives a restart); `fireDue`
/// does whatever is due at a given time, and `nextDeadline` says when to call it next.
extension RelayState {
    public mutating func checkIn(_ actor: String, _ id: String, checkInBy: Int64?) throws(RelayError) -> Outcome {
        guard var session = sessions[id] else { throw .notFound("no active session \(id)") }
        guard session.owner == actor else { throw .forbidden("only the owner can check in") }
        session.checkInBy = checkInBy
        sessions[id] = session
        noteDeadlines(of: session.owner)
        var outcome = Outcome()
        outcome.changes.append(.saveSession(session))
        outcome.reply = SessionReply(session: session.info(owner: profile(actor))).fields
        return outcome
    }

    /// The destination of `owner`'s active session, for the position path to test against.
    public func destination(of owner: String) -> (sessionId: String, destination: Destination)? {
        guard let session = ownSession(of: owner), let destination = session.destination else { return nil }
        return (session.id, destination)
    }

    /// A position of the owner fell inside the destination of session `id`.
    public mutating func arrive(_ id: String, now: Int64) -> Outcome {
        guard sessions[id]?.destination != nil else { return Outcome() }
        return finishSession(id, reason: "arrived", now: now)
    }

    /// Returns whether `owner` has a session, whose lost-contact deadline now counts from `time`.
    @discardableResult
    public mutating func ownerWentOffline(_ owner: String, at time: Int64) -> Bool {
        guard sessionByOwner[owner] != nil else { return false }
        offlineOwners[owner] = time
        noteDeadlines(of: owner)
        return true
    }

    /// When `owner`'s session loses contact, if it is counting towards that (`nextDeadline(in:)` counts it too).
    public func lostContactDeadline(of owner: String) -> Int64? {
        guard let id = sessionByOwner[owner], let session = sessions[id], session.lostSince == nil,
              let since = offlineOwners[owner] else { return nil }
        return since + safety.lostContactGrace
    }

    /// The owner is connected to another relay (which tells observers if contact was lost and is back).
    public mutating func ownerIsOnlineElsewhere(_ owner: String) {
        offlineOwners[owner] = nil
    }

    /// The owner is connected again: observers who were told contact was lost hear it is back.
    public mutating func ownerCameBack(_ owner: String) -> Outcome {
        offlineOwners[owner] = nil
        var outcome = Outcome()
        guard let id = sessionByOwner[owner], var session = sessions[id], session.lostSince != nil else { return outcome }
        session.lostSince = nil
        sessions[id] = session
        noteDeadlines(of: session.owner)
        outcome.changes.append(.saveSession(session))
        outcome.send(.sessionResumed(sessionId: id), to: session.observers + viewerKeys(ofSession: id))
        return outcome
    }

    /// The earliest time anything in `shards` is scheduled, if anything is. Each deadline belongs to one
    /// user's shard (`TimerShards`): a session's deadlines (expiry, check-in, lost contact) and its links'
    /// expiry to its owner, an alarm's repeats to its owner, a pause's end to its owner, a meeting's expiry
    /// to its proposer.
    public func nextDeadline(in shards: TimerShards = .all) -> Int64? {
        var next: Int64?
        func consider(_ time: Int64?) {
            if let time, time < next ?? .max { next = time }
        }
        for session in sessions.values where shards.owns(session.owner) {
            consider(session.expiresAt)
            consider(session.checkInBy)
            if session.lostSince == nil, let since = offlineOwners[session.owner] { consider(since + safety.lostContactGrace) }
        }
        for alarm in alarms.values where shards.owns(alarm.owner) { consider(alarm.nextRepeatAt) }
        for share in shares.values where shards.owns(share.owner) { consider(share.expiresAt) }
        consider(nextPauseEnd(in: shards))
        consider(nextMeetingExpiry(in: shards))
        return next
    }

    /// The earliest time anything in `shards` that `slice` holds is scheduled, as the cache holds it now (after an
    /// admission of `slice`): what an admission may bring due before the timer, read in the slice's entities, not
    /// in every one the cache holds (`nextDeadline(in:)`).
    public func nextDeadline(in shards: TimerShards, among slice: StoredState) -> Int64? {
        var next: Int64?
        func consider(_ time: Int64?) {
            if let time, time < next ?? .max { next = time }
        }
        for stored in slice.sessions {
            guard let session = sessions[stored.id], shards.owns(session.owner) else { continue }
            consider(session.expiresAt)
            consider(session.checkInBy)
            if session.lostSince == nil, let since = offlineOwners[session.owner] { consider(since + safety.lostContactGrace) }
        }
        for stored in slice.alarms {
            if let alarm = alarms[stored.id], shards.owns(alarm.owner) { consider(alarm.nextRepeatAt) }
        }
        for stored in slice.shares {
            if let share = shares[stored.id], shards.owns(share.owner) { consider(share.expiresAt) }
        }
        for stored in slice.pauses where shards.owns(stored.owner) { consider(pauses[stored.owner]?[stored.key]?.until) }
        for stored in slice.meetings {
            if let meeting = meetings[stored.id], shards.owns(meeting.owner) { consider(meeting.expiresAt) }
        }
        return next
    }

    /// Does everything in `shards` due at `now`: expiries, missed check-ins, lost contact, alarm repeats
    /// (attributed as in `nextDeadline(in:)`); given `owners`, only theirs (one batch of a storm, `ownersDue(at:shards:)`).
    public mutating func fireDue(now: Int64, presence: some PresenceView, shards: TimerShards = .all,
                                 owners: Set<String>? = nil) -> Outcome {
        let due = DueOwners(shards: shards, only: owners)
        let candidates = dueCandidates(due)
        var outcome = expireShares(candidates.shares, now: now, in: due)
        outcome.merge(expirePauses(of: candidates.pauseOwners, now: now, in: due))
        outcome.merge(expireMeetings(candidates.meetings, now: now, in: due))
        // Chosen, then sorted: a batch's owners sort their own sessions, not every session's id.
        for id in candidates.sessions.filter({ due.owns($0.owner) }).map(\.id).sorted() {
            guard let session = sessions[id] else { continue }
            if let expiry = session.expiresAt, expiry <= now {
                outcome.merge(finishSession(id, reason: "expired", now: now))
                continue
            }
            if let deadline = session.checkInBy, deadline <= now {
                outcome.merge(missedCheckIn(id, deadline: deadline, now: now, presence: presence))
            }
            if session.lostSince == nil, let since = offlineOwners[session.owner], since + safety.lostContactGrace <= now {
                outcome.merge(lostContact(id, since: since, presence: presence))
            }
        }
        for id in candidates.alarms.filter({ due.owns($0.owner) }).map(\.id).sorted() {
            guard let alarm = alarms[id] else { continue }
            if let repeatAt = alarm.nextRepeatAt, repeatAt <= now { outcome.merge(repeatAlarm(id, now: now, presence: presence)) }
        }
        return outcome
    }

    private mutating func missedCheckIn(_ id: String, deadline: Int64, now: Int64, presence: some PresenceView) -> Outcome {
        guard var session = sessions[id] else { return Outcome() }
        // Cleared first, so each missed deadline raises exactly one alarm.
        session.checkInBy = nil
        sessions[id] = session
        noteDeadlines(of: session.owner)
        var outcome = Outcome()
        outcome.changes.append(.saveSession(session))
        var recipients = session.observers
        for contact in contacts[session.owner] ?? [] where !recipients.contains(contact) { recipients.append(contact) }
        if recipients.isEmpty { recipients = friends(of: session.owner) }
        let text = "\(profile(session.owner).name) missed their check-in"
        if let raised = try? raiseAlarm(session.owner, Request.AlarmRaise(text: text), presence: presence, now: now,
                                         auto: true, recipients: recipients) {
            outcome.merge(raised)
        }
        outcome.reply = []
        return outcome
    }

    private mutating func lostContact(_ id: String, since: Int64, presence: some PresenceView) -> Outcome {
        guard var session = sessions[id] else { return Outcome() }
        session.lostSince = since
        sessions[id] = session
        noteDeadlines(of: session.owner)
        var outcome = Outcome()
        outcome.changes.append(.saveSession(session))
        let recipients = session.observers + viewerKeys(ofSession: id)
        outcome.send(.sessionLost(sessionId: id, lastPosition: visibleLastPosition(of: session.owner, to: recipients, presence: presence),
                                  since: presence.lastSeen(session.owner) ?? since), to: recipients)
        return outcome
    }

    private mutating func repeatAlarm(_ id: String, now: Int64, presence: some PresenceView) -> Outcome {
        guard var alarm = alarms[id] else { return Outcome() }
        var outcome = Outcome()
        guard alarm.acked.isEmpty, alarm.repeats < safety.alarmRepeatMax else {
            alarm.nextRepeatAt = nil
            alarms[id] = alarm
            noteDeadlines(of: alarm.owner)
            outcome.changes.append(.saveAlarm(alarm))
            return outcome
        }
        alarm.repeats += 1
        // After downtime the schedule restarts from now rather than firing every missed repeat at once.
        alarm.nextRepeatAt = alarm.repeats < safety.alarmRepeatMax ? now + safety.alarmRepeatInterval : nil
        alarms[id] = alarm
        noteDeadlines(of: alarm.owner)
        outcome.changes.append(.saveAlarm(alarm))
        outcome.send(.alarm(alarm.info(owner: profile(alarm.owner)), repeat: alarm.repeats),
                     to: alarm.recipients.filter { presence.isOnline($0) })
        outcome.send(.alarm(alarm.viewerInfo(owner: profile(alarm.owner)), repeat: alarm.repeats), to: viewerKeys(of: alarm))
        return outcome
    }
}

extension Outcome {
    mutating func merge(_ other: Outcome) {
        events.append(contentsOf: other.events)
        changes.append(contentsOf: other.changes)
        audienceChanged.formUnion(other.audienceChanged)
        raisedAlarms.append(contentsOf: other.raisedAlarms)
        closeViewers.append(contentsOf: other.closeViewers)
    }
}
