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
    /// The users `changes` concern, sorted, each once, in the state the changes were decided into: an entity a
    /// change names only by id is looked up in it, or among those the decision removed (`removedOwners`).
    func writeScope(of changes: [StoreChange]) -> [String] {
        var users = Set<String>()
        for change in changes {
            switch change {
            case let .createUser(profile, _, _): users.insert(profile.username)
            case let .createToken(_, username, _): users.insert(username)
            case let .revokeToken(hash):
                users.formUnion(tokens[hash].map { [$0.username] } ?? removed(.token(hash)))
            case let .addFriendRequest(from, to, _), let .removeFriendRequest(from, to): users.formUnion([from, to])
            case let .addFriendship(a, b, _), let .removeFriendship(a, b): users.formUnion([a, b])
            case let .addBlock(blocker, blocked, _), let .removeBlock(blocker, blocked): users.formUnion([blocker, blocked])
            case let .setAlarmContacts(owner, _), let .setStandingShare(owner, _), let .removePause(owner, _):
                users.insert(owner)
            case let .saveSession(session): users.insert(session.owner)
            case let .endSession(id, _, _):
                users.formUnion((changes.savedSession(id) ?? sessions[id]).map { [$0.owner] } ?? removed(.session(id)))
            case let .saveAlarm(alarm): users.insert(alarm.owner)
            case let .endAlarm(id, _, _):
                users.formUnion((changes.savedAlarm(id) ?? alarms[id]).map { [$0.owner] } ?? removed(.alarm(id)))
            case let .savePushSubscription(subscription): users.insert(subscription.username)
            case let .deletePushSubscription(id):
                users.formUnion(pushSubscriptions[id].map { [$0.username] } ?? removed(.pushSubscription(id)))
            case let .saveShare(share): users.insert(share.owner)
            case let .removeShare(id):
                users.formUnion(shares[id].map { [$0.owner] } ?? removed(.share(id)))
            case let .savePause(pause): users.insert(pause.owner)
            case let .saveMeeting(meeting): users.insert(meeting.owner)
            case let .removeMeeting(id):
                users.formUnion(meetings[id].map { [$0.owner] } ?? removed(.meeting(id)))
            case let .saveMessage(message): users.formUnion([message.from, message.to])
            case let .removeMessage(id):
                users.formUnion(messages[id].map { [$0.from, $0.to] } ?? removed(.message(id)))
            case .lastSeen, .useToken, .enqueueOutbox, .cancelAlarmPushes:
                // Not checked: sign-in bookkeeping concerns nobody else, and outbox entries are no cache's.
                break
            }
        }
        return users.sorted()
    }

    private func removed(_ entity: RemovedOwners.Entity) -> [String] { removedOwners?[entity] ?? [] }
}

private extension [StoreChange] {
    func savedSession(_ id: String) -> FollowSession? {
        lazy.compactMap { if case .saveSession(let session) = $0, session.id == id { session } else { nil } }.first
    }

    func savedAlarm(_ id: String) -> Alarm? {
        lazy.compactMap { if case .saveAlarm(let alarm) = $0, alarm.id == id { alarm } else { nil } }.first
    }
}
