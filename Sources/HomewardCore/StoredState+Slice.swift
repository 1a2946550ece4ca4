/// A slice: what a store holds about some users, the part of the state a cache replaces when only those users'
/// part may be stale (`RelayState.replaceSlice`). The stores read it with the reads of a load limited to those
/// users (`StoredState.Read.statement(concerning:)`); `slice(of:)` is the same selection made from a whole load,
/// for a store that reads no slice of its own.
extension StoredState {
    /// The rows of this state that concern any of `users`: their profiles and last-seen times, tokens, alarm
    /// contacts and push subscriptions; friendships, friend requests, blocks, pauses and messages with one of
    /// them on either side; sessions, alarms and meeting points one of them owns or is invited to, whole (and the
    /// share links of those sessions); the whole list of standing shares of an owner who is one of them or has
    /// one of them on it. The versions of those users and of the owners the slice names (`ownersNamed(besides:)`;
    /// 0 for one no write concerned yet).
    public func slice(of users: Set<String>) -> StoredState {
        var slice = StoredState()
        slice.users = self.users.filter { users.contains($0.username) }
        slice.lastSeen = lastSeen.filter { users.contains($0.key) }
        slice.tokens = tokens.filter { users.contains($0.username) }
        slice.friendships = friendships.filter { users.contains($0.0) || users.contains($0.1) }
        slice.friendRequests = friendRequests.filter { users.contains($0.from) || users.contains($0.to) }
        slice.blocks = blocks.filter { users.contains($0.blocker) || users.contains($0.blocked) }
        slice.alarmContacts = alarmContacts.filter { users.contains($0.key) }
        slice.sessions = sessions.filter { users.contains($0.owner) || !users.isDisjoint(with: $0.invitees) }
        let sessionIds = Set(slice.sessions.map(\.id))
        slice.shares = shares.filter { sessionIds.contains($0.sessionId) }
        slice.alarms = alarms.filter { users.contains($0.owner) || !users.isDisjoint(with: $0.recipients) }
        slice.pushSubscriptions = pushSubscriptions.filter { users.contains($0.username) }
        slice.standingShares = standingShares.filter { users.contains($0.key) || !users.isDisjoint(with: $0.value) }
        slice.pauses = pauses.filter { users.contains($0.owner) || $0.from.map(users.contains) == true }
        slice.meetings = meetings.filter { users.contains($0.owner) || $0.invitees.contains { users.contains($0.username) } }
        slice.messages = messages.filter { users.contains($0.from) || users.contains($0.to) }
        slice.versions = versions.map { versions in
            Dictionary(uniqueKeysWithValues: users.union(slice.ownersNamed(besides: users)).map { ($0, versions[$0, default: 0]) })
        }
        return slice
    }

    /// The users other than `users` who own something this slice holds: the owners of the sessions, alarms and
    /// meeting points `users` are invited to, of the lists of standing shares and the pauses they are on. Each such
    /// entity is written with its owner in scope, not necessarily with the invitee (`RelayState.writeScope`), so only
    /// the owner's version orders the writes to it: a slice gives their versions too, from the same snapshot, and a
    /// cache of connected users places other relays' commits about those owners by them (`NoticeSequencer`).
    public func ownersNamed(besides users: Set<String>) -> Set<String> {
        var owners = Set(sessions.map(\.owner))
        owners.formUnion(shares.map(\.owner))
        owners.formUnion(alarms.map(\.owner))
        owners.formUnion(meetings.map(\.owner))
        owners.formUnion(standingShares.keys)
        owners.formUnion(pauses.map(\.owner))
        return owners.subtracting(users)
    }
}
