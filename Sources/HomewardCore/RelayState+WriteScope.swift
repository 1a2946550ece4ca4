/// Which users a write concerns, for the store's check of relays sharing it (`RelayStore.applyChecked`): two
/// writes about a common user are ordered by that user's version, and the later one is refused when its relay
/// had not applied the earlier; writes about different users are not checked against each other.
///
/// The rule: every stored entity is written with its owner in scope (a session, an alarm, a meeting point, a
/// share link, a pause, a push subscription or a token with the user it belongs to), and a relation between
/// two users with both (a friend request, a friendship, a block, a message). A decision reads what it writes
/// and the relations of the users it concerns, and those relations are written with those users in scope,
/// so two decisions that could see each other's effect share a user: two observers accepting one session
/// (its owner), an invite crossing a block (the inviter, the owner of the session and party to the block).
extension RelayState {
    /// The users `changes` concern, sorted, each once; changes that name an entity only by id are looked up in
    /// this state (the one the write was decided from, where an entity it ends still exists), then in `after`.
    func writeScope(of changes: [StoreChange], after: RelayState) -> [String] {
        var users = Set<String>()
        for change in changes {
            switch change {
            case let .createUser(profile, _, _): users.insert(profile.username)
            case let .createToken(_, username, _): users.insert(username)
            case let .revokeToken(hash):
                if let owner = tokens[hash]?.username ?? after.tokens[hash]?.username { users.insert(owner) }
            case let .addFriendRequest(from, to, _), let .removeFriendRequest(from, to): users.formUnion([from, to])
            case let .addFriendship(a, b, _), let .removeFriendship(a, b): users.formUnion([a, b])
            case let .addBlock(blocker, blocked, _), let .removeBlock(blocker, blocked): users.formUnion([blocker, blocked])
            case let .setAlarmContacts(owner, _), let .setStandingShare(owner, _), let .removePause(owner, _):
                users.insert(owner)
            case let .saveSession(session): users.insert(session.owner)
            case let .endSession(id, _, _):
                if let owner = changes.savedSession(id)?.owner ?? sessions[id]?.owner ?? after.sessions[id]?.owner { users.insert(owner) }
            case let .saveAlarm(alarm): users.insert(alarm.owner)
            case let .endAlarm(id, _, _):
                if let owner = changes.savedAlarm(id)?.owner ?? alarms[id]?.owner ?? after.alarms[id]?.owner { users.insert(owner) }
            case let .savePushSubscription(subscription): users.insert(subscription.username)
            case let .deletePushSubscription(id):
                if let owner = pushSubscriptions[id]?.username ?? after.pushSubscriptions[id]?.username { users.insert(owner) }
            case let .saveShare(share): users.insert(share.owner)
            case let .removeShare(id):
                if let owner = shares[id]?.owner ?? after.shares[id]?.owner { users.insert(owner) }
            case let .savePause(pause): users.insert(pause.owner)
            case let .saveMeeting(meeting): users.insert(meeting.owner)
            case let .removeMeeting(id):
                if let owner = meetings[id]?.owner ?? after.meetings[id]?.owner { users.insert(owner) }
            case let .saveMessage(message): users.formUnion([message.from, message.to])
            case let .removeMessage(id):
                if let message = messages[id] ?? after.messages[id] { users.formUnion([message.from, message.to]) }
            case .lastSeen, .useToken, .enqueueOutbox, .cancelAlarmPushes:
                // Not checked: sign-in bookkeeping concerns nobody else, and outbox entries are no cache's.
                break
            }
        }
        return users.sorted()
    }
}

private extension [StoreChange] {
    func savedSession(_ id: String) -> FollowSession? {
        lazy.compactMap { if case .saveSession(let session) = $0, session.id == id { session } else { nil } }.first
    }

    func savedAlarm(_ id: String) -> Alarm? {
        lazy.compactMap { if case .saveAlarm(let alarm) = $0, alarm.id == id { alarm } else { nil } }.first
    }
}
