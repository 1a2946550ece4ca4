import Dispatch
import HomewardProtocol

/// The relay among others sharing its store, through its `RelayBus`.
///
/// PostgreSQL is the truth; each relay keeps its `RelayState` as a cache of it. A relay that committed
/// changes publishes one `ChangeNotice` per operation (with the changes it committed and the events it
/// caused); every other relay then applies those changes to its cache in the store's order, or reloads
/// the cache from the store when it cannot be sure of that order (`Relay+Deltas`), and only after that
/// delivers the events to its own connections, all in its mailbox's order, so a client that reacts to an
/// event finds its relay's cache already showing what caused it. A relay that lost the bus for a while
/// reloads.
extension Relay: BusReceiver {
    // MARK: From the bus (any thread)

    /// A position of `walker` from another relay, to this relay's connections that receive it, pauses
    /// ignored, less whom the walker's relay's `restriction` hides: that relay applied every pause the walker
    /// made there, while this relay's cache may not have a pause yet, or still have one that just ended.
    /// Runs on the bus's event loop (the server gives the bus one of the relay's, so `send` batches per loop
    /// as for a local walker); one lock (the walker's shard), the message encoded by the walker's relay.
    public nonisolated func remotePosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?) {
        for sink in presence.deliverRemote(message, of: walker, restriction: restriction) { sink.send(message) }
    }

    public nonisolated func remoteChanges(_ notice: ChangeNotice) {
        guard notice.node != node else { return }
        submitRefresh(notice)
    }

    /// Runs on the bus's task, without waiting for the actor: the presence table has the walker's pauses
    /// as of their last change here (`syncPresence`, before the reply to the pause).
    public nonisolated func localLastPosition(of walker: String, for askers: [String]) -> LastPositionAnswer? {
        presence.lastPositionAnswer(of: walker, for: askers)
    }

    public nonisolated func missedNotices(of node: String) {
        submit(.missedNotices(node))
    }

    public nonisolated func busDisconnected() {
        submit(.busLost)
    }

    public nonisolated func busReconnected() {
        submit(.busBack)
    }

    /// The timer shards this relay fires now (for tests and logs).
    public var firedTimerShards: TimerShards { timerShards }

    /// Makes this relay fire the timers of `shards`, and no others (the server's timer lease decides).
    /// Returns once the relay has taken them in its turn: from then on it fires nothing outside them, so the
    /// lease may release a shard no longer among them for another relay.
    public nonisolated func setTimerShards(_ shards: TimerShards) async {
        await withCheckedContinuation { continuation in submit(.timerShards(shards, continuation)) }
    }

    /// Starts hearing the other relays, and telling them each second that this one is alive.
    public nonisolated func startBus() async throws {
        try await bus.start(delivering: self)
        guard busIsShared else { return }
        // The cache was loaded before the bus was up: writes committed meanwhile sent their notices to nobody
        // here. Reloaded once the bus is up (as after a reconnect), so that its barriers can be trusted.
        submit(.busBack)
        submit(.presenceTick)
        submit(.presenceCheck)
    }

    /// Tells the other relays this one is gone (its users are offline here) and sends them nothing more.
    /// The bus stays open until its owner stops it, after the relay's last write (`close`).
    public nonisolated func stopBus() async {
        await withCheckedContinuation { submit(.stopBus($0)) }
    }

    // MARK: In turn (the actor)

    /// After every command: tells the other relays what it stored and sent, and the bus which walkers'
    /// positions this relay now needs.
    func afterCommand() async {
        // Interest first: the bus subscribes before the notice that makes a walker's relay publish to us.
        await syncInterest()
        // A revoked token signs nobody in any more: its connections (here and, through the notice,
        // elsewhere) close; the one that sent `logout` was signed out before and stays.
        let revoked = writes.takeRevokedTokens()
        if !revoked.isEmpty {
            closeConnections(signedInWith: revoked)
            if busIsShared { tellRevoked(revoked, owners: addressesNotices ? revokedTokenOwners(revoked) : []) }
        }
        publishNotice()
    }

    /// Who signed in with the tokens of `hashes`, which the command just revoked: from the cache, or from what its
    /// decision recorded removing.
    func revokedTokenOwners(_ hashes: [String]) -> Set<String> {
        Set(hashes.flatMap { hash in state.tokens[hash].map { [$0.username] } ?? state.removedOwners?[.token(hash)] ?? [] })
    }

    /// Puts revoked tokens in the notice, addressed to their owners: the relays following them close the
    /// connections signed in with them.
    func tellRevoked(_ hashes: [String], owners: Set<String>) {
        cluster.outgoing.revokedTokens += hashes
        cluster.outgoing.address.users.formUnion(owners)
    }

    /// Sends what the notice holds so far (commits, events, viewers to close, revoked tokens), if anything.
    func publishNotice() {
        guard cluster.noticeNeeded || !cluster.outgoing.events.isEmpty || !cluster.outgoing.closeViewers.isEmpty
            || !cluster.outgoing.revokedTokens.isEmpty else { return }
        if !cluster.busStopped {
            // Every recipient of an event hears it from the relays following them. A viewer is reached through the
            // link's owner, whom its relay admitted at `watch` and whom the link's commit names.
            if addressesNotices {
                for event in cluster.outgoing.events {
                    cluster.outgoing.address.users.formUnion(event.recipients.lazy.filter { !ShareLink.isViewerKey($0) })
                }
            }
            bus.publishChanges(cluster.outgoing)
        }
        cluster.outgoing.address = NoticeAddress()
        cluster.outgoing.events.removeAll()
        cluster.outgoing.closeViewers.removeAll()
        cluster.outgoing.revokedTokens.removeAll()
        cluster.outgoing.commits = []
        cluster.noticeNeeded = false
    }

    /// Right after a commit the others must know of (`persist`), before anything of it leaves this relay (a
    /// reply, an event): the notice so far is published and nats-server confirms it (a PING round trip after
    /// it). So a client that hears of the commit here and at once asks another relay finds that relay's
    /// barrier behind this notice (`catchUpBeforeRequest`). The events of the batch's operations ride in it
    /// (`writeFinished` puts them there first, `announceEvents`). A bus that cannot confirm (lost) holds nothing up:
    /// the notice goes with the reconnect, and the others ask the store meanwhile or reload on their own
    /// reconnect.
    func publishConfirmedNotice() async {
        guard !cluster.busStopped else { return }
        if let testNoticeDelay { try? await Task.sleep(for: testNoticeDelay) }
        publishNotice()
        await bus.flush()
    }

    /// Before a reply that shows `walker`'s last position to `askers` (an accept, a watch, `friend.location`):
    /// when they are connected to another relay only, asks that relay (this relay's copy comes with its
    /// heartbeats, up to a second late). Returns the askers that relay says a pause hides the walker from: this
    /// relay's cache may not have that pause yet, so they are shown no position.
    @discardableResult
    func fetchLastPosition(of walker: String?, for askers: [String]) async -> Set<String> {
        guard busIsShared, let walker, presence.connectionCount(of: walker) == 0, presence.isOnlineElsewhere(walker),
              let answer = await bus.lastPosition(of: walker, for: askers) else { return [] }
        if !answer.last.isEmpty { presence.setRemotePosition(answer.last, of: walker) }
        if let trail = answer.trail { presence.setRemoteTrail(trail, of: walker) }
        return answer.hiddenFrom
    }

    /// Subscribes to the walkers this relay's connections started receiving (and drops those nobody here
    /// receives any more), waiting until the bus has the subscriptions: called before a reply that lets a
    /// client expect positions (an accept, a watch, a sign-in), so the walker's next position is not lost.
    func syncInterest() async {
        let interest = presence.takeInterestChanges()
        guard !interest.added.isEmpty || !interest.removed.isEmpty, !cluster.busStopped else { return }
        await bus.updateInterest(adding: interest.added, removing: interest.removed)
    }

    func addToNotice(_ events: [(to: String, message: JSONValue)]) {
        for event in events {
            if let last = cluster.outgoing.events.indices.last, cluster.outgoing.events[last].message == event.message {
                cluster.outgoing.events[last].recipients.append(event.to)
            } else {
                cluster.outgoing.events.append(ChangeNotice.Event(recipients: [event.to], message: event.message))
            }
        }
    }

    /// Delivers the notices' events to this relay's connections, once the cache shows what they tell
    /// (`handleRemoteNotices`).
    func deliverNotices(_ notices: [ChangeNotice]) async {
        // An event may let a client here expect positions (an alarm it receives): subscribed first.
        await syncInterest()
        let catchUps = await standingSharePositions(startedIn: notices)
        for notice in notices {
            for var event in notice.events {
                event.message = withLastPositionDeliveredHere(event.message)
                // Friends now, even if they parted again before this reload: the pair's cooldown ends.
                if event.message["type"] == "friend.added", let friend = event.message["user"]?["username"]?.stringValue {
                    for username in event.recipients { state.forgetRequestNotices(username, friend) }
                }
                let message = EncodedMessage(event.message)
                for username in event.recipients where !alreadyCaughtUp(username, with: event.message) {
                    deliver(message, to: username)
                    if cluster.backlogShown != nil { cluster.backlogShown?[username, default: []].append(event.message) }
                }
            }
            closeViewers(notice.closeViewers)
            closeConnections(signedInWith: notice.revokedTokens)
        }
        for (message, recipients) in catchUps {
            for username in recipients { deliver(message, to: username) }
        }
    }

    /// A `session.lost` decided on another relay (the one firing the timers) carries the last position that
    /// relay knew, which may be none or a second old when the walker's relay died (it heard of them only
    /// through heartbeats). This relay may have delivered a newer one to its observers just before: they get
    /// that one. Only a position no pause restricted is kept here, and none is shown while the walker has
    /// any pause, nor one a pause hid from any observer when it was sent, as the rules decide for every
    /// `session.lost` (`RelayState.visibleLastPosition`).
    func withLastPositionDeliveredHere(_ message: JSONValue) -> JSONValue {
        guard message["type"] == "session.lost", case .sessionLost(let id, let told, let since)? = Event(json: message),
              let session = state.sessions[id],
              let delivered = state.visibleLastPosition(of: session.owner, to: session.observers, presence: presence),
              told.map({ delivered.ts > $0.ts }) ?? true else { return message }
        return Event.sessionLost(sessionId: id, lastPosition: delivered, since: since).json
    }

    /// A standing share started on the walker's relay reaches this relay only with its notice, and the
    /// walker may send a position right after their `ok`, before this relay subscribed to them: such a
    /// position went to nobody here. So the walker's last position (asked of their relay once subscribed,
    /// before `friend.sharing` goes out) follows the event to the new friends here that receive it, as
    /// `friend.location` would show it to them: not to those the walker's relay says a pause hides it from.
    private func standingSharePositions(startedIn notices: [ChangeNotice]) async -> [(EncodedMessage, [String])] {
        var catchUps: [(EncodedMessage, [String])] = []
        for event in notices.flatMap(\.events) where event.message["type"] == "friend.sharing" && event.message["sharing"] == .bool(true) {
            guard let walker = event.message["username"]?.stringValue, presence.connectionCount(of: walker) == 0 else { continue }
            let audience = state.audience(of: walker)
            var recipients = event.recipients.filter { audience.contains($0) && presence.connectionCount(of: $0) > 0 }
            guard !recipients.isEmpty else { continue }
            let hidden = await fetchLastPosition(of: walker, for: recipients)
            recipients.removeAll { hidden.contains($0) }
            guard !recipients.isEmpty, let position = presence.lastPosition(of: walker, shownTo: recipients) else { continue }
            catchUps.append((EncodedMessage(Event.position(from: walker, position).json, positionFrom: walker), recipients))
        }
        return catchUps
    }

    func closeConnections(signedInWith tokens: [String]) {
        for hash in tokens {
            for sink in signedInTokens.connections(signedInWith: hash) {
                sink.close(.policyViolation, reason: "signed out: the token was revoked")
            }
        }
    }

    /// Remembers what each connected user has been shown of their backlog (pending requests, invites,
    /// alarms), to tell them what they missed once the bus is back.
    func busLost() {
        guard cluster.backlogShown == nil else { return }
        cluster.backlogShown = backlogShownNow()
    }

    /// The bus is back, the change notices sent meanwhile are lost: reloads from PostgreSQL, and sends each
    /// connected user what is pending for them now and was not before (an alarm raised on another relay
    /// meanwhile), as their next sign-in would.
    func busBack() async {
        // At start, the shards a relay fires from the beginning (a relay given them all) are followed before the reload.
        if followsUsers, !cluster.busStopped { await bus.followTimerShards(taking: timerShards, releasing: .none) }
        let shown = cluster.backlogShown ?? [:]
        cluster.backlogShown = nil
        cluster.caughtUp = [:]
        await deliverMissedBacklog(shown: shown)
    }

    /// Another relay missed its heartbeat. It may have died between a commit and the notice that tells of it
    /// (a friend request, an invite, an alarm stored and never heard of here), and nothing else would bring that
    /// to its recipients connected here before their next sign-in. So this relay reads the store again and sends
    /// each connected user what is pending for them now and was not before, within about `PresenceMessage.silence`
    /// of the other's last heartbeat. A notice that comes after all (the relay was only slow) shows none of it twice
    /// (`alreadyCaughtUp`).
    func catchUpAfterSilence(of node: String) async {
        // This relay lost the bus itself (every other relay falls silent then): `busBack` catches up when it is back.
        guard cluster.backlogShown == nil, !cluster.busStopped else { return }
        logger.info("another relay missed its heartbeat; reading what it may have stored and not told",
                    metadata: ["node": "\(node)"])
        let shown = backlogShownNow()
        // A relay is silent also while it waits for a store that is down: then this one must not make its own
        // requests wait a store timeout for a catch-up.
        await deliverMissedBacklog(shown: shown, giveUpAfter: Self.silenceCatchUpLimit)
    }

    /// A relay publishing its notices on `hw.changes` alone (`--change-notices all`, in a cluster where this one hears
    /// only the users it follows) was heard, and the bus takes its notices from now on (`NATSBus`, `NoticeModeCheck`):
    /// what it committed before went to nobody here, about any user (a followed one, or a deadline of a timer shard
    /// held here) and whatever its relay's notices say. So the cache is read back whole, as after a reconnect (nothing
    /// narrower names what is stale), and each connected user sent what is pending for them and was not shown, as after
    /// a relay's silence; unlike that catch-up, it waits for the store (the cache must not stay stale).
    func catchUpWithMissedNotices(of node: String) async {
        // Without the bus, `busBack` reads back and catches up.
        guard cluster.backlogShown == nil, !cluster.busStopped else { return }
        logger.notice("reading back what another relay may have committed unheard", metadata: ["node": "\(node)"])
        await deliverMissedBacklog(shown: backlogShownNow())
    }

    /// What each user connected here has been shown of what is pending for them (their sign-in backlog).
    private func backlogShownNow() -> [String: [JSONValue]] {
        Dictionary(uniqueKeysWithValues: presence.localUsers().map { ($0, state.backlog(for: $0)) })
    }

    /// How long a catch-up after another relay's silence waits for the store.
    static let silenceCatchUpLimit = Duration.milliseconds(500)

    /// Reloads, then sends each connected user what is pending for them now and is not in `shown` (what they were
    /// shown before), as their next sign-in would, remembering it so that a late notice does not repeat it.
    private func deliverMissedBacklog(shown: [String: [JSONValue]], giveUpAfter: Duration? = nil) async {
        // What an earlier catch-up sent matters for its replay window only: kept longer, every catch-up of a long-lived
        // cluster (each silence of another relay) would add to it until this relay's own bus is lost.
        forgetCaughtUpPastTheReplayWindow()
        cluster.caughtUpAt = clock()
        let reloaded = await reloadFromStore(afterRemoteChange: true, giveUpAfter: giveUpAfter)
        // Not read in time: nothing new to show (the cache is as it was).
        guard reloaded || giveUpAfter == nil else { return }
        await syncInterest()
        let now = clock()
        var delivered: [StoreChange] = []
        for username in presence.localUsers() {
            let missed = state.backlog(for: username).filter { message in !(shown[username] ?? []).contains(message) }
            guard !missed.isEmpty else { continue }
            for message in missed { deliver(EncodedMessage(message), to: username) }
            cluster.caughtUp[username, default: []] += missed
            delivered += state.markAlarmsDelivered(to: username, now: now)
        }
        if !delivered.isEmpty { try? await persist(delivered) }
    }

    /// Whether `busBack` already sent `message` to `username`: a notice published during the outage may be
    /// replayed by its relay's NATS client after the reconnect, and must not show the same event twice.
    func alreadyCaughtUp(_ username: String, with message: JSONValue) -> Bool {
        forgetCaughtUpPastTheReplayWindow()
        guard let index = cluster.caughtUp[username]?.firstIndex(of: message) else { return false }
        cluster.caughtUp[username]?.remove(at: index)
        return true
    }

    /// Drops what the last catch-up sent once no replayed notice can repeat it.
    private func forgetCaughtUpPastTheReplayWindow() {
        if !cluster.caughtUp.isEmpty, clock() - cluster.caughtUpAt >= Self.replayWindow { cluster.caughtUp = [:] }
    }

    /// How long after a reconnect replayed notices are expected.
    static let replayWindow: Int64 = 10_000

    /// Before a request: brings the cache up to date with every write another relay acknowledged (or told
    /// anyone of) before the request came, so that a client that got `ok` on one relay and at once asks
    /// another finds it knowing. Writes are checked against the store anyway (`applyChecked`, `writeRefused`);
    /// this keeps reads and refusals current.
    ///
    /// On the bus, nothing goes to PostgreSQL: one round trip to nats-server (`RelayBus.barrier`), after
    /// which every notice confirmed before the request came is in the mailbox (the writing relay had
    /// nats-server confirm it before replying, `publishConfirmedNotice`); those are applied, and when one is
    /// held for an earlier commit whose notice is still on its way, that one is waited for (`catchUpWithHeldNotices`). A
    /// barrier covers every command submitted before it began (`CacheFreshness`), so under load one round
    /// trip serves the requests that queued meanwhile. A barrier is trusted on a bus connection that was up
    /// when the cache was last loaded whole (`reloadFromStore`; at start, `startBus` reloads once the bus is
    /// up). Without one to trust (the bus lost, slow, or reconnected and the reload not done yet), the store
    /// is asked for the versions of the user the request is about (`catchUpWithStore`).
    func catchUpBeforeRequest(for user: String?) async {
        // Known to be down (a write failed and no read-back worked since): the read-backs catch up, and until
        // then only alarms are served (`Relay+Spool`), which must not wait for a read that fails.
        guard busIsShared, !writes.unstored, versions != nil else { return }
        let (running, submitted) = mailbox.withLock { ($0.taken, $0.submitted) }
        guard !cluster.freshness.covers(command: running) else { return }
        if cluster.freshness.mayUseBarrier(now: clock()) {
            if let generation = await bus.barrier() {
                if cluster.freshness.trusts(generation) {
                    await handleRemoteNotices(takeRemoteNotices())
                    if cluster.sequencer.isHolding, !(await catchUpWithHeldNotices()) { return }
                    cluster.freshness.checked(through: submitted)
                    return
                }
            } else {
                cluster.freshness.barrierFailed(at: clock())
            }
        }
        if let user { await catchUpWithStore(for: user) }
    }

    /// When the store holds a write about `user` that this cache has not applied (another relay's commit whose
    /// notice is still on its way, or was lost with the bus), catches up: with the notices already received,
    /// else by reading back the slices of the users still behind. One small read (the user's version); a slice only
    /// when the cache really is behind.
    /// While the store does not answer, it is asked at most once per `readBackInterval`: requests then go on
    /// with the cache (nothing can change in the store meanwhile) instead of each waiting for it.
    func catchUpWithStore(for user: String) async {
        let now = clock()
        guard now - cluster.versionsFailedAt >= Self.readBackInterval else { return }
        let current: UserVersions?
        do { current = try await store.versions(of: [user]) } catch {
            cluster.versionsFailedAt = now
            return
        }
        func usersBehind() -> Set<String> {
            guard let current, let cached = versions else { return [] }
            return Set(current.filter { cached[$0.key, default: 0] < $0.value }.keys)
        }
        guard !usersBehind().isEmpty else { return }
        await handleRemoteNotices(takeRemoteNotices())
        let behind = usersBehind()
        if !behind.isEmpty { await reloadSlices(of: behind, afterRemoteChange: true) }
    }

    /// A `hello` with a token this cache does not know may carry one another relay just issued. One it
    /// finds expired may have been used on another relay since: a use is stored at most once a minute and
    /// tells no other relay (`StoreChange.concernsOtherRelays`), so only the store shows it; at most once a
    /// minute for this reason, so an old device retrying its expired token costs little. Either way only the
    /// token's user's part of the cache is read back (their slice).
    func refreshIfUnknown(tokenHash hash: String) async {
        guard busIsShared else { return }
        let user: String
        if let known = state.tokens[hash] {
            let now = clock()
            guard state.tokenIsExpired(hash, now: now, lifetime: limits.tokenLifetime),
                  now - writes.lastReadBack >= RelayState.tokenUseWriteInterval else { return }
            writes.readingBack(at: now)
            user = known.username
        } else {
            guard let owner = try? await store.username(forTokenHash: hash) else { return }
            user = owner
        }
        await reloadSlices(of: [user], afterRemoteChange: true)
    }

    func takeTimerShards(_ shards: TimerShards, then continuation: CheckedContinuation<Void, Never>) async {
        let taken = shards.subtracting(timerShards)
        let given = timerShards.subtracting(shards)
        guard !taken.isEmpty || !given.isEmpty else { return continuation.resume() }
        timerShards = shards
        counters.timerShardsHeld.record(shards.size)
        logger.notice("timer shards moved", metadata: [
            "node": "\(node)", "held": "\(shards)", "count": "\(shards.size)", "taken": "\(taken)", "released": "\(given)",
        ])
        // Nothing outside `shards` is fired from here on: the lease may hand the given ones to another relay.
        continuation.resume()
        // A cache that follows its users hears the deadlines of its shards' users on their subjects: those taken are
        // followed before the store is read for them (below), those given up no longer.
        if followsUsers, !cluster.busStopped { await bus.followTimerShards(taking: taken, releasing: given) }
        // Nothing more is heard of the given shards' owners (but those followed).
        if !given.isEmpty { dropUnheardOwners() }
        if taken.isEmpty {
            armTimer()
            return
        }
        // The previous holder may have fired some a moment ago: start from what is stored, then fire what is
        // overdue at once. It may also have died between a commit and its notice: what the reload brings that is
        // pending for users here is sent to them, as after its silence, not taken in unseen (the catch-up after
        // its silence would then find nothing new to send).
        if busIsShared {
            if cluster.backlogShown == nil, !cluster.busStopped {
                await deliverMissedBacklog(shown: backlogShownNow())
            } else {
                // Without the bus, `busBack` catches up with what was shown when it was lost.
                await reloadFromStore(afterRemoteChange: true)
            }
        }
        noteOfflineOwners(in: taken)
        await fireDueWork()
    }
}

extension StoreChange {
    /// Whether the other relays' caches must reload after this change. Sign-in bookkeeping (last seen,
    /// a token's last use) is not worth a reload everywhere: presence deltas carry last-seen times.
    public var concernsOtherRelays: Bool {
        switch self {
        case .lastSeen, .useToken: false
        default: true
        }
    }
}
