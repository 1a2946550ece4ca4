/// Replacing one part of the cache: what it holds about some users, read back from the store as a slice
/// (`RelayStore.loadSlice`), when only their part may be stale. It costs their rows, where a reload
/// (`reloaded(from:)`) reads everyone's.
///
/// Why a slice is enough: every stored entity is written with its owner among the users a write concerns, and
/// a relation between two users with both (`writeScope`). So when the writes a cache lacks (or holds and the
/// store does not) all concern only users of `users`, whatever else the cache holds is as stored, and the
/// store's rows about those users are the rest. `StoreContractTests` checks this against whole loads for every
/// kind of change, on both stores; `SliceRulesTests` that what the cache held about them goes from every side.
extension RelayState {
    /// Drops every entry that concerns one of `users` (both sides of a relation: their friends lose them too; a
    /// session, an alarm or a meeting point that names one of them, from every index), then indexes `slice`, as a
    /// load does. What is not stored is kept as `reloaded(from:)` keeps it; friend request notices are kept less
    /// those of pairs now friends after a remote change (`afterRemoteChange`), and otherwise less every pair
    /// with one of `users` (a refused or failed decision about them may have noted one).
    public mutating func replaceSlice(of users: Set<String>, with slice: StoredState, afterRemoteChange: Bool = false) {
        // Dropping and indexing again is no decision's removal.
        let recording = removedOwners
        removedOwners = nil
        let (sessionsDropped, ownersDropped, alarmsDropped) = drop(users)
        index(slice, of: users)
        removedOwners = recording

        for id in sessionsDropped where sessions[id] == nil { endedSessions.insert(id) }
        for id in alarmsDropped where alarms[id] == nil { endedAlarms.insert(id) }
        // Only an owner whose session was dropped can be left without one (not every owner offline: a cache of
        // connected users holds every active session's, and this runs at every admission).
        for owner in ownersDropped where sessionByOwner[owner] == nil { offlineOwners[owner] = nil }
        var notices = requestNotices
        if afterRemoteChange {
            notices.filter { !areFriends($0, $1) }
        } else {
            notices.filter { !users.contains($0) && !users.contains($1) }
        }
        requestNotices = notices
    }

    /// The users whose slices hold what `changes` store, in the state they were decided into: those the store's
    /// check names (`writeScope`); those whose sign-in bookkeeping they record (a token's use, a last-seen time),
    /// which no check names; and the owner of another subscription of an endpoint subscribed again, which the
    /// store removes (the rules name it in a change of its own).
    public func sliceScope(of changes: [StoreChange]) -> Set<String> {
        var users = Set(writeScope(of: changes))
        for change in changes {
            switch change {
            case let .useToken(hash, _): if let token = tokens[hash] { users.insert(token.username) }
            case let .lastSeen(username, _): users.insert(username)
            case let .savePushSubscription(subscription):
                users.formUnion(pushSubscriptions.values.filter { $0.endpoint == subscription.endpoint }.map(\.username))
            default: break
            }
        }
        return users
    }

    /// Removes what concerns `users`; returns the ids of the sessions and alarms it removed, and the sessions' owners.
    private mutating func drop(_ users: Set<String>) -> (sessions: Set<String>, owners: Set<String>, alarms: Set<String>) {
        var droppedSessions = Set<String>(), droppedOwners = Set<String>(), droppedAlarms = Set<String>()
        for user in users {
            self.users[user] = nil
            for friend in friends.removeValue(forKey: user) ?? [] { friends[friend]?.remove(user) }
            // Requests to them: those they see, and those of users they blocked (kept on the sender's side only).
            for from in (incoming.removeValue(forKey: user) ?? []).union(blocked[user] ?? []) { outgoing[from]?.remove(user) }
            for to in outgoing.removeValue(forKey: user) ?? [] { incoming[to]?.remove(user) }
            blocked[user] = nil
            contacts[user] = nil
            for hash in tokensByUser.removeValue(forKey: user) ?? [] { tokens[hash] = nil }
            for id in pushByUser.removeValue(forKey: user) ?? [] { pushSubscriptions[id] = nil }
            for id in (sessionByOwner[user].map { [$0] } ?? []) + (sessionsByInvitee[user] ?? []) {
                droppedSessions.insert(id)
                if let owner = sessions[id]?.owner { droppedOwners.insert(owner) }
                unindex(session: id)
            }
            for id in (alarmsByOwner[user] ?? []).union(alarmsByRecipient[user] ?? []) {
                droppedAlarms.insert(id)
                unindex(alarm: id)
            }
            for id in meetingsByUser[user] ?? [] { unindex(meeting: id) }
            for id in messagesByRecipient[user] ?? [] { unindex(message: id) }
            standing[user] = nil
            pauses[user] = nil
        }
        // What no index finds by user, read through every entry (each found first, then changed, so that no
        // collection is copied while it is read): blocks of them, pauses from them, lists of standing shares that
        // name them, messages they sent. One user (the usual slice) is compared, not hashed, per entry.
        let only = users.count == 1 ? users.first : nil
        func named(_ name: String) -> Bool { only.map { $0 == name } ?? users.contains(name) }
        for (blocker, list) in blocked.filter({ $0.value.contains(where: named) }) { blocked[blocker] = list.subtracting(users) }
        for (owner, list) in pauses.filter({ $0.value.keys.contains(where: named) }) {
            let kept = list.filter { !users.contains($0.key) }
            pauses[owner] = kept.isEmpty ? nil : kept
        }
        for owner in standing.filter({ $0.value.contains(where: named) }).keys { standing[owner] = nil }
        for id in messages.filter({ named($0.value.from) }).keys { unindex(message: id) }
        // The links of the sessions dropped (a link's owner is its session's).
        for session in droppedSessions {
            for id in sharesBySession[session] ?? [] { unindex(share: id) }
        }
        return (droppedSessions, droppedOwners, droppedAlarms)
    }

    /// Indexes the rows of `slice` (what concerns `users`); a whole load is indexed by this into an empty cache
    /// (`init(_ stored:)`). An entity already held is replaced whole; a link of a session that is not active is not
    /// indexed. Expired links are, so that the first `fireDue` ends them and tells their viewers, like any other
    /// deadline missed while down (ending a session removes its links in the same transaction).
    mutating func index(_ slice: StoredState, of users: Set<String>) {
        for user in slice.users { self.users[user.username] = user }
        for (a, b) in slice.friendships { link(a, b) }
        for (blocker, blockedUser) in slice.blocks { blocked[blocker, default: []].insert(blockedUser) }
        for request in slice.friendRequests {
            if !hasBlocked(request.to, request.from) { incoming[request.to, default: []].insert(request.from) }
            outgoing[request.from, default: []].insert(request.to)
        }
        for token in slice.tokens { remember(token) }
        for (owner, list) in slice.alarmContacts { contacts[owner] = list }
        for session in slice.sessions {
            unindex(session: session.id)
            index(session)
        }
        for alarm in slice.alarms {
            unindex(alarm: alarm.id)
            index(alarm)
        }
        // An endpoint is one subscription's: another account's with an endpoint of theirs is gone from the store.
        let endpoints = Set(slice.pushSubscriptions.map(\.endpoint))
        if !endpoints.isEmpty {
            for id in pushSubscriptions.filter({ endpoints.contains($0.value.endpoint) && !users.contains($0.value.username) }).keys {
                unindex(push: id)
            }
        }
        for subscription in slice.pushSubscriptions.sorted(by: { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }) {
            index(subscription)
        }
        for share in slice.shares where sessions[share.sessionId] != nil {
            unindex(share: share.id)
            index(share)
        }
        for (owner, list) in slice.standingShares where !list.isEmpty { standing[owner] = list }
        for pause in slice.pauses {
            pauses[pause.owner, default: [:]][pause.key] = pause
            noteDeadlines(of: pause.owner)
        }
        for meeting in slice.meetings {
            unindex(meeting: meeting.id)
            index(meeting)
        }
        for message in slice.messages {
            unindex(message: message.id)
            index(message)
        }
    }
}
