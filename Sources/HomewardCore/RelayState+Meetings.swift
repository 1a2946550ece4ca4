import HomewardProtocol

/// Friends' map (issue 15), part two: meeting points and messages between friends. Both are stored
/// before anyone hears of them; what an offline friend misses waits with `deliveredAt` unset and goes out
/// at their next sign-in (`deliverQueued`), and the proposer or sender is told when it did.
extension RelayState {
    // MARK: Meeting points

    /// `meet.propose`: each friend in `to` gets `meet {meeting}` now or at their next sign-in.
    public mutating func proposeMeeting(_ actor: String, _ proposal: MeetingProposal, presence: some PresenceView,
                                        now: Int64) throws(RelayError) -> Outcome {
        for name in proposal.to {
            guard name != actor else { throw .invalid("you cannot invite yourself") }
            try requireUser(name)
            guard areFriends(actor, name) else { throw .forbidden("\(name) is not your friend") }
        }
        let own = (meetingsByUser[actor] ?? []).filter { meetings[$0]?.owner == actor }
        guard own.count < FriendsMapLimits.meetingsPerOwner else {
            throw .rateLimited("you have \(FriendsMapLimits.meetingsPerOwner) meeting points; cancel some first")
        }
        let invitees = proposal.to.map { name in
            MeetingInvitee(username: name, queuedAt: now, deliveredAt: presence.isOnline(name) ? now : nil)
        }
        let meeting = MeetingPoint(id: makeID("m_"), owner: actor, name: proposal.name, lat: proposal.lat, lon: proposal.lon,
                                   time: proposal.time, createdAt: now, invitees: invitees)
        index(meeting)
        var outcome = Outcome()
        outcome.changes.append(.saveMeeting(meeting))
        let info = meeting.info(owner: profile(actor))
        outcome.send(.meet(info), to: invitees.filter { $0.deliveredAt != nil }.map(\.username))
        outcome.reply = MeetingReply(meeting: info).fields
        return outcome
    }

    /// `meet.accept` / `meet.decline`: an invitee answers (and may change their mind); the proposer and
    /// the other invitees get `meet.response`. The same answer twice changes nothing.
    /// Only a friend of the proposer may answer (an ended friendship takes the invitee off, see
    /// `endMeetingsAndMessages`), and the answer reaches no one who blocked the invitee or whom they blocked.
    public mutating func respondToMeeting(_ actor: String, _ id: String, _ response: MeetingInvitee.Response) throws(RelayError) -> Outcome {
        guard var meeting = meetings[id] else { throw .notFound("no meeting point \(id)") }
        guard let invitee = meeting.invitee(actor), areFriends(actor, meeting.owner) else {
            throw .forbidden("you are not invited to this meeting point")
        }
        var outcome = Outcome()
        if invitee.response != response {
            meeting.update(actor) { $0.response = response }
            meetings[id] = meeting
            noteDeadlines(of: meeting.owner)
            outcome.changes.append(.saveMeeting(meeting))
            let others = meeting.invitees.map(\.username).filter { $0 != actor && !hasBlocked($0, actor) && !hasBlocked(actor, $0) }
            outcome.send(.meetResponse(meetingId: id, by: actor, response: response.rawValue), to: [meeting.owner] + others)
        }
        outcome.reply = MeetingReply(meeting: meeting.info(owner: profile(meeting.owner))).fields
        return outcome
    }

    /// `meet.cancel`: the proposer withdraws it; invitees get `meet.cancelled`.
    public mutating func cancelMeeting(_ actor: String, _ id: String) throws(RelayError) -> Outcome {
        guard let meeting = meetings[id] else { throw .notFound("no meeting point \(id)") }
        guard meeting.owner == actor else { throw .forbidden("only the proposer can cancel a meeting point") }
        var outcome = Outcome()
        removeMeeting(id, into: &outcome)
        outcome.send(.meetCancelled(meetingId: id), to: meeting.invitees.map(\.username))
        return outcome
    }

    /// `meet.list`: the caller's meeting points, proposed or invited to, soonest first.
    public func listMeetings(_ actor: String) -> Outcome {
        let mine = (meetingsByUser[actor] ?? []).compactMap { meetings[$0] }.sorted { ($0.time, $0.id) < ($1.time, $1.id) }
        var outcome = Outcome()
        outcome.reply = MeetingListReply(meetings: mine.map { $0.info(owner: profile($0.owner)) }).fields
        return outcome
    }

    /// Meeting points among `candidates` (`dueCandidates`) of proposers `due` fires whose time is up at `now`.
    mutating func expireMeetings(_ candidates: [MeetingPoint], now: Int64, in due: DueOwners) -> Outcome {
        var outcome = Outcome()
        for meeting in candidates.sorted(by: { $0.id < $1.id }) where meeting.expiresAt <= now && due.owns(meeting.owner) {
            removeMeeting(meeting.id, into: &outcome)
        }
        return outcome
    }

    func nextMeetingExpiry(in shards: TimerShards) -> Int64? {
        meetings.values.filter { shards.owns($0.owner) }.map(\.expiresAt).min()
    }

    // MARK: Messages

    /// `msg.send`: stored, then sent to the friend at once when they are connected (`deliveredAt` set),
    /// else at their next sign-in. At most `messagesPerMinute` per sender.
    public mutating func sendMessage(_ actor: String, to friend: String, text: String, presence: some PresenceView,
                                     now: Int64) throws(RelayError) -> Outcome {
        guard actor != friend else { throw .invalid("you cannot message yourself") }
        try requireUser(friend)
        guard areFriends(actor, friend) else { throw .forbidden("\(friend) is not your friend") }
        guard !messageSends.isLimited(actor, now: now) else {
            throw .rateLimited("more than \(FriendsMapLimits.messagesPerMinute) messages a minute; try again shortly")
        }
        guard (messagesByRecipient[friend]?.count ?? 0) < FriendsMapLimits.unreadPerRecipient else {
            throw .rateLimited("\(friend) has \(FriendsMapLimits.unreadPerRecipient) unread messages")
        }
        messageSends.record(actor, now: now)
        let message = MessageInfo(id: makeID("msg_"), from: actor, to: friend, text: text, queuedAt: now,
                                  deliveredAt: presence.isOnline(friend) ? now : nil)
        index(message)
        var outcome = Outcome()
        outcome.changes.append(.saveMessage(message))
        if message.deliveredAt != nil { outcome.send(.message(message), to: friend) }
        outcome.reply = MessageReply(message: message).fields
        return outcome
    }

    /// `msg.read`: the recipient has read it; the sender gets `msg.read`, and the relay forgets it
    /// (it relays messages, it does not archive them), so reading twice is `not_found`. A message between
    /// users who are not friends any more is gone (`endMeetingsAndMessages`): `not_found` as well.
    public mutating func readMessage(_ actor: String, _ id: String, now: Int64) throws(RelayError) -> Outcome {
        guard let message = messages[id], message.to != actor || areFriends(actor, message.from) else {
            throw .notFound("no unread message \(id)")
        }
        guard message.to == actor else { throw .forbidden("the message was not sent to you") }
        unindex(message: id)
        var outcome = Outcome()
        outcome.changes.append(.removeMessage(id: id))
        outcome.send(.messageRead(messageId: id, by: actor, readAt: now), to: message.from)
        return outcome
    }

    // MARK: Delivery at sign-in

    /// What waited for `username` while they were offline: each meeting point and message gets its
    /// `deliveredAt` (stored), goes to them with both times set, and its proposer or sender is told.
    /// Only from friends: what a friendship that ended left behind is never delivered.
    public mutating func deliverQueued(to username: String, now: Int64) -> Outcome {
        var outcome = Outcome()
        for id in (meetingsByUser[username] ?? []).sorted() {
            guard var meeting = meetings[id], let invitee = meeting.invitee(username), invitee.deliveredAt == nil,
                  areFriends(username, meeting.owner) else { continue }
            meeting.update(username) { $0.deliveredAt = now }
            meetings[id] = meeting
            noteDeadlines(of: meeting.owner)
            outcome.changes.append(.saveMeeting(meeting))
            outcome.send(.meet(meeting.info(owner: profile(meeting.owner))), to: username)
            outcome.send(.meetDelivered(meetingId: id, to: username, deliveredAt: now), to: meeting.owner)
        }
        let waiting = (messagesByRecipient[username] ?? []).compactMap { messages[$0] }
            .filter { $0.deliveredAt == nil && areFriends(username, $0.from) }
        for var message in waiting.sorted(by: { ($0.queuedAt, $0.id) < ($1.queuedAt, $1.id) }) {
            message.deliveredAt = now
            messages[message.id] = message
            outcome.changes.append(.saveMessage(message))
            outcome.send(.message(message), to: username)
            outcome.send(.messageDelivered(messageId: message.id, to: username, deliveredAt: now), to: message.from)
        }
        return outcome
    }

    // MARK: A friendship that ends

    /// `a` and `b` are friends no more (unfriended or blocked): neither stays invited to the other's meeting
    /// points (one left with no invitee ends), and their unread messages to each other are dropped, so
    /// nothing more passes between them this way: no listing, answer, delivery or read receipt. Whoever is
    /// taken off a meeting point hears `meet.cancelled`, as invitees do when its proposer cancels it; the
    /// proposer hears it when the meeting point ends for want of invitees.
    mutating func endMeetingsAndMessages(_ a: String, _ b: String, into outcome: inout Outcome) {
        for (owner, other) in [(a, b), (b, a)] {
            for id in (meetingsByUser[owner] ?? []).sorted() {
                guard var meeting = meetings[id], meeting.owner == owner, meeting.invitee(other) != nil else { continue }
                meeting.invitees.removeAll { $0.username == other }
                noteRemoved(.meeting(id), members: [other])
                meetingsByUser[other]?.remove(id)
                outcome.send(.meetCancelled(meetingId: id), to: other)
                if meeting.invitees.isEmpty {
                    removeMeeting(id, into: &outcome)
                    outcome.send(.meetCancelled(meetingId: id), to: owner)
                } else {
                    meetings[id] = meeting
                    noteDeadlines(of: meeting.owner)
                    outcome.changes.append(.saveMeeting(meeting))
                }
            }
        }
        for (from, to) in [(a, b), (b, a)] {
            for message in (messagesByRecipient[to] ?? []).compactMap({ messages[$0] }).filter({ $0.from == from }).sorted(by: { $0.id < $1.id }) {
                unindex(message: message.id)
                outcome.changes.append(.removeMessage(id: message.id))
            }
        }
    }

    // MARK: Indexes

    mutating func index(_ meeting: MeetingPoint) {
        meetings[meeting.id] = meeting
        for name in [meeting.owner] + meeting.invitees.map(\.username) { meetingsByUser[name, default: []].insert(meeting.id) }
        noteDeadlines(of: meeting.owner)
    }

    private mutating func removeMeeting(_ id: String, into outcome: inout Outcome) {
        guard let meeting = meetings.removeValue(forKey: id) else { return }
        noteRemoved(.meeting(id), meeting.owner)
        noteRemoved(.meeting(id), members: meeting.invitees.map(\.username))
        for name in [meeting.owner] + meeting.invitees.map(\.username) { meetingsByUser[name]?.remove(id) }
        outcome.changes.append(.removeMeeting(id: id))
    }

    mutating func index(_ message: MessageInfo) {
        messages[message.id] = message
        messagesByRecipient[message.to, default: []].insert(message.id)
    }

    mutating func unindex(message id: String) {
        guard let message = messages.removeValue(forKey: id) else { return }
        noteRemoved(.message(id), message.from, message.to)
        messagesByRecipient[message.to]?.remove(id)
    }
}
