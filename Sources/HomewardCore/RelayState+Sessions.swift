import HomewardProtocol

extension RelayState {
    public mutating func startSession(_ owner: String, invite: [String]?, note: String?, now: Int64) throws(RelayError) -> Outcome {
        try startSession(owner, SessionOptions(invite: invite, note: note), now: now)
    }

    public mutating func startSession(_ owner: String, _ options: SessionOptions, now: Int64) throws(RelayError) -> Outcome {
        guard sessionByOwner[owner] == nil else { throw .conflict("you already have an active session") }
        let invitees = try checkInvitees(owner, options.invite ?? friends(of: owner))
        var session = FollowSession(id: makeID("s_"), owner: owner, note: options.note, startedAt: now)
        session.checkInBy = options.checkInBy
        session.destination = options.destination
        session.expiresAt = options.ttl.map { now + $0 * 1000 }
        for invitee in invitees { session.set(.invited, for: invitee) }
        index(session)
        var outcome = Outcome()
        outcome.changes.append(.saveSession(session))
        outcome.audienceChanged.insert(owner)
        let info = session.info(owner: profile(owner))
        outcome.send(.sessionInvite(info), to: invitees)
        outcome.reply = SessionReply(session: info).fields
        return outcome
    }

    public mutating func inviteToSession(_ actor: String, _ id: String, invite: [String]) throws(RelayError) -> Outcome {
        var session = try ownedSession(actor, id)
        var invited: [String] = []
        for invitee in try checkInvitees(actor, invite) where session.state(of: invitee) != .accepted {
            // A re-invitation after a decline or leave is a fresh invitation.
            if session.state(of: invitee) != .invited { invited.append(invitee) }
            session.set(.invited, for: invitee)
            sessionsByInvitee[invitee, default: []].insert(id)
        }
        sessions[id] = session
        noteDeadlines(of: session.owner)
        var outcome = Outcome()
        let info = session.info(owner: profile(actor))
        if !invited.isEmpty { outcome.changes.append(.saveSession(session)) }
        outcome.send(.sessionInvite(info), to: invited)
        outcome.reply = SessionReply(session: info).fields
        return outcome
    }

    /// `acceptSession`: `hiddenElsewhere` when the owner's relay says a pause hides them from `actor` (one
    /// this cache may not have yet: `Relay.fetchLastPosition`).
    public mutating func acceptSession(_ actor: String, _ id: String, presence: some PresenceView,
                                       hiddenElsewhere: Bool = false) throws(RelayError) -> Outcome {
        var session = try invitedSession(actor, id)
        switch session.state(of: actor) {
        case .accepted: throw .conflict("you already follow this session")
        case .invited: break
        default: throw .forbidden("you are not invited to this session")
        }
        session.set(.accepted, for: actor)
        sessions[id] = session
        noteDeadlines(of: session.owner)
        var outcome = Outcome()
        outcome.changes.append(.saveSession(session))
        outcome.audienceChanged.insert(session.owner)
        outcome.send(.sessionAccepted(sessionId: id, by: actor), to: session.owner)
        let hidden = hiddenElsewhere || isHidden(session.owner, from: actor)
        outcome.reply = SessionAcceptReply(session: session.info(owner: profile(session.owner)),
                                           position: hidden ? nil : presence.lastPosition(of: session.owner, shownTo: [actor])).fields
        // A pause hides the owner from this follower: no position in the reply, then or later.
        if !hidden { outcome.replyPosition = (of: session.owner, shownTo: actor) }
        return outcome
    }

    public mutating func declineSession(_ actor: String, _ id: String) throws(RelayError) -> Outcome {
        var session = try invitedSession(actor, id)
        switch session.state(of: actor) {
        case .invited: break
        case .accepted: throw .conflict("you already follow this session; leave it instead")
        default: throw .conflict("you already declined or left this session")
        }
        session.set(.declined, for: actor)
        sessions[id] = session
        noteDeadlines(of: session.owner)
        var outcome = Outcome()
        outcome.changes.append(.saveSession(session))
        outcome.send(.sessionDeclined(sessionId: id, by: actor), to: session.owner)
        return outcome
    }

    public mutating func leaveSession(_ actor: String, _ id: String) throws(RelayError) -> Outcome {
        var session = try invitedSession(actor, id)
        guard session.state(of: actor) == .accepted else { throw .forbidden("you are not following this session") }
        session.set(.left, for: actor)
        sessions[id] = session
        noteDeadlines(of: session.owner)
        var outcome = Outcome()
        outcome.changes.append(.saveSession(session))
        outcome.audienceChanged.insert(session.owner)
        outcome.send(.sessionLeft(sessionId: id, by: actor), to: session.owner)
        return outcome
    }

    public mutating func endSession(_ actor: String, _ id: String, now: Int64) throws(RelayError) -> Outcome {
        _ = try ownedSession(actor, id)
        return finishSession(id, reason: "ended", now: now)
    }

    /// Ends an active session for `reason`, telling every invitee.
    public mutating func finishSession(_ id: String, reason: String, now: Int64) -> Outcome {
        var outcome = Outcome()
        guard let session = sessions[id] else { return outcome }
        unindex(session: id)
        outcome.changes.append(.endSession(id: id, reason: reason, at: now))
        outcome.audienceChanged.insert(session.owner)
        outcome.send(.sessionEnded(sessionId: id, reason: reason), to: session.invitees)
        // Its share links end with it: viewers hear the same reason, then are closed.
        outcome.merge(endShares(ofSession: id, reason: reason))
        return outcome
    }

    public func listSessions(_ actor: String) -> Outcome {
        var outcome = Outcome()
        let mine = (sessionsByInvitee[actor] ?? []).compactMap { sessions[$0] }.sorted { $0.startedAt < $1.startedAt }
        outcome.reply = SessionListReply(
            own: ownSession(of: actor).map { $0.info(owner: profile(actor)) },
            following: mine.filter { $0.state(of: actor) == .accepted }.map { $0.info(owner: profile($0.owner)) },
            invites: mine.filter { $0.state(of: actor) == .invited }.map { $0.info(owner: profile($0.owner)) }).fields
        return outcome
    }

    private func checkInvitees(_ owner: String, _ names: [String]) throws(RelayError) -> [String] {
        for name in names {
            guard name != owner else { throw .invalid("you cannot invite yourself") }
            try requireUser(name)
            guard areFriends(owner, name) else { throw .forbidden("\(name) is not your friend") }
        }
        return names
    }

    private func ownedSession(_ actor: String, _ id: String) throws(RelayError) -> FollowSession {
        guard let session = sessions[id] else { throw .notFound("no active session \(id)") }
        guard session.owner == actor else { throw .forbidden("only the owner can do that") }
        return session
    }

    private func invitedSession(_ actor: String, _ id: String) throws(RelayError) -> FollowSession {
        guard let session = sessions[id] else { throw .notFound("no active session \(id)") }
        guard session.state(of: actor) != nil else { throw .forbidden("you are not invited to this session") }
        return session
    }
}
