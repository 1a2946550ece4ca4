import Dispatch
import HomewardProtocol
import Logging

/// Signing in: a password check on the hashing pool, a token's `hello`, a share link's `watch`, the
/// connection limit per user, and a connection's end (`detach`, last-seen times).
extension Relay {
    /// Hashes or verifies a password on the hashing pool, then continues in turn with `finish`.
    func checkPassword(peer: String, previous: Authentication?, sink: any ClientSink, done: @escaping Completion,
                               _ work: @escaping @Sendable (PasswordHasher) -> PasswordCheck) {
        let hasher = self.hasher
        let hashing = self.hashing
        Task {
            let check = await hashing.run { work(hasher) }
            self.submit(.passwordChecked(check, peer: peer, previous: previous, sink: sink, done: done))
        }
    }

    func finish(_ check: PasswordCheck, peer: String, previous: Authentication?, sink: any ClientSink,
                        done: @escaping Completion) async {
        let now = clock()
        do throws(RelayError) {
            switch check {
            case .registered(let username, let name, let hash):
                let token = Token.mint()
                let auth = Authentication(username: username, tokenHash: Token.hash(token))
                // Another relay may have registered the name since this cache was loaded: decided again then.
                try await recordingRemovals { () async throws(RelayError) in
                    var outcome = try state.register(username: username, name: name, passwordHash: hash, now: now)
                    outcome.changes += state.issueToken(auth.tokenHash, to: username, now: now, lifetime: limits.tokenLifetime)
                    try await persist(outcome.changes)
                }
                // Signing in sends what the state holds: stored first, with everything decided before.
                try await writesSettled()
                signIns.registrations.record(peer, now: now)
                await signIn(auth, previous: previous, sink: sink,
                             reply: signInReply(username, token: token), done: done)
            case .verified(let username, let valid):
                guard valid else {
                    signIns.usernameFailures.record(username, now: now)
                    signIns.addressFailures.record(peer, now: now)
                    throw .unauthenticated("wrong username or password")
                }
                signIns.usernameFailures.reset(username)
                await admitSignIns(startingWith: .user(username))
                try await admitNeeded { state.usersNeeded(forSignInOf: username) }
                let token = Token.mint()
                let auth = Authentication(username: username, tokenHash: Token.hash(token))
                try await recordingRemovals { () async throws(RelayError) in
                    try await persist(state.issueToken(auth.tokenHash, to: username, now: now, lifetime: limits.tokenLifetime))
                }
                // Signing in sends what the state holds: stored first, with everything decided before.
                try await writesSettled()
                // Not limited like `hello`: the password gets the owner in, whoever holds the connections.
                makeRoom(for: username, signingIn: sink, previous: previous)
                await signIn(auth, previous: previous, sink: sink,
                             reply: signInReply(username, token: token), done: done)
            }
        } catch {
            done(.failure(error))
        }
    }

    func hello(token: String, peer: String, previous: Authentication?, sink: any ClientSink,
                       done: @escaping Completion) async {
        let hash = Token.hash(token)
        guard await mayCheckToken(hash, from: peer) else {
            return done(.failure(.rateLimited("too many failed sign-ins with a token from this address; try again later")))
        }
        await admitSignIns(startingWith: .token(hash: hash, peer: peer))
        do throws(RelayError) {
            try await admitOwner(ofToken: hash)
            let (username, used) = try useToken(hash, from: peer)
            try checkConnectionLimit(username, previous: previous)
            try await persist(used)
            try await writesSettled()
            await signIn(Authentication(username: username, tokenHash: hash), previous: previous, sink: sink,
                         reply: signInReply(username, token: nil), done: done)
        } catch {
            done(.failure(error))
        }
    }

    /// The `ok` reply to `register`, `login` and `hello`.
    private func signInReply(_ username: String, token: String?) -> [(String, JSONValue)] {
        SignInReply(user: state.profile(username), token: token, features: features,
                    vapidPublicKey: push.vapidPublicKey, node: node).fields
    }

    private func checkConnectionLimit(_ username: String, previous: Authentication?) throws(RelayError) {
        let already = previous?.username == username ? 1 : 0
        guard presence.connectionCount(of: username) - already < limits.maxConnectionsPerUser else {
            throw .rateLimited("more than \(limits.maxConnectionsPerUser) connections for \(username)")
        }
    }

    /// Attaches the connection, replies, then sends what the user missed. Everything decided before is
    /// stored (`writesSettled`): the reply and the backlog show the state as it is.
    private func signIn(_ auth: Authentication, previous: Authentication?, sink: any ClientSink,
                        reply: [(String, JSONValue)], done: @escaping Completion) async {
        // Signing in again as the same user on the same connection changes nothing anyone can see.
        if let previous, previous.username == auth.username {
            signedInTokens.remember(auth.tokenHash, sink, as: auth.username)
            done(.success(RelayReply(reply, auth: .authenticated(auth))))
            return
        }
        // What the backlog and the sign-in's bookkeeping read (a cache of connected users admits it first).
        do throws(RelayError) { try await admitNeeded { state.usersNeeded(forSignInOf: auth.username) } } catch {
            return done(.failure(error))
        }
        if let previous { detach(previous.username, sink) }
        let now = clock()
        let first = presence.attach(auth.username, sink, now: now)
        signedInTokens.remember(auth.tokenHash, sink, as: auth.username)
        await syncInterest()
        if first { await tellOtherRelaysOnline(auth.username) }
        done(.success(RelayReply(reply, auth: .authenticated(auth))))
        let backlog = state.backlog(for: auth.username)
        for message in backlog { sink.send(EncodedMessage(message)) }
        if cluster.backlogShown != nil { cluster.backlogShown?[auth.username] = backlog }
        await complete { Outcome(changes: state.markAlarmsDelivered(to: auth.username, now: now)) }
        // Meeting points and messages that waited: stored as delivered before they go out.
        await complete { state.deliverQueued(to: auth.username, now: now) }
        if first {
            if !presence.isOnlineElsewhere(auth.username) { announcePresence(auth.username, online: true, at: now) }
            await complete { state.ownerCameBack(auth.username) }
        }
        counters.usersOnline.record(presence.onlineUserCount)
    }

    /// A share link's viewer (protocol 1.1): checks the token, attaches the connection under the link's
    /// viewer key (so the owner's positions reach it by the usual fan-out), replies, then sends what is
    /// going on (alarms, lost contact). Failures count per address; over the limit nothing is checked.
    func watch(token: String, peer: String, sink: any ClientSink, done: @escaping Completion) async {
        let now = clock()
        guard !signIns.watchFailures.isLimited(peer, now: now) else {
            return done(.failure(.rateLimited("too many failed watch attempts from this address; try again later")))
        }
        // The reply and what follows show the state: stored first, with everything decided before.
        do throws(RelayError) { try await writesSettled() } catch { return done(.failure(error)) }
        let hash = Token.hash(token)
        do throws(RelayError) {
            try await admitLinkOwner(tokenHash: hash)
            try await admitNeeded { state.usersNeeded(forWatching: hash) }
        } catch { return done(.failure(error)) }
        let link = state.sharesByHash[hash].flatMap { state.shares[$0] }
        let hidden = await fetchLastPosition(of: link?.owner, for: link.map { [$0.viewerKey] } ?? [])
        do throws(RelayError) {
            let (share, reply) = try state.watch(tokenHash: hash, now: now, presence: presence, hiddenElsewhere: !hidden.isEmpty)
            // A valid token: not a failure to count, even when there is no room.
            guard presence.connectionCount(of: share.viewerKey) < limits.viewersPerShare else {
                return done(.failure(.rateLimited("more than \(limits.viewersPerShare) viewers on this share link")))
            }
            presence.attachViewer(share.viewerKey, sink)
            await syncInterest()
            let trail = hidden.isEmpty && state.trailShownToViewers(of: share.owner)
                ? trailForReply(of: share.owner, shownTo: share.viewerKey) : nil
            done(.success(RelayReply(reply.fields + [("trail", trail?.json ?? .null)], auth: .watching(viewerKey: share.viewerKey))))
            for message in state.viewerBacklog(share, presence: presence) { sink.send(EncodedMessage(message)) }
        } catch {
            signIns.watchFailures.record(peer, now: now)
            done(.failure(error))
        }
    }

    func detach(_ username: String, _ sink: any ClientSink) {
        armTimer(ifSooner: leave(username, sink))
    }

    /// Closed connections, in the order they closed, as one command: each leaves, and the timer is moved once, to the
    /// soonest deadline they add. (When many connections close at once, as at shutdown, a command each would queue
    /// behind one another.)
    func detach(_ departures: [Departure]) {
        var soonest: Int64?
        for departure in departures {
            if let deadline = leave(departure.key, departure.sink) { soonest = min(soonest ?? deadline, deadline) }
        }
        armTimer(ifSooner: soonest)
    }

    /// `detach` but for the timer: returns the one deadline this departure adds that this relay fires (their session's
    /// lost contact), so that the timer moves to it if sooner, rather than walking every deadline the cache holds (a
    /// relay closing thousands of connections at once did that for each).
    private func leave(_ username: String, _ sink: any ClientSink) -> Int64? {
        if ShareLink.isViewerKey(username) {
            presence.detachViewer(username, sink)
            return nil
        }
        signedInTokens.forget(sink)
        let now = clock()
        guard presence.detach(username, sink, now: now) else { return nil }
        if writes.lastSeen(username, at: now) {
            executor.queue.asyncAfter(deadline: .now() + Self.lastSeenWriteDelay) { [weak self] in
                self?.submit(.saveLastSeen)
            }
        }
        counters.usersOnline.record(presence.onlineUserCount)
        noteIdle([username], at: now)
        presenceLeft(username, at: now)
        // Still connected to another relay: nobody sees a change.
        guard !presence.isOnlineElsewhere(username) else { return nil }
        announcePresence(username, online: false, at: now)
        guard state.ownerWentOffline(username, at: now), !timerShards.isEmpty, timerShards.owns(username) else { return nil }
        return state.lostContactDeadline(of: username)
    }

    private func armTimer(ifSooner deadline: Int64?) {
        if let deadline, deadline < timer.deadline ?? .max { armTimer(at: deadline) }
    }

    func saveLastSeen() async {
        let changes = writes.takeLastSeen()
        guard !changes.isEmpty else { return }
        do {
            try await persist(changes)
        } catch {
            logger.warning("could not store last-seen times", metadata: ["error": "\(error)"])
        }
    }

    /// Tells `username`'s friends, as friends are now, once what was decided before is stored (a friendship
    /// on its way is not heard of through a presence event first).
    func announcePresence(_ username: String, online: Bool, at time: Int64) {
        let message = EncodedMessage(Event.presence(username: username, online: online, lastSeen: time).json)
        let friends = state.friends(of: username)
        afterStored { relay in
            for friend in friends { relay.deliver(message, to: friend) }
        }
    }
}
