import HomewardProtocol

/// Applying another relay's committed changes to this cache (change notices carry them), so that
/// a commit elsewhere costs this relay the change itself, not a reload of everything.
///
/// The rule for every case: the state after `apply` is the state `reloaded(from:)` would build from the
/// store right after that change was stored (up to empty index entries, which mean the same as none), so
/// each case mirrors its statements in `StoreChange+Statements` (what a change replaces, what it keeps, what it ignores)
/// and the filters of `RelayState.init(_ stored:)` (a share link of a session that is gone is not indexed).
/// `RelayDeltaTests` checks this against the SQLite store for the commits of every request.
extension RelayState {
    /// Applies one commit's changes in order; returns the users whose audience, pauses or destination may
    /// have changed (for `Relay.syncPresence`).
    @discardableResult
    public mutating func apply(_ changes: [StoreChange]) -> Set<String> {
        var touched = Set<String>()
        var linkedSessions = Set<String>()
        for change in changes {
            touched.formUnion(apply(change))
            if case .saveShare(let share) = change { linkedSessions.insert(share.sessionId) }
            if case .endSession(let id, _, _) = change { linkedSessions.insert(id) }
        }
        // As at a load: a link whose session is not active is not indexed (the session may come later in
        // the same commit, so this is checked once the whole commit is in).
        for sessionId in linkedSessions where sessions[sessionId] == nil {
            for id in sharesBySession[sessionId] ?? [] { unindex(share: id) }
        }
        for name in touched where sessionByOwner[name] == nil { offlineOwners[name] = nil }
        return touched
    }

    /// Applies one change; returns the users it may concern (see `apply(_:)`), read before it is applied.
    private mutating func apply(_ change: StoreChange) -> [String] {
        switch change {
        case let .createUser(profile, _, _):
            users[profile.username] = profile
        case let .createToken(hash, username, at):
            remember(IssuedToken(hash: hash, username: username, createdAt: at, lastUsed: at))
        case let .revokeToken(hash):
            if let token = tokens.removeValue(forKey: hash) {
                tokensByUser[token.username]?.remove(hash)
                noteRemoved(.token(hash), token.username)
            }
        case let .useToken(hash, at):
            tokens[hash]?.lastUsed = at
        case let .addFriendRequest(from, to, _):
            outgoing[from, default: []].insert(to)
            if !hasBlocked(to, from) { incoming[to, default: []].insert(from) }
        case let .removeFriendRequest(from, to):
            outgoing[from]?.remove(to)
            incoming[to]?.remove(from)
        case let .addFriendship(a, b, _):
            link(a, b)
            // Another relay's accept clears the pair, as a reload after it does.
            requestNotices.forget(a, b)
            return [a, b]
        case let .removeFriendship(a, b):
            friends[a]?.remove(b)
            friends[b]?.remove(a)
            return [a, b]
        case let .addBlock(blocker, blockedUser, _):
            blocked[blocker, default: []].insert(blockedUser)
            incoming[blocker]?.remove(blockedUser)
            return [blocker, blockedUser]
        case let .removeBlock(blocker, blockedUser):
            blocked[blocker]?.remove(blockedUser)
            if outgoing[blockedUser]?.contains(blocker) == true { incoming[blocker, default: []].insert(blockedUser) }
            return [blocker, blockedUser]
        case let .setAlarmContacts(owner, list):
            let unique = StoreChange.unique(list)
            contacts[owner] = unique.isEmpty ? nil : unique
        case let .saveSession(session):
            // Saving an ended session leaves it ended in the store.
            guard !endedSessions.contains(session.id) else { break }
            let before = sessions[session.id]?.owner
            unindex(session: session.id)
            index(session)
            return [session.owner] + (before.map { [$0] } ?? [])
        case let .endSession(id, _, _):
            endedSessions.insert(id)
            let owner = sessions[id]?.owner
            unindex(session: id)
            return owner.map { [$0] } ?? []
        case let .saveAlarm(alarm):
            guard !endedAlarms.contains(alarm.id) else { break }
            let before = alarms[alarm.id]?.owner
            unindex(alarm: alarm.id)
            index(alarm.asStored)
            return [alarm.owner] + (before.map { [$0] } ?? [])
        case let .endAlarm(id, _, _):
            endedAlarms.insert(id)
            let owner = alarms[id]?.owner
            unindex(alarm: id)
            return owner.map { [$0] } ?? []
        case .lastSeen, .enqueueOutbox, .cancelAlarmPushes:
            // Not held in the cache (last-seen times live in the presence table; the outbox is read by the
            // delivery worker).
            break
        case let .savePushSubscription(subscription):
            // As the store does: the endpoint's other subscription (another account's) goes.
            for other in pushSubscriptions.values where other.endpoint == subscription.endpoint { unindex(push: other.id) }
            unindex(push: subscription.id)
            indexInLoadOrder(subscription)
        case let .deletePushSubscription(id):
            unindex(push: id)
        case let .saveShare(share):
            index(share)
            return [share.owner]
        case let .removeShare(id):
            return unindex(share: id).map { [$0.owner] } ?? []
        case let .setStandingShare(owner, list):
            let unique = StoreChange.unique(list)
            noteRemoved(.standing(owner), members: standing[owner] ?? [])
            standing[owner] = unique.isEmpty ? nil : unique
            return [owner]
        case let .savePause(pause):
            pauses[pause.owner, default: [:]][pause.key] = pause
            noteDeadlines(of: pause.owner)
            return [pause.owner]
        case let .removePause(owner, from):
            pauses[owner]?[from ?? LocationPause.everyone] = nil
            if pauses[owner]?.isEmpty == true { pauses[owner] = nil }
            return [owner]
        case let .saveMeeting(meeting):
            // The meeting's own row is written once (`ON CONFLICT DO NOTHING`); its invitees are replaced.
            var stored = meetings[meeting.id] ?? meeting
            stored.invitees = meeting.invitees
            unindex(meeting: meeting.id)
            index(stored)
        case let .removeMeeting(id):
            unindex(meeting: id)
        case let .saveMessage(message):
            // A message is written once; saving it again changes only when it was delivered.
            var stored = messages[message.id] ?? message
            stored.deliveredAt = message.deliveredAt
            unindex(message: message.id)
            index(stored)
        case let .removeMessage(id):
            unindex(message: id)
        }
        return []
    }

    /// A push subscription where a load puts it: each user's in the order of (created, id).
    private mutating func indexInLoadOrder(_ subscription: PushSubscription) {
        pushSubscriptions[subscription.id] = subscription
        let all = pushSubscriptions
        func key(_ id: String) -> (Int64, String) { (all[id]?.createdAt ?? .max, id) }
        var ids = pushByUser[subscription.username] ?? []
        let at = ids.firstIndex { key($0) > key(subscription.id) } ?? ids.endIndex
        ids.insert(subscription.id, at: at)
        pushByUser[subscription.username] = ids
    }

    mutating func unindex(meeting id: String) {
        guard let meeting = meetings.removeValue(forKey: id) else { return }
        noteRemoved(.meeting(id), meeting.owner)
        noteRemoved(.meeting(id), members: meeting.invitees.map(\.username))
        for name in [meeting.owner] + meeting.invitees.map(\.username) { meetingsByUser[name]?.remove(id) }
    }

    /// This relay's own write: its own ends of sessions and alarms are remembered as the others' are
    /// (`RecentlyEnded`).
    mutating func noteOwnWrite(changes: [StoreChange]) {
        for change in changes {
            if case .endSession(let id, _, _) = change { endedSessions.insert(id) }
            if case .endAlarm(let id, _, _) = change { endedAlarms.insert(id) }
        }
    }
}

extension StoreChange {
    /// Whether another relay's cache holds what this change stores (outbox entries are read from the
    /// store by the delivery worker only; last-seen times travel in presence digests).
    public var isCached: Bool {
        switch self {
        case .enqueueOutbox, .cancelAlarmPushes, .lastSeen: false
        default: true
        }
    }
}

extension Alarm {
    /// The alarm as a store gives it back (`Alarm.storedRecipients`): each recipient once, and
    /// acknowledgements and delivery times of recipients only.
    var asStored: Alarm {
        let rows = storedRecipients(now: 0)
        var alarm = Alarm(id: id, owner: owner, text: text, position: position, createdAt: createdAt, auto: auto,
                          recipients: rows.map(\.username))
        alarm.restore(acked: rows.compactMap { row in row.ackOrder.map { ($0, row.username) } }.sorted { $0.0 < $1.0 }.map(\.1))
        alarm.deliveredAt = Dictionary(uniqueKeysWithValues: rows.compactMap { row in row.deliveredAt.map { (row.username, $0) } })
        alarm.repeats = repeats
        alarm.nextRepeatAt = nextRepeatAt
        return alarm
    }
}
