import HomewardProtocol

/// Friends' map (issue 15), part one: standing shares and pauses. Both only change who is in an
/// owner's audience (`audience(of:)`), so positions keep taking the one-lock fan-out of the
/// presence table, encoded once; nothing here runs per position.
extension RelayState {
    /// `share.always`: with `with`, replaces the friends who receive the caller's positions at all times
    /// (empty stops); without, reads it. Friends added hear `friend.sharing true`, those dropped `false`.
    public mutating func shareAlways(_ actor: String, with chosen: [String]?) throws(RelayError) -> Outcome {
        var outcome = Outcome()
        if let chosen {
            for name in chosen {
                guard name != actor else { throw .invalid("you cannot share with yourself") }
                try requireUser(name)
                guard areFriends(actor, name) else { throw .forbidden("\(name) is not your friend") }
            }
            let before = standing[actor] ?? []
            guard before != chosen else { return sharingReply(actor, into: outcome) }
            noteRemoved(.standing(actor), members: before)
            standing[actor] = chosen.isEmpty ? nil : chosen
            outcome.changes.append(.setStandingShare(owner: actor, chosen))
            outcome.audienceChanged.insert(actor)
            outcome.send(.friendSharing(username: actor, sharing: true), to: chosen.filter { !before.contains($0) })
            outcome.send(.friendSharing(username: actor, sharing: false), to: before.filter { !chosen.contains($0) })
        }
        return sharingReply(actor, into: outcome)
    }

    /// `friend.location`: the friend's last position and its age, when they share with the caller at all
    /// times and have not paused for them. Otherwise `forbidden`, the same answer whether they do not
    /// share, paused, or are not a friend (so a pause cannot be told apart from not sharing); `not_found`
    /// only for a username nobody has. `hiddenElsewhere`: the friend's relay says a pause hides them from
    /// the caller (one this cache may not have yet: `Relay.fetchLastPosition`).
    public func friendLocation(_ actor: String, _ friend: String, presence: some PresenceView, now: Int64,
                               hiddenElsewhere: Bool = false) throws(RelayError) -> Outcome {
        guard actor != friend else { throw .invalid("ask for a friend's location, not your own") }
        try requireUser(friend)
        guard areFriends(actor, friend), standing[friend]?.contains(actor) == true, !hiddenElsewhere, !isHidden(friend, from: actor) else {
            throw .forbidden("\(friend) does not share their location with you")
        }
        // Never one sent while paused from the caller, even when that pause has ended since.
        let position = presence.lastPosition(of: friend, shownTo: [actor])
        var outcome = Outcome()
        outcome.reply = FriendLocationReply(username: friend, position: position, age: position.map { max(0, now - $0.ts) }).fields
        return outcome
    }

    /// `location.pause`: nobody (`from` nil) or that friend gets the caller's positions until `until` or
    /// `location.resume`; pausing again replaces the end. Alarm recipients are not affected.
    public mutating func pauseLocation(_ actor: String, from: String?, until: Int64?) throws(RelayError) -> Outcome {
        if let from {
            guard from != actor else { throw .invalid("you cannot pause for yourself") }
            try requireUser(from)
            guard areFriends(actor, from) else { throw .forbidden("\(from) is not your friend") }
        }
        let pause = LocationPause(owner: actor, from: from, until: until)
        pauses[actor, default: [:]][pause.key] = pause
        noteDeadlines(of: actor)
        var outcome = Outcome()
        outcome.changes.append(.savePause(pause))
        outcome.audienceChanged.insert(actor)
        return sharingReply(actor, into: outcome)
    }

    /// `location.resume`: ends the pause from everyone (`from` nil) or from that friend; none is not an error.
    public mutating func resumeLocation(_ actor: String, from: String?) throws(RelayError) -> Outcome {
        if let from { try requireUser(from) }
        var outcome = Outcome()
        endPause(actor, key: from ?? LocationPause.everyone, into: &outcome)
        return sharingReply(actor, into: outcome)
    }

    /// Whether `viewer` must not get `owner`'s positions because of a pause (alarms aside).
    public func isHidden(_ owner: String, from viewer: String) -> Bool {
        guard let paused = pauses[owner] else { return false }
        return paused[LocationPause.everyone] != nil || paused[viewer] != nil
    }

    /// Whether anyone, on any relay, may receive `owner`'s positions: an owner (`isOwner`) not paused for
    /// everyone. On a shared bus their relay publishes only then (alarm recipients are in the audience and
    /// count anyway): another relay may not have applied the pause yet when a position right after it arrives.
    public func mayBeReceived(_ owner: String) -> Bool {
        isOwner(owner) && pauses[owner]?[LocationPause.everyone] == nil
    }

    public func hasPauses(_ owner: String) -> Bool { !(pauses[owner]?.isEmpty ?? true) }

    /// For an owner with pauses, whom their positions may reach on other relays, which may not have applied
    /// a pause yet (or still apply one that ended): nil without pauses. Paused for everyone: only their
    /// alarm recipients; else all but the friends paused for who are not alarm recipients.
    public func positionRestriction(of owner: String) -> PositionRestriction? {
        guard let paused = pauses[owner], !paused.isEmpty else { return nil }
        let alarmRecipients = Set((alarmsByOwner[owner] ?? []).compactMap { alarms[$0] }.flatMap(\.recipients))
        if paused[LocationPause.everyone] != nil { return .only(alarmRecipients) }
        let hidden = Set(paused.keys).subtracting(alarmRecipients)
        return hidden.isEmpty ? nil : .allBut(hidden)
    }

    /// The last position that `session.lost` may carry to `recipients` (observers and viewers): none while
    /// the owner has any pause (one event goes to all of them, so it must suit the most hidden one), and
    /// never one a pause hid from any of them when it was sent.
    func visibleLastPosition(of owner: String, to recipients: [String], presence: some PresenceView) -> Position? {
        hasPauses(owner) ? nil : presence.lastPosition(of: owner, shownTo: recipients)
    }

    /// Users whose pauses the presence table must know (to restrict their positions and record them so),
    /// owners or not.
    public var pausedUsers: Set<String> { Set(pauses.keys) }

    /// The positions audience before alarms: observers, viewers and standing-share friends, less those a
    /// pause hides from unless `ignoringPauses` (viewers have no username: only a pause from everyone
    /// hides from them).
    func sharingAudience(of owner: String, ignoringPauses: Bool = false) -> Set<String> {
        var audience = Set(standing[owner] ?? [])
        if let id = sessionByOwner[owner], let session = sessions[id] {
            audience.formUnion(session.observers)
            audience.formUnion(viewerKeys(ofSession: id))
        }
        guard !ignoringPauses, let paused = pauses[owner], !paused.isEmpty else { return audience }
        if paused[LocationPause.everyone] != nil { return [] }
        return audience.subtracting(paused.keys)
    }

    /// Pauses of `owners` (`dueCandidates`) that `due` fires whose end has come: each ends, and its owner hears `location.resumed`.
    mutating func expirePauses(of owners: [String], now: Int64, in due: DueOwners) -> Outcome {
        var outcome = Outcome()
        for owner in owners.sorted() where due.owns(owner) {
            for pause in (pauses[owner] ?? [:]).values.sorted(by: { $0.key < $1.key }) where (pause.until ?? .max) <= now {
                endPause(owner, key: pause.key, into: &outcome)
                outcome.send(.locationResumed(from: pause.from), to: owner)
            }
        }
        return outcome
    }

    /// The earliest end of a pause of an owner in `shards`.
    func nextPauseEnd(in shards: TimerShards) -> Int64? {
        pauses.filter { shards.owns($0.key) }.values.flatMap(\.values).compactMap(\.until).min()
    }

    /// A friendship between `a` and `b` ended: neither shares with the other at all times any more, and
    /// their pauses for each other are moot.
    mutating func endLocationSharing(_ a: String, _ b: String, into outcome: inout Outcome) {
        for (owner, other) in [(a, b), (b, a)] {
            if var chosen = standing[owner], chosen.contains(other) {
                noteRemoved(.standing(owner), members: [other])
                chosen.removeAll { $0 == other }
                standing[owner] = chosen.isEmpty ? nil : chosen
                outcome.changes.append(.setStandingShare(owner: owner, chosen))
                outcome.audienceChanged.insert(owner)
            }
            endPause(owner, key: other, into: &outcome)
        }
    }

    private mutating func endPause(_ owner: String, key: String, into outcome: inout Outcome) {
        guard pauses[owner]?.removeValue(forKey: key) != nil else { return }
        if pauses[owner]?.isEmpty == true { pauses[owner] = nil }
        outcome.changes.append(.removePause(owner: owner, from: key.isEmpty ? nil : key))
        outcome.audienceChanged.insert(owner)
    }

    private func sharingReply(_ actor: String, into outcome: Outcome) -> Outcome {
        var outcome = outcome
        // Oldest alarm first, whatever order the set of ids was built in.
        let alarmRecipients = (alarmsByOwner[actor] ?? []).compactMap { alarms[$0] }
            .sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }.flatMap(\.recipients)
        let paused = (pauses[actor] ?? [:]).values.sorted { $0.key < $1.key }.map(\.info)
        outcome.reply = LocationSharingReply(
            with: standing[actor] ?? [], pauses: paused,
            alarmRecipients: alarmRecipients.isEmpty ? nil : StoreChange.unique(alarmRecipients)).fields
        return outcome
    }
}
