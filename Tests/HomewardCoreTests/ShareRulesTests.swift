import HomewardCore
import HomewardProtocol
import XCTest

/// Share links (protocol 1.1) as values: creation limits, who may do what, what viewers hear, expiry.
final class ShareRulesTests: XCTestCase {
    private let now = CoreFixture.now

    /// alice walks (session s_1), bob observes.
    private func walking(ttl: Int64? = nil) throws -> RelayState {
        var state = CoreFixture.state(friends: [("alice", "bob")])
        _ = try state.startSession("alice", SessionOptions(invite: ["bob"], ttl: ttl), now: now)
        _ = try state.acceptSession("bob", "s_1", presence: CoreTestPresence())
        return state
    }

    private func share(_ state: inout RelayState, ttl: Int64? = nil, token: String = "tok-1", at time: Int64? = nil) throws -> ShareInfo {
        let outcome = try state.createShare("alice", "s_1", ttl: ttl, token: token, now: time ?? now)
        return try XCTUnwrap(ShareCreateReply(json: .object(outcome.reply))?.share)
    }

    func testCreateRepliesWithTokenURLAndExpiryAndStoresOnlyTheHash() throws {
        var state = try walking()
        state.shareSettings.publicURL = "https://relay.example"
        let outcome = try state.createShare("alice", "s_1", ttl: nil, token: "tok-1", now: now)
        let share = try XCTUnwrap(ShareCreateReply(json: .object(outcome.reply))?.share)
        XCTAssertEqual(share.token, "tok-1")
        XCTAssertEqual(share.url, "https://relay.example/f#tok-1")
        XCTAssertEqual(share.expiresAt, now + 7200 * 1000, "default ttl 7200 s")
        guard case .saveShare(let stored)? = outcome.changes.first else { return XCTFail("not stored: \(outcome.changes)") }
        XCTAssertEqual(stored.tokenHash, Token.hash("tok-1"))
        XCTAssertNotEqual(stored.tokenHash, "tok-1")
        XCTAssertTrue(state.audience(of: "alice").contains(stored.viewerKey), "viewers are in the owner's audience")
    }

    func testTTLLimitsAndClampToTheSessionEnd() throws {
        var state = try walking(ttl: 600)
        for bad: Int64 in [59, 604_801, 0, -1] {
            assertRelayError(try state.createShare("alice", "s_1", ttl: bad, token: "t\(bad)", now: now), .invalid)
        }
        XCTAssertEqual(try share(&state, ttl: 60).expiresAt, now + 60_000)
        XCTAssertEqual(try share(&state, ttl: 604_800, token: "t2").expiresAt, now + 600_000, "clamped to the session's end")
    }

    func testOnlyTheOwnerOfAnActiveSessionCreatesAndRevokes() throws {
        var state = try walking()
        assertRelayError(try state.createShare("bob", "s_1", ttl: nil, token: "t", now: now), .forbidden)
        assertRelayError(try state.createShare("alice", "s_404", ttl: nil, token: "t", now: now), .notFound)
        let link = try share(&state)
        assertRelayError(try state.revokeShare("bob", link.id), .forbidden)
        assertRelayError(try state.revokeShare("alice", "sh_404"), .notFound)
    }

    func testListShowsLiveLinksWithoutTokens() throws {
        var state = try walking()
        let first = try share(&state, ttl: 60)
        _ = try share(&state, token: "tok-2")
        let listed = try XCTUnwrap(ShareListReply(json: .object(state.listShares("alice", now: now).reply))).shares
        XCTAssertEqual(listed.map(\.id), [first.id, "sh_3"])
        XCTAssertTrue(listed.allSatisfy { $0.token == nil && $0.url == nil })
        XCTAssertEqual(try XCTUnwrap(ShareListReply(json: .object(state.listShares("alice", now: now + 61_000).reply))).shares.count, 1,
                       "an expired link is not live")
        XCTAssertTrue(try XCTUnwrap(ShareListReply(json: .object(state.listShares("bob", now: now).reply))).shares.isEmpty)
    }

    func testWatchFindsTheLinkAndUnknownExpiredAndRevokedAreTheSameNotFound() throws {
        var state = try walking()
        let link = try share(&state, ttl: 60)
        let (found, reply) = try state.watch(tokenHash: Token.hash("tok-1"), now: now, presence: CoreTestPresence())
        XCTAssertEqual(found.id, link.id)
        XCTAssertEqual(reply.session.owner, UserInfo(username: "alice", name: "Alice"))
        XCTAssertEqual(reply.session.expiresAt, link.expiresAt)
        assertRelayError(try state.watch(tokenHash: Token.hash("nope"), now: now, presence: CoreTestPresence()), .notFound)
        assertRelayError(try state.watch(tokenHash: Token.hash("tok-1"), now: now + 60_000, presence: CoreTestPresence()), .notFound)
        _ = try state.revokeShare("alice", link.id)
        assertRelayError(try state.watch(tokenHash: Token.hash("tok-1"), now: now, presence: CoreTestPresence()), .notFound)
    }

    func testRevokeTellsViewersRevokedClosesThemAndLeavesTheAudience() throws {
        var state = try walking()
        let link = try share(&state)
        let key = "share:" + link.id
        let outcome = try state.revokeShare("alice", link.id)
        XCTAssertEqual(outcome.sent("session.ended").map(\.to), [key])
        XCTAssertEqual(outcome.sent("session.ended").first?.message["reason"], "revoked")
        XCTAssertEqual(outcome.closeViewers, [key])
        XCTAssertEqual(outcome.changes, [.removeShare(id: link.id)])
        XCTAssertFalse(state.audience(of: "alice").contains(key))
        XCTAssertTrue(state.audience(of: "alice").contains("bob"), "observers are untouched")
    }

    func testLinkExpiryFiresOnAManualClockAndIsTheNextDeadline() throws {
        var state = try walking()
        let link = try share(&state, ttl: 60)
        XCTAssertEqual(state.nextDeadline(), link.expiresAt)
        XCTAssertTrue(state.fireDue(now: link.expiresAt - 1, presence: CoreTestPresence()).events.isEmpty)
        let outcome = state.fireDue(now: link.expiresAt, presence: CoreTestPresence())
        XCTAssertEqual(outcome.sent("session.ended").map(\.to), ["share:" + link.id])
        XCTAssertEqual(outcome.sent("session.ended").first?.message["reason"], "expired")
        XCTAssertEqual(outcome.closeViewers, ["share:" + link.id])
        XCTAssertNotNil(state.ownSession(of: "alice"), "the session goes on")
        XCTAssertNil(state.nextDeadline())
    }

    func testALinkStoredBeforeARestartStillExpiresAfterIt() throws {
        var state = try walking()
        let link = try share(&state, ttl: 60)
        var stored = StoredState()
        stored.users = ["alice", "bob"].map { UserProfile(username: $0, name: $0.capitalized) }
        stored.friendships = [("alice", "bob")]
        stored.sessions = Array(state.sessions.values)
        stored.shares = [ShareLink(id: link.id, sessionId: "s_1", owner: "alice", tokenHash: Token.hash("tok-1"),
                                   createdAt: now, expiresAt: link.expiresAt)]
        var restarted = RelayState(stored)
        XCTAssertEqual(restarted.nextDeadline(), link.expiresAt, "the timer is re-armed from what was stored")
        XCTAssertNoThrow(try restarted.watch(tokenHash: Token.hash("tok-1"), now: now + 1, presence: CoreTestPresence()))
        let outcome = restarted.fireDue(now: link.expiresAt + 5_000, presence: CoreTestPresence())
        XCTAssertEqual(outcome.sent("session.ended").first?.message["reason"], "expired")
        XCTAssertEqual(outcome.changes, [.removeShare(id: link.id)])
    }

    func testSessionEndEndsItsLinksWithTheSameReason() throws {
        var state = try walking()
        let link = try share(&state)
        let outcome = try state.endSession("alice", "s_1", now: now)
        XCTAssertEqual(outcome.recipients(of: "session.ended"), ["bob", "share:" + link.id])
        XCTAssertTrue(outcome.sent("session.ended").allSatisfy { $0.message["reason"] == "ended" })
        XCTAssertEqual(outcome.closeViewers, ["share:" + link.id])
        XCTAssertTrue(outcome.changes.contains(.removeShare(id: link.id)))
        assertRelayError(try state.watch(tokenHash: Token.hash("tok-1"), now: now, presence: CoreTestPresence()), .notFound)
    }

    func testViewersHearTheOwnersAlarmsAndLostContact() throws {
        var state = try walking()
        let key = "share:" + (try share(&state)).id
        let raised = try state.raiseAlarm("alice", Request.AlarmRaise(text: "help"), presence: CoreTestPresence(), now: now)
        XCTAssertEqual(raised.recipients(of: "alarm"), ["bob", key])
        let alarmId = try XCTUnwrap(raised.reply("alarm")?["alarmId"]?.stringValue)
        let acked = try state.acknowledgeAlarm("bob", alarmId)
        XCTAssertEqual(acked.recipients(of: "alarm.acknowledged"), [key])
        XCTAssertFalse(acked.recipients(of: "alarm.acked").contains(key), "viewers get the 1.1 name")
        XCTAssertEqual(try state.cancelAlarm("alice", alarmId, reason: nil, now: now).recipients(of: "alarm.cancelled"), ["bob", key])

        state.ownerWentOffline("alice", at: now)
        let lost = state.fireDue(now: now + state.safety.lostContactGrace, presence: CoreTestPresence())
        XCTAssertEqual(lost.recipients(of: "session.lost"), ["bob", key])
        XCTAssertEqual(state.ownerCameBack("alice").recipients(of: "session.resumed"), ["bob", key])
    }

    func testAnotherUsersEventsDoNotReachViewers() throws {
        var state = try walking()
        let key = "share:" + (try share(&state)).id
        // bob's own alarm is not the owner's: alice's viewers do not hear of it.
        let raised = try state.raiseAlarm("bob", Request.AlarmRaise(text: "mine"), presence: CoreTestPresence(), now: now)
        XCTAssertFalse(raised.recipients(of: "alarm").contains(key))
        XCTAssertFalse(state.audience(of: "bob").contains(key))
    }

    func testASessionHasAtMostTwentyLiveLinks() throws {
        var state = try walking()
        for n in 0..<RelayState.sharesPerSession { _ = try share(&state, token: "t\(n)") }
        assertRelayError(try state.createShare("alice", "s_1", ttl: nil, token: "one-more", now: now), .rateLimited)
    }
}
