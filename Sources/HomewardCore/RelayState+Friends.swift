import HomewardProtocol

extension RelayState {
    public mutating func requestFriend(_ actor: String, _ target: String, now: Int64) throws(RelayError) -> Outcome {
        guard actor != target else { throw .invalid("you cannot befriend yourself") }
        try requireUser(target)
        guard !areFriends(actor, target) else { throw .conflict("already friends with \(target)") }
        guard !(outgoing[actor]?.contains(target) ?? false) else { throw .conflict("already asked \(target)") }
        guard !hasBlocked(actor, target) else { throw .conflict("you blocked \(target); unblock them first") }
        var outcome = Outcome()
        if incoming[actor]?.contains(target) ?? false {
            // They asked us first: asking back is accepting.
            return try acceptFriend(actor, target, now: now)
        }
        outgoing[actor, default: []].insert(target)
        outcome.changes.append(.addFriendRequest(from: actor, to: target, at: now))
        outcome.reply = FriendshipReply(status: .requested).fields
        // A blocked requester gets the same answer and sees the request in its own list; the target never hears of it.
        guard !hasBlocked(target, actor) else { return outcome }
        incoming[target, default: []].insert(actor)
        // Asking, withdrawing and asking again pushes one event per cooldown; the rest wait in the target's list.
        if requestNotices.shouldNotify(from: actor, to: target, now: now) {
            outcome.send(.friendRequest(from: profile(actor)), to: target)
        }
        return outcome
    }

    public mutating func acceptFriend(_ actor: String, _ requester: String, now: Int64) throws(RelayError) -> Outcome {
        guard actor != requester else { throw .invalid("you cannot befriend yourself") }
        try requireUser(requester)
        guard !areFriends(actor, requester) else { throw .conflict("already friends with \(requester)") }
        guard incoming[actor]?.contains(requester) ?? false else { throw .notFound("no friend request from \(requester)") }
        var outcome = Outcome()
        dropRequest(from: requester, to: actor, into: &outcome)
        dropRequest(from: actor, to: requester, into: &outcome)
        link(actor, requester)
        requestNotices.forget(actor, requester)
        outcome.changes.append(.addFriendship(actor, requester, at: now))
        outcome.send(.friendAdded(profile(requester)), to: actor)
        outcome.send(.friendAdded(profile(actor)), to: requester)
        outcome.reply = FriendshipReply(status: .friends, user: profile(requester)).fields
        return outcome
    }

    public mutating func declineFriend(_ actor: String, _ requester: String) throws(RelayError) -> Outcome {
        guard actor != requester else { throw .invalid("you cannot befriend yourself") }
        try requireUser(requester)
        guard incoming[actor]?.contains(requester) ?? false else { throw .notFound("no friend request from \(requester)") }
        var outcome = Outcome()
        dropRequest(from: requester, to: actor, into: &outcome)
        outcome.send(.friendDeclined(username: actor), to: requester)
        return outcome
    }

    /// Ends a friendship, or withdraws a pending request to `other`.
    public mutating func removeFriend(_ actor: String, _ other: String) throws(RelayError) -> Outcome {
        guard actor != other else { throw .invalid("you cannot unfriend yourself") }
        try requireUser(other)
        var outcome = Outcome()
        if !areFriends(actor, other) {
            guard outgoing[actor]?.contains(other) ?? false else { throw .notFound("\(other) is not your friend") }
            dropRequest(from: actor, to: other, into: &outcome)
            outcome.reply = FriendshipReply(status: .withdrawn).fields
            return outcome
        }
        friends[actor]?.remove(other)
        friends[other]?.remove(actor)
        outcome.changes.append(.removeFriendship(actor, other))
        outcome.send(.friendRemoved(username: actor), to: other)
        unlinkSessionsAndAlarms(actor, other, into: &outcome)
        unlinkSessionsAndAlarms(other, actor, into: &outcome)
        endLocationSharing(actor, other, into: &outcome)
        endMeetingsAndMessages(actor, other, into: &outcome)
        for (owner, removed) in [(actor, other), (other, actor)] where contacts[owner]?.contains(removed) ?? false {
            contacts[owner]?.removeAll { $0 == removed }
            outcome.changes.append(.setAlarmContacts(owner: owner, contacts[owner] ?? []))
        }
        return outcome
    }

    public func friendList(_ actor: String, presence: some PresenceView) -> Outcome {
        var outcome = Outcome()
        outcome.reply = FriendListReply(
            friends: friends(of: actor).map {
                FriendInfo(user: profile($0), online: presence.isOnline($0), lastSeen: presence.lastSeen($0))
            },
            incoming: (incoming[actor] ?? []).sorted().map(profile),
            outgoing: (outgoing[actor] ?? []).sorted().map(profile)).fields
        return outcome
    }

    public static let searchLimit = 20
    /// Searches one user may make per window: enough to find friends, too few to walk every prefix.
    public static let searchesPerWindow = 30
    public static let searchWindow: Int64 = 15 * 60 * 1000

    /// Users whose name starts with `query`: from `candidates` when given (a cache of connected users holds few
    /// profiles: the relay reads the candidates from the store with `searchPrefix(of:)`, up to `searchLimit`),
    /// else from the cache. The query is a username prefix of at least 3 characters, so that an empty or one-letter
    /// query cannot list the accounts 20 at a time. Checked here rather than when parsing so that an unauthenticated
    /// search is still answered `unauthenticated`.
    public mutating func searchUsers(_ actor: String, _ query: String, now: Int64,
                                     among candidates: [UserProfile]? = nil) throws(RelayError) -> Outcome {
        guard !searches.isLimited(actor, now: now) else {
            throw .rateLimited("more than \(Self.searchesPerWindow) searches in 15 minutes; try again later")
        }
        searches.record(actor, now: now)
        var outcome = Outcome()
        guard let prefix = Self.searchPrefix(of: query) else {
            outcome.reply = UserSearchReply(users: []).fields
            return outcome
        }
        let found = candidates ?? Array(users.values)
        let matches = found.filter { $0.username.hasPrefix(prefix) }.sorted { $0.username < $1.username }.prefix(Self.searchLimit)
        outcome.reply = UserSearchReply(users: Array(matches)).fields
        return outcome
    }

    /// The username prefix a search for `query` looks for; nil when it finds nobody. A query shorter than a
    /// username (or one no username could start with) finds nobody, rather than failing: the contract allows any
    /// query, and one or two letters would list accounts wholesale.
    public static func searchPrefix(of query: String) -> String? {
        try? Username.normalize(query, field: "query")
    }

    /// Forgets a pending request; one hidden from a blocker is only in `outgoing`.
    mutating func dropRequest(from: String, to: String, into outcome: inout Outcome) {
        let wasIncoming = incoming[to]?.remove(from) != nil
        let wasOutgoing = outgoing[from]?.remove(to) != nil
        guard wasIncoming || wasOutgoing else { return }
        outcome.changes.append(.removeFriendRequest(from: from, to: to))
    }

    /// Takes `other` out of `owner`'s session and alarms, telling `other`.
    private mutating func unlinkSessionsAndAlarms(_ owner: String, _ other: String, into outcome: inout Outcome) {
        if let id = sessionByOwner[owner], var session = sessions[id], session.state(of: other) != nil {
            session.remove(other)
            noteRemoved(.session(id), members: [other])
            sessions[id] = session
            noteDeadlines(of: session.owner)
            sessionsByInvitee[other]?.remove(id)
            outcome.changes.append(.saveSession(session))
            outcome.send(.sessionEnded(sessionId: id, reason: "unfriended"), to: other)
            outcome.audienceChanged.insert(owner)
        }
        for id in (alarmsByOwner[owner] ?? []).sorted() {
            guard var alarm = alarms[id], alarm.recipients.contains(other) else { continue }
            alarm.removeRecipient(other)
            noteRemoved(.alarm(id), members: [other])
            alarms[id] = alarm
            noteDeadlines(of: alarm.owner)
            alarmsByRecipient[other]?.remove(id)
            outcome.changes.append(.saveAlarm(alarm))
            outcome.send(.alarmCancelled(alarmId: id, reason: "unfriended"), to: other)
            outcome.audienceChanged.insert(owner)
        }
    }
}
