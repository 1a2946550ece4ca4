import HomewardProtocol
import Logging

/// A signed-in request from decision to delivery: decided on the cache, its changes staged for the next
/// batch, and its reply and events sent once that batch is stored.
extension Relay {
    // MARK: Signed-in requests

    func serveSignedIn(_ request: Request, auth: Authentication, peer: String, sink: any ClientSink,
                               done: @escaping Completion) async {
        // Refused because another relay wrote first about one of its users: decided again (`decideAgain`).
        let attempt = writes.attempt(at: ContinuousClock.now)
        let again = Redecision(request: request, auth: auth, peer: peer, sink: sink, done: done,
                               attempts: attempt.attempts, since: attempt.since)
        let refused: @Sendable (isolated Relay) async -> Void = { relay in relay.decideAgain(again) }
        do throws(RelayError) {
            // A cache of connected users first reads the part of those the rule reads that it does not hold. An alarm
            // operation goes on without when the store fails: it is spooled and heard (`Relay+Spool`).
            do throws(RelayError) {
                try await admitNeeded { state.usersNeeded(for: request, by: auth.username) }
            } catch where request.spoolsWhenStorageFails && spool != nil {
                logger.warning("an alarm operation is decided on the cache as it is: its users could not be read", metadata: ["error": "\(error)"])
            }
            let decided = try await recordingRemovals { () async throws(RelayError) in
                try await decideAndStore(request, auth: auth, sink: sink)
            }
            let audience = audienceUpdates(owners: decided.outcome.audienceChanged)
            // Once stored, before any reply of the batch: audiences, and the events in the notice that tells the
            // other relays of the commit (`writeFinished`).
            let prepare: @Sendable (isolated Relay) -> Void = { relay in
                relay.applyAudience(audience)
                relay.announceEvents(decided.outcome)
            }
            let answer: @Sendable (isolated Relay, Outcome, Bool) async -> Void = { relay, outcome, prepared in
                if decided.authChange == .signedOut { relay.detach(auth.username, sink) }
                // Audiences change before the reply so that a position sent right after an ok
                // already reaches the new observer.
                if !prepared {
                    relay.applyAudience(audience)
                    relay.announceEvents(outcome)
                }
                await relay.syncInterest()
                done(.success(RelayReply(relay.replyAfterAudience(outcome), auth: decided.authChange)))
                relay.deliverEvents(outcome)
                // Counted once stored (or spooled): a request decided again on a fresh cache is one alarm.
                if decided.alarmRaised { relay.counters.alarmsRaised.increment() }
                if decided.alarmAcknowledged { relay.counters.alarmsAcknowledged.increment() }
            }
            switch decided.write {
            case .persisted:
                await whenStored({ relay in await answer(relay, decided.outcome, true) }, preparing: prepare,
                                 orElse: { _, error in done(.failure(error)) }, orRefused: refused)
            case .staged(let ifLost):
                // Alarm spool: when its batch fails, the alarm operation is spooled and heard unstored (`Relay+Spool`).
                await whenStored({ relay in await answer(relay, decided.outcome, true) }, preparing: prepare, orElse: { relay, error in
                    do throws(RelayError) { try await relay.spoolAndSend(ifLost) } catch { return done(.failure(error)) }
                    await answer(relay, ifLost.outcome, false)
                }, orRefused: refused)
            case .spooled:
                // Alarm spool: the store is down; spooled, it is heard now, marked `"stored": false`.
                await answer(self, decided.outcome, false)
            }
        } catch {
            // A refusal is an answer like any other: in turn, after what was decided before is stored (it may
            // tell of it: "already requested"), and decided again when that was refused.
            await answerInTurn(done, error, orRefused: refused)
        }
    }

    /// A signed-in request as decided (`decideAndStore`): what it makes heard once stored, and how it is stored.
    private struct Decided: Sendable {
        var outcome: Outcome
        var authChange: RelayReply.AuthChange
        var write: AlarmWrite
        var alarmRaised = false
        var alarmAcknowledged = false
    }

    /// Decides a signed-in request on the cache and stores the outcome; nothing is sent yet.
    private func decideAndStore(_ request: Request, auth: Authentication, sink: any ClientSink) async throws(RelayError) -> Decided {
        let user = auth.username
        let now = clock()
        var outcome: Outcome
        var authChange = RelayReply.AuthChange.unchanged
        switch request {
        case .logout, .logoutAll:
            // The connection is signed out (detached) once this is stored, before its reply.
            try await persist(state.logOut(user, token: auth.tokenHash, all: request == .logoutAll).changes)
            authChange = .signedOut
            outcome = Outcome()
        case .friendRequest(let target): outcome = try state.requestFriend(user, target, now: now)
        case .friendAccept(let other): outcome = try state.acceptFriend(user, other, now: now)
        case .friendDecline(let other): outcome = try state.declineFriend(user, other)
        case .friendRemove(let other): outcome = try state.removeFriend(user, other)
        case .friendList: outcome = state.friendList(user, presence: presence)
        case .userSearch(let query): outcome = try await searchUsers(user, query, now: now)
        case .userBlock(let other): outcome = try state.block(user, other, now: now)
        case .userUnblock(let other): outcome = try state.unblock(user, other)
        case .userBlocks: outcome = state.blockList(user)
        case .authSessions: outcome = state.tokenList(user, current: auth.tokenHash, now: now, lifetime: limits.tokenLifetime)
        case .authRevoke(let id): outcome = try state.revokeToken(user, id: id)
        case .sessionStart(let options): outcome = try state.startSession(user, options, now: now)
        case .sessionCheckin(let id, let checkInBy): outcome = try state.checkIn(user, id, checkInBy: checkInBy)
        case .sessionInvite(let id, let invite): outcome = try state.inviteToSession(user, id, invite: invite)
        case .sessionAccept(let id):
            let hidden = await fetchLastPosition(of: state.sessions[id]?.owner, for: [user])
            outcome = try state.acceptSession(user, id, presence: presence, hiddenElsewhere: !hidden.isEmpty)
        case .sessionDecline(let id): outcome = try state.declineSession(user, id)
        case .sessionLeave(let id): outcome = try state.leaveSession(user, id)
        case .sessionEnd(let id): outcome = try state.endSession(user, id, now: now)
        case .sessionList: outcome = state.listSessions(user)
        case .alarmRaise(let raise): outcome = try state.raiseAlarm(user, raise, presence: presence, now: now)
        case .alarmAck(let id): outcome = try state.acknowledgeAlarm(user, id)
        case .alarmCancel(let id, let reason): outcome = try state.cancelAlarm(user, id, reason: reason, now: now)
        case .alarmContacts(let usernames): outcome = try state.alarmContacts(user, set: usernames)
        case .pushUnsubscribe(let id): outcome = try state.unsubscribePush(user, id)
        case .pushList: outcome = state.listPush(user)
        case .shareCreate(let id, let ttl): outcome = try state.createShare(user, id, ttl: ttl, token: Token.mint(), now: now)
        case .shareList: outcome = state.listShares(user, now: now)
        case .shareRevoke(let id): outcome = try state.revokeShare(user, id)
        case .shareAlways(let with): outcome = try state.shareAlways(user, with: with)
        case .friendLocation(let friend):
            // Their last position lives on their relay when they are connected to another one.
            let hidden = state.standing[friend]?.contains(user) == true ? await fetchLastPosition(of: friend, for: [user]) : []
            outcome = try state.friendLocation(user, friend, presence: presence, now: now, hiddenElsewhere: !hidden.isEmpty)
        case .locationPause(let from, let until): outcome = try state.pauseLocation(user, from: from, until: until)
        case .locationResume(let from): outcome = try state.resumeLocation(user, from: from)
        case .meetPropose(let proposal): outcome = try state.proposeMeeting(user, proposal, presence: presence, now: now)
        case .meetAccept(let id): outcome = try state.respondToMeeting(user, id, .accepted)
        case .meetDecline(let id): outcome = try state.respondToMeeting(user, id, .declined)
        case .meetCancel(let id): outcome = try state.cancelMeeting(user, id)
        case .meetList: outcome = state.listMeetings(user)
        case .msgSend(let to, let text): outcome = try state.sendMessage(user, to: to, text: text, presence: presence, now: now)
        case .msgRead(let id): outcome = try state.readMessage(user, id, now: now)
        case .friendTrail(let walker): outcome = try await friendTrail(walker, for: user, now: now)
        case .register, .login, .hello, .position, .ping, .watch, .pushSubscribe:
            throw .invalid("not served here")
        }
        let changed = !outcome.changes.isEmpty
        // Alarm spool: an alarm operation whose write fails is spooled and delivered anyway (`Relay+Spool`).
        let write = try await persistOrSpool(&outcome, request: request, now: now)
        var decided = Decided(outcome: outcome, authChange: authChange, write: write)
        if case .alarmRaise = request { decided.alarmRaised = true }
        if case .alarmAck = request, changed { decided.alarmAcknowledged = true }
        return decided
    }

    func subscribePush(_ subscription: Request.PushSubscribe, auth: Authentication, done: @escaping Completion) async {
        do throws(RelayError) {
            let outcome = try await recordingRemovals { () async throws(RelayError) in
                let outcome = try state.subscribePush(auth.username, tokenHash: auth.tokenHash, subscription,
                                                      limit: push.maxSubscriptionsPerUser, now: clock())
                try await persist(outcome.changes)
                return outcome
            }
            await whenStored({ _ in done(.success(RelayReply(outcome.reply, auth: .unchanged))) },
                             orElse: { _, error in done(.failure(error)) })
        } catch {
            await answerInTurn(done, error)
        }
    }

    // MARK: Delivery

    /// Stores an outcome together with the pushes and webhook calls it causes (one transaction), then
    /// wakes the delivery worker.
    func persistWithPushes(_ outcome: inout Outcome, now: Int64) async throws(RelayError) {
        let pushes = planner.plan(outcome, state: state, presence: presence, now: now)
        outcome.changes += pushes
        try await persist(outcome.changes)
        // Only a queued entry is news to the worker: a cancellation of an alarm's pushes (all that an ack or a
        // cancel plans when no one subscribed) would wake it for a claim transaction and reads that find nothing.
        if pushes.contains(where: \.queuesOutboxEntry) { await whenStored { relay in relay.push.outboxChanged() } }
    }

    /// Puts an outcome's events, and the share-link viewers it ends, in the notice to the other relays. For a
    /// stored outcome this runs before any reply of its batch, so the notice that tells of the commit carries
    /// them (`writeFinished`): the other relays apply the commit and deliver its events from one message.
    func announceEvents(_ outcome: Outcome) {
        guard busIsShared else { return }
        addToNotice(outcome.events)
        cluster.outgoing.closeViewers += outcome.closeViewers
    }

    /// Sends an outcome's events to this relay's connections, each encoded once for all its recipients;
    /// audience changes must already be applied, and the events announced to the other relays (`announceEvents`).
    private func deliverEvents(_ outcome: Outcome) {
        for (message, recipients) in outcome.encodedEvents() {
            for username in recipients { deliver(message, to: username) }
        }
        if cluster.backlogShown != nil {
            // The bus is lost: what users hear meanwhile is not "missed" when it is back (see `busBack`).
            for event in outcome.events { cluster.backlogShown?[event.to, default: []].append(event.message) }
        }
        closeViewers(outcome.closeViewers)
        counters.alarmsPending.record(state.alarms.count)
        armTimer()
    }

    /// Closes the viewers of ended share links, after their `session.ended`: a sink keeps the order of
    /// calls, so the event goes out first.
    func closeViewers(_ viewerKeys: [String]) {
        for viewerKey in viewerKeys {
            for sink in presence.sinks(of: viewerKey) { sink.close(.normal, reason: "share link ended") }
        }
    }

    /// The reply, with `position` read now if the rule asked for it (see `Outcome.replyPosition`).
    private func replyAfterAudience(_ outcome: Outcome) -> [(String, JSONValue)] {
        guard let target = outcome.replyPosition else { return outcome.reply }
        var reply = outcome.reply
        let position = presence.lastPosition(of: target.of, shownTo: [target.shownTo])?.json ?? .null
        if let index = reply.firstIndex(where: { $0.0 == "position" }) {
            reply[index].1 = position
        } else {
            reply.append(("position", position))
        }
        // The path behind that position, read at the same moment (`Relay+Trail`).
        reply.append(("trail", trailForReply(of: target.of, shownTo: target.shownTo)?.json ?? .null))
        return reply
    }

    /// Who receives an owner's positions and where their walk ends, as decided: taken from the state when
    /// the decision is made and given to the presence table once it is stored (the state may hold later
    /// decisions by then, not stored yet).
    struct AudienceUpdate: Sendable {
        let owner: String
        let audience: Set<String>
        /// Pauses ignored: what matters for positions from other relays (nil on a relay alone).
        let reach: Set<String>?
        let mayBeReceived: Bool
        let restriction: PositionRestriction?
        let destination: (sessionId: String, destination: Destination)?
        /// The session whose trail the presence table keeps for the owner (nil: none, the trail is dropped).
        let trailSession: String?
    }

    func audienceUpdates(owners: some Sequence<String>) -> [AudienceUpdate] {
        Self.audienceUpdates(owners: owners, of: &state, shared: busIsShared)
    }

    /// Reads the state in place: each read of the actor's `state` from a closure copied the whole value
    /// (a retain and a release of every collection in it), six times per owner, and another relay's every
    /// commit asks this for the owners it touches. `inout` holds one access for all of them; nothing is changed.
    private static func audienceUpdates(owners: some Sequence<String>, of state: inout RelayState, shared: Bool) -> [AudienceUpdate] {
        owners.map { owner in
            AudienceUpdate(owner: owner, audience: state.audience(of: owner),
                           reach: shared ? state.audience(of: owner, ignoringPauses: true) : nil,
                           mayBeReceived: state.mayBeReceived(owner), restriction: state.positionRestriction(of: owner),
                           destination: state.destination(of: owner), trailSession: state.sessionByOwner[owner])
        }
    }

    func applyAudience(_ updates: [AudienceUpdate]) {
        for update in updates {
            presence.setAudience(of: update.owner, to: update.audience, reach: update.reach)
            presence.setOwner(update.owner, update.mayBeReceived, restriction: update.restriction)
            presence.setDestination(of: update.owner, to: update.destination)
            presence.setTrail(of: update.owner, sessionId: update.trailSession, now: clock(), limits: limits.trail)
        }
    }

    /// Tells the presence table who receives the positions of `owners` and where their walks end, as the
    /// state has it now (after a reload, or another relay's commits).
    func syncPresence(owners: some Sequence<String>) {
        applyAudience(audienceUpdates(owners: owners))
    }

    /// Decides work that no request is waiting for (`decide`, on the cache), persists and publishes its
    /// outcome. When another relay wrote first its batch is refused and the state read back (`writeRefused`):
    /// the reload re-arms the timer, so due work a refused write did not store fires again on what is stored.
    func complete(_ decide: () -> Outcome) async {
        do {
            let outcome = try await recordingRemovals { () async throws(RelayError) in
                var outcome = decide()
                guard !outcome.changes.isEmpty || !outcome.events.isEmpty else { return outcome }
                try await persistWithPushes(&outcome, now: clock())
                return outcome
            }
            guard !outcome.changes.isEmpty || !outcome.events.isEmpty else { return }
            let audience = audienceUpdates(owners: outcome.audienceChanged)
            await whenStored({ relay in
                relay.deliverEvents(outcome)
            }, preparing: { relay in
                relay.applyAudience(audience)
                relay.announceEvents(outcome)
            }, orElse: { relay, error in
                relay.logger.error("could not store scheduled work", metadata: ["error": "\(error)"])
            })
        } catch {
            logger.error("could not store scheduled work", metadata: ["error": "\(error)"])
        }
    }
}
