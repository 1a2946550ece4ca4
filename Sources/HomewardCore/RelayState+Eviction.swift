/// Letting go of residents (`CacheMode.connected`): the reverse of `admit`.
///
/// What eviction keeps, precisely: after `evict(users)` the cache holds what a cache of connected users that started
/// now (`StoredState.active()`) and admitted the remaining residents would hold. A row about an evicted user stays
/// when it is in a remaining resident's slice (`StoredState.slice(of:)`: a friendship, request, block or message with
/// them, a list of standing shares that names them, a pause from them) or when a start loads it (every active
/// session, alarm and share link, every meeting point and every pause with an end: the timers fire on them whoever is
/// resident). Everything else about them goes: their profile, tokens, alarm contacts, push subscriptions, relations
/// with non-residents, open-ended pauses and lists of standing shares that name no resident. So the invariant holds
/// unchanged: every remaining resident's part is whole and current (nothing of it was touched), and what is left of
/// the evicted users is partial, as for anyone not resident, and no rule reads it as complete: a rule that names
/// them again admits them again (`usersNeeded`), one slice read.
///
/// What is not stored stays: the friend request notices (so that a request repeated after a re-admission rings no
/// sooner than on a whole cache), which owners are offline since when, the throttles.
extension RelayState {
    /// Evicts those of `users` that are resident (see above); does nothing in a whole cache. Costs the evicted users'
    /// part, plus one pass over the blocks, the lists of standing shares, the pauses and the messages (no index finds
    /// those by the other side), so the relay evicts in batches.
    public mutating func evict(_ users: Set<String>) {
        guard var remaining = resident else { return }
        let leaving = users.intersection(remaining)
        guard !leaving.isEmpty else { return }
        remaining.subtract(leaving)
        resident = remaining
        // Dropping is no decision's removal.
        let recording = removedOwners
        removedOwners = nil
        defer { removedOwners = recording }
        let kept = remaining

        for user in leaving {
            self.users[user] = nil
            contacts[user] = nil
            for hash in tokensByUser.removeValue(forKey: user) ?? [] { tokens[hash] = nil }
            for id in pushByUser[user] ?? [] { unindex(push: id) }
            pushByUser[user] = nil
            if let list = friends[user] {
                for friend in list where !kept.contains(friend) { Self.remove(user, from: &friends, at: friend) }
                let stay = list.intersection(kept)
                friends[user] = stay.isEmpty ? nil : stay
            }
            // Requests both ways: one with a resident is in their slice. Those from users they blocked are kept on the
            // sender's side only.
            for from in (incoming[user] ?? []).union(blocked[user] ?? []) where !kept.contains(from) {
                Self.remove(user, from: &outgoing, at: from)
            }
            if let list = incoming[user] {
                let stay = list.intersection(kept)
                incoming[user] = stay.isEmpty ? nil : stay
            }
            if let list = outgoing[user] {
                for to in list where !kept.contains(to) { Self.remove(user, from: &incoming, at: to) }
                let stay = list.intersection(kept)
                outgoing[user] = stay.isEmpty ? nil : stay
            }
            if let list = messagesByRecipient[user] {
                for id in list where !(messages[id].map { kept.contains($0.from) } ?? false) { unindex(message: id) }
                if messagesByRecipient[user]?.isEmpty == true { messagesByRecipient[user] = nil }
            }
        }
        // What no index finds by the other side, one pass each for the whole batch (each found first, then changed, so
        // that no collection is copied while it is read).
        let only = leaving.count == 1 ? leaving.first : nil
        func isLeaving(_ name: String) -> Bool { only.map { $0 == name } ?? leaving.contains(name) }
        for (blocker, list) in blocked.filter({ isLeaving($0.key) || $0.value.contains(where: isLeaving) }) {
            // A block is in the slice of whoever is resident of the two.
            let stay = isLeaving(blocker) ? list.intersection(kept) : (kept.contains(blocker) ? list : list.filter { !isLeaving($0) })
            blocked[blocker] = stay.isEmpty ? nil : stay
        }
        for (owner, list) in standing.filter({ isLeaving($0.key) || $0.value.contains(where: isLeaving) }) {
            // A list is in the slice of its owner and of everyone on it: kept whole while one of them is resident.
            if !kept.contains(owner), list.allSatisfy({ !kept.contains($0) }) { standing[owner] = nil }
        }
        for (owner, list) in pauses.filter({ isLeaving($0.key) || $0.value.values.contains(where: { $0.from.map(isLeaving) ?? false }) }) {
            let stay = list.filter { _, pause in
                pause.until != nil || kept.contains(pause.owner) || (pause.from.map { kept.contains($0) } ?? false)
            }
            pauses[owner] = stay.isEmpty ? nil : stay
        }
        for id in messages.filter({ isLeaving($0.value.from) && !kept.contains($0.value.to) }).keys { unindex(message: id) }
    }

    /// Of `users` (none resident), those whose version a resident's part still needs: the owners of an active session,
    /// alarm or meeting point a resident is invited to or receives, of a list of standing shares a resident is on, of
    /// a pause from a resident. Only an owner's version orders the writes to what they own (`ownersNamed(besides:)`).
    public func ownersNamedByResidents(among users: Set<String>) -> Set<String> {
        guard let resident else { return users }
        func any(_ names: some Sequence<String>) -> Bool { names.contains(where: resident.contains) }
        return users.filter { owner in
            if let session = ownSession(of: owner), any(session.invitees) { return true }
            if (alarmsByOwner[owner] ?? []).contains(where: { alarms[$0].map { any($0.recipients) } ?? false }) { return true }
            if (meetingsByUser[owner] ?? []).contains(where: { id in
                meetings[id].map { $0.owner == owner && any($0.invitees.map(\.username)) } ?? false
            }) { return true }
            if any(standing[owner] ?? []) { return true }
            return (pauses[owner] ?? [:]).values.contains { $0.from.map(resident.contains) ?? false }
        }
    }

    /// The owners of the sessions, alarms and meeting points `users` are invited to or receive: whose versions their
    /// parts named (`ownersNamed(besides:)`), found through the indexes.
    public func ownersOfWhatIncludes(_ users: Set<String>) -> Set<String> {
        var owners = Set<String>()
        for user in users {
            for id in sessionsByInvitee[user] ?? [] { if let owner = sessions[id]?.owner { owners.insert(owner) } }
            for id in alarmsByRecipient[user] ?? [] { if let owner = alarms[id]?.owner { owners.insert(owner) } }
            for id in meetingsByUser[user] ?? [] { if let owner = meetings[id]?.owner { owners.insert(owner) } }
        }
        return owners
    }

    private static func remove(_ user: String, from index: inout [String: Set<String>], at key: String) {
        index[key]?.remove(user)
        if index[key]?.isEmpty == true { index[key] = nil }
    }
}
