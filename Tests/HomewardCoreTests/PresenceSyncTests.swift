import HomewardCore
import HomewardProtocol
import Testing

/// Following another relay's presence from its numbered deltas, heartbeats and snapshots
/// (`PresenceSync`), and numbering this relay's own (`PresenceFeed`): pure values, no bus.
struct PresenceSyncTests {
    private typealias Action = PresenceSync.Action

    private func delta(_ seq: Int64, epoch: String = "e1", joined: [String] = [], left: [String: Int64] = [:]) -> PresenceMessage {
        .delta(PresenceDelta(node: "a", epoch: epoch, seq: seq, joined: joined, left: left))
    }

    private func heartbeat(_ seq: Int64, epoch: String = "e1") -> PresenceMessage {
        .heartbeat(PresenceHeartbeat(node: "a", epoch: epoch, seq: seq))
    }

    private func snapshot(_ seq: Int64, epoch: String = "e1", online: [String]) -> PresenceMessage {
        .snapshot(PresenceSnapshot(node: "a", epoch: epoch, seq: seq, online: online))
    }

    @Test func deltasInOrderAreAppliedWithoutASnapshot() {
        var sync = PresenceSync()
        #expect(sync.receive(delta(1, joined: ["ann", "bob"]), now: 10) == [.online("ann", node: "a"), .online("bob", node: "a")])
        #expect(sync.receive(delta(2, left: ["ann": 15]), now: 20) == [.offline("ann", node: "a", lastSeen: 15)])
        #expect(sync.receive(heartbeat(2), now: 30) == [], "the heartbeat counts what was applied")
        #expect(sync.receive(delta(2, joined: ["ann"]), now: 40) == [], "a delta already applied is old news")
        #expect(sync.users(of: "a") == ["bob"])
        #expect(!sync.isAwaitingSnapshot(of: "a"))
    }

    @Test func aGapInTheDeltasAsksForASnapshotAndKeepsWhatItHadMeanwhile() {
        var sync = PresenceSync()
        _ = sync.receive(delta(1, joined: ["ann"]), now: 10)
        // Delta 2 (bob joined) was lost; 3 says carol joined.
        #expect(sync.receive(delta(3, joined: ["carol"]), now: 20) == [.requestSnapshot(node: "a")])
        #expect(sync.users(of: "a") == ["ann"], "nothing changes before the snapshot")
        #expect(sync.receive(delta(4, left: ["ann": 25]), now: 30) == [], "held: asked once")
        #expect(sync.users(of: "a") == ["ann"])
        // The snapshot is as of delta 3; the held delta 4 follows it.
        #expect(sync.receive(snapshot(3, online: ["ann", "bob", "carol"]), now: 40)
            == [.online("bob", node: "a"), .online("carol", node: "a"), .offline("ann", node: "a", lastSeen: 25)])
        #expect(sync.users(of: "a") == ["bob", "carol"])
        #expect(!sync.isAwaitingSnapshot(of: "a"))
        #expect(sync.receive(delta(5, joined: ["dave"]), now: 50) == [.online("dave", node: "a")], "in step again")
    }

    @Test func aHeartbeatCountingADeltaNotHeardAsksForASnapshot() {
        var sync = PresenceSync()
        _ = sync.receive(delta(1, joined: ["ann"]), now: 10)
        // The last delta (2: ann left) was lost, and no other came after it: only the heartbeat tells.
        #expect(sync.receive(heartbeat(2), now: 1000) == [.requestSnapshot(node: "a")])
        #expect(sync.users(of: "a") == ["ann"])
        #expect(sync.receive(snapshot(2, online: []), now: 1010) == [.offline("ann", node: "a", lastSeen: 1010)])
    }

    @Test func aSnapshotThatDoesNotComeIsAskedForAgainEachRetryInterval() {
        var sync = PresenceSync()
        _ = sync.receive(heartbeat(4), now: 0)
        #expect(sync.tick(now: PresenceSync.retryInterval - 1) == [])
        _ = sync.receive(heartbeat(4), now: 900)
        #expect(sync.tick(now: PresenceSync.retryInterval) == [.requestSnapshot(node: "a")])
        #expect(sync.tick(now: PresenceSync.retryInterval + 10) == [])
    }

    @Test func aSnapshotOlderThanTheHeldDeltasLeavesAGapAndAsksAgain() {
        var sync = PresenceSync()
        _ = sync.receive(delta(1, joined: ["ann"]), now: 0)
        _ = sync.receive(delta(4, joined: ["dave"]), now: 10)
        // As of delta 2: delta 3 is still missing, so delta 4 cannot follow yet.
        #expect(sync.receive(snapshot(2, online: ["ann", "bob"]), now: 20) == [.online("bob", node: "a"), .requestSnapshot(node: "a")])
        #expect(sync.users(of: "a") == ["ann", "bob"])
        #expect(sync.receive(snapshot(4, online: ["ann", "bob", "carol", "dave"]), now: 30)
            == [.online("carol", node: "a"), .online("dave", node: "a")])
        #expect(!sync.isAwaitingSnapshot(of: "a"))
    }

    @Test func aNewEpochReplacesThatRelaysUsers() {
        var sync = PresenceSync()
        _ = sync.receive(delta(1, joined: ["ann", "bob"]), now: 0)
        // Restarted: its first delta of the new epoch is all there is (nobody from before is connected).
        #expect(sync.receive(delta(1, epoch: "e2", joined: ["bob", "carol"]), now: 100)
            == [.offline("ann", node: "a", lastSeen: 100), .online("carol", node: "a")], "bob, back at once, never seems to leave")
        #expect(sync.users(of: "a") == ["bob", "carol"])

        // Restarted again, its first deltas lost: the heartbeat of the new epoch asks, the snapshot replaces.
        #expect(sync.receive(heartbeat(3, epoch: "e3"), now: 200) == [.requestSnapshot(node: "a")])
        #expect(sync.users(of: "a") == ["bob", "carol"], "kept until the snapshot")
        #expect(sync.receive(snapshot(3, epoch: "e3", online: ["dave"]), now: 210)
            == [.offline("bob", node: "a", lastSeen: 210), .offline("carol", node: "a", lastSeen: 210), .online("dave", node: "a")])
        #expect(sync.receive(delta(4, epoch: "e3", joined: ["erin"]), now: 220) == [.online("erin", node: "a")])

        // Restarted with nobody connected yet: its heartbeat at 0 empties it.
        #expect(sync.receive(heartbeat(0, epoch: "e4"), now: 300)
            == [.offline("dave", node: "a", lastSeen: 300), .offline("erin", node: "a", lastSeen: 300)])
    }

    @Test func aRelayFirstHeardMidEpochIsAskedForItsSnapshot() {
        var sync = PresenceSync()
        #expect(sync.receive(delta(7, joined: ["ann"]), now: 0) == [.requestSnapshot(node: "a")])
        #expect(sync.users(of: "a") == [])
        #expect(sync.receive(snapshot(6, online: ["bob"]), now: 10) == [.online("bob", node: "a"), .online("ann", node: "a")])

        var quiet = PresenceSync()
        #expect(quiet.receive(heartbeat(0), now: 0) == [], "a relay with nobody yet needs no snapshot")
        #expect(quiet.receive(delta(1, joined: ["ann"]), now: 10) == [.online("ann", node: "a")])
    }

    @Test func aRelaySilentPastTheExpiryIsGoneItsUsersOfflineFromWhenItsNextHeartbeatWasDue() {
        var sync = PresenceSync()
        _ = sync.receive(delta(1, joined: ["ann", "bob"]), now: 1000)
        _ = sync.receive(heartbeat(1), now: 2000)
        #expect(sync.tick(now: 2000 + PresenceMessage.expiry) == [.silent(node: "a")], "not past the expiry yet; silent")
        #expect(sync.tick(now: 2001 + PresenceMessage.expiry)
            == [.offline("ann", node: "a", lastSeen: 2000 + PresenceMessage.interval),
                .offline("bob", node: "a", lastSeen: 2000 + PresenceMessage.interval)])
        #expect(sync.knownNodes == [])
        // Heard again later (it was cut off, not dead): mid-epoch, so it is asked for everything.
        #expect(sync.receive(heartbeat(1), now: 9000) == [.requestSnapshot(node: "a")])
    }

    /// A relay that misses its heartbeat is reported silent once per silence (the others then read the store for
    /// what it may have committed and not told), and again after it was heard and fell silent anew.
    @Test func aRelayThatMissesItsHeartbeatIsReportedSilentOncePerSilence() {
        var sync = PresenceSync()
        _ = sync.receive(heartbeat(0), now: 1000)
        #expect(sync.tick(now: 1000 + PresenceMessage.silence) == [], "within the silence")
        #expect(sync.tick(now: 1001 + PresenceMessage.silence) == [.silent(node: "a")])
        #expect(sync.tick(now: 1500 + PresenceMessage.silence) == [], "once per silence")
        _ = sync.receive(heartbeat(0), now: 5000)
        #expect(sync.tick(now: 5001 + PresenceMessage.silence) == [.silent(node: "a")], "silent again")
        #expect(sync.knownNodes == ["a"], "silent is not gone")
    }

    @Test func theFeedNumbersDeltasAndItsHeartbeatsSendOnlyPositionsThatChanged() {
        var feed = PresenceFeed(node: "a", epoch: "e1")
        #expect(feed.takeDelta() == nil, "nothing to say: no number used")
        feed.joined("ann")
        feed.joined("bob")
        feed.left("bob", at: 5)
        #expect(feed.takeDelta() == PresenceDelta(node: "a", epoch: "e1", seq: 1, joined: ["ann"], left: ["bob": 5]))
        let here = LastPosition(Position(lat: 57, lon: 11, ts: 100))
        #expect(feed.heartbeat(positions: ["ann": here]) == PresenceHeartbeat(node: "a", epoch: "e1", seq: 1, positions: ["ann": here]))
        #expect(feed.heartbeat(positions: ["ann": here]).positions == [:], "unchanged: not sent again")
        let moved = LastPosition(Position(lat: 58, lon: 11, ts: 200))
        #expect(feed.heartbeat(positions: ["ann": moved]).positions == ["ann": moved])
        #expect(feed.snapshot(online: ["bob", "ann"], positions: ["ann": moved])
            == PresenceSnapshot(node: "a", epoch: "e1", seq: 1, online: ["ann", "bob"], positions: ["ann": moved]))
        #expect(PresenceFeed(node: "a").epoch != PresenceFeed(node: "a").epoch, "a new epoch at each start")
    }
}
