import Dispatch
import HomewardProtocol

/// Who is connected where, among relays sharing a bus (`PresenceMessage`).
///
/// This relay tells the others who came and went here as numbered deltas, within
/// `PresenceMessage.changeDelay` (a user's first connection before their sign-in is answered), and that it
/// is alive once a second (`PresenceFeed`); it follows what the others tell with `PresenceSync`, asking a
/// relay for its snapshot when it missed one of its deltas or that relay restarted. Online means connected
/// to any relay; `presence` events go to this relay's own connections when it sees a friend come or go.
extension Relay {
    // MARK: From the bus (any thread)

    public nonisolated func remotePresence(_ message: PresenceMessage) {
        guard message.node != node else { return }
        submit(.remotePresence(message))
    }

    /// Answered in turn, so that it is exactly what the deltas sent before it say.
    public nonisolated func localPresenceSnapshot() async -> PresenceSnapshot {
        await withCheckedContinuation { submit(.presenceSnapshot($0)) }
    }

    // MARK: In turn (the actor)

    /// Another relay's delta, heartbeat or snapshot: who came online or went offline there (and so, perhaps,
    /// everywhere), and the last positions of walkers connected there.
    func heard(_ message: PresenceMessage) {
        let now = clock()
        performPresence(cluster.presenceSync.receive(message, now: now), now: now)
        let positions: [String: LastPosition] = switch message {
        case .heartbeat(let heartbeat): heartbeat.positions
        case .snapshot(let snapshot): snapshot.positions
        case .delta: [:]
        }
        for (username, position) in positions { presence.setRemotePosition(position, of: username) }
    }

    /// Once a second: tells the others this relay is alive (what it hears of them is checked by `presenceCheck`).
    func presenceTick() {
        guard !cluster.busStopped else { return }
        bus.publishPresence(.heartbeat(cluster.presenceFeed.heartbeat(positions: localWalkerPositions())))
        executor.queue.asyncAfter(deadline: DispatchTime.now() + DispatchTimeInterval.milliseconds(Int(PresenceMessage.interval))) {
            [weak self] in self?.submit(.presenceTick)
        }
    }

    /// Four times a second: finds relays that fell silent (a missed heartbeat, so that what a relay that died
    /// committed reaches the recipients here soon after: `catchUpAfterSilence`) or went (their users offline),
    /// and asks again for snapshots that did not come.
    func presenceCheck() {
        guard !cluster.busStopped else { return }
        let now = clock()
        performPresence(cluster.presenceSync.tick(now: now), now: now)
        executor.queue.asyncAfter(deadline: DispatchTime.now() + DispatchTimeInterval.milliseconds(Int(PresenceMessage.checkInterval))) {
            [weak self] in self?.submit(.presenceCheck)
        }
    }

    /// `username`'s last connection here closed at `time`: the others hear of it within
    /// `PresenceMessage.changeDelay`, with the changes that come meanwhile.
    func presenceLeft(_ username: String, at time: Int64) {
        guard busIsShared else { return }
        cluster.presenceFeed.left(username, at: time)
        guard !cluster.presenceFeed.deltaQueued else { return }
        cluster.presenceFeed.deltaQueued = true
        executor.queue.asyncAfter(deadline: DispatchTime.now() + DispatchTimeInterval.milliseconds(Int(PresenceMessage.changeDelay))) {
            [weak self] in self?.submit(.presenceChange)
        }
    }

    /// A user's first connection here: the other relays hear of it before the sign-in is answered, so
    /// that what the client does next on another relay (its other device logs out there) finds them online.
    func tellOtherRelaysOnline(_ username: String) async {
        guard busIsShared, !cluster.busStopped else { return }
        cluster.presenceFeed.joined(username)
        sendPresenceDelta()
        await bus.flush()
    }

    /// The changes not sent yet, as the next delta.
    func sendPresenceDelta() {
        guard !cluster.busStopped, let delta = cluster.presenceFeed.takeDelta() else { return }
        bus.publishPresence(.delta(delta))
    }

    /// For another relay that missed a delta: the pending changes go out first, so that the snapshot is
    /// what the deltas up to its number say.
    func presenceSnapshot() -> PresenceSnapshot {
        sendPresenceDelta()
        return cluster.presenceFeed.snapshot(online: localUsernames(), positions: localWalkerPositions())
    }

    /// The last delta says nobody is connected here any more, so the others need not wait for the expiry.
    func stopBusInTurn() async {
        guard busIsShared, !cluster.busStopped else { return }
        let now = clock()
        for username in localUsernames() { cluster.presenceFeed.left(username, at: now) }
        sendPresenceDelta()
        cluster.busStopped = true
    }

    private func performPresence(_ actions: [PresenceSync.Action], now: Int64) {
        guard !actions.isEmpty else { return }
        for action in actions {
            switch action {
            case .online(let username, let node):
                guard presence.setRemote(username, node: node, connected: true, now: now) else { continue }
                announcePresence(username, online: true, at: now)
                state.ownerIsOnlineElsewhere(username)
            case .offline(let username, let node, let lastSeen):
                guard presence.setRemote(username, node: node, connected: false, now: now, lastSeen: lastSeen) else { continue }
                announcePresence(username, online: false, at: lastSeen)
                state.ownerWentOffline(username, at: lastSeen)
            case .requestSnapshot(let node):
                guard !cluster.busStopped else { continue }
                logger.info("missed presence changes of another relay; asking for its snapshot", metadata: ["from": "\(node)"])
                bus.requestPresenceSnapshot(of: node)
            case .silent(let node):
                guard !cluster.busStopped else { continue }
                submit(.peerSilent(node))
            }
        }
        armTimer()
    }

    /// Users connected here (share-link viewers are not users: they are never online anywhere).
    private func localUsernames() -> [String] {
        presence.localUsers().filter { !ShareLink.isViewerKey($0) }
    }

    /// The last positions of walkers connected here that someone may receive (owners of sessions and alarms):
    /// what another relay deciding `session.lost` or answering with a last position falls back on when this
    /// relay dies or does not answer `hw.last`.
    private func localWalkerPositions() -> [String: LastPosition] {
        var positions: [String: LastPosition] = [:]
        for owner in state.owners where presence.connectionCount(of: owner) > 0 {
            let last = presence.lastPositions(owner)
            if !last.isEmpty { positions[owner] = last }
        }
        return positions
    }
}
