import Foundation
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// Follow-me sessions: start, invite, accept, decline, leave, end, list, and their errors.
final class SessionsEndToEndTests: EndToEndTestCase {
    func testStartInvitesAllFriendsByDefault() async throws {
        let (_, alice, bob, carol, dave) = try await cast()
        let reply = try await alice.client.ok("session.start", ["note": "walking home"])
        let session = try XCTUnwrap(reply["session"])
        let id = try XCTUnwrap(session["sessionId"]?.stringValue)
        XCTAssertEqual(session["owner"], ["username": .string(alice.username), "name": "Alice"])
        XCTAssertEqual(session["note"], "walking home")
        XCTAssertEqual(session["startedAt"]?.numberValue ?? 0, Date().timeIntervalSince1970 * 1000, accuracy: 60_000)
        XCTAssertEqual(session["observers"], [])
        XCTAssertEqual(session["invited"]?.stringSet, [bob.username, carol.username])

        for friend in [bob, carol] {
            let invite = try await friend.client.event("session.invite")
            XCTAssertEqual(invite["session"]?["sessionId"], .string(id))
            XCTAssertEqual(invite["session"]?["owner"]?["username"], .string(alice.username))
            XCTAssertEqual(invite["session"]?["note"], "walking home")
        }
        let daveInvites = try await dave.client.eventsAfterRoundTrip("session.invite")
        XCTAssertEqual(daveInvites, [], "only friends are invited")
        let ownerInvites = try await alice.client.eventsAfterRoundTrip("session.invite")
        XCTAssertEqual(ownerInvites, [], "the owner is not invited to her own session")
    }

    func testStartWithExplicitInviteList() async throws {
        let (_, alice, bob, carol, _) = try await cast()
        let reply = try await alice.client.ok("session.start", ["invite": [.string(bob.username)]])
        XCTAssertEqual(reply["session"]?["invited"], [.string(bob.username)])
        XCTAssertEqual(reply["session"]?["note"], .null)
        try await bob.client.event("session.invite")
        let carolInvites = try await carol.client.eventsAfterRoundTrip("session.invite")
        XCTAssertEqual(carolInvites, [])
    }

    func testAcceptDeclineLeaveAndEnd() async throws {
        let (_, alice, bob, carol, _) = try await cast()
        let start = try await alice.client.ok("session.start")
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.event("session.invite")
        try await carol.client.event("session.invite")

        // Bob accepts: reply has the session and the owner's position (none yet).
        let accepted = try await bob.client.ok("session.accept", ["sessionId": .string(id)])
        XCTAssertEqual(accepted["session"]?["sessionId"], .string(id))
        XCTAssertEqual(accepted["session"]?["observers"], [.string(bob.username)])
        XCTAssertEqual(accepted["position"], .null)
        let acceptedEvent = try await alice.client.event("session.accepted")
        XCTAssertEqual(acceptedEvent["sessionId"], .string(id))
        XCTAssertEqual(acceptedEvent["by"], .string(bob.username))

        // Accepting again is a conflict.
        let twice = try await bob.client.failure("session.accept", ["sessionId": .string(id)])
        XCTAssertEqual(twice, "conflict")

        // Carol declines.
        try await carol.client.ok("session.decline", ["sessionId": .string(id)])
        let declined = try await alice.client.event("session.declined")
        XCTAssertEqual(declined["sessionId"], .string(id))
        XCTAssertEqual(declined["by"], .string(carol.username))

        // Bob leaves.
        try await bob.client.ok("session.leave", ["sessionId": .string(id)])
        let left = try await alice.client.event("session.left")
        XCTAssertEqual(left["sessionId"], .string(id))
        XCTAssertEqual(left["by"], .string(bob.username))
        let leaveTwice = try await bob.client.failure("session.leave", ["sessionId": .string(id)])
        XCTAssertEqual(leaveTwice, "forbidden", "leaving a session one no longer follows")

        let list = try await alice.client.ok("session.list")
        XCTAssertEqual(list["own"]?["sessionId"], .string(id))
        XCTAssertEqual(list["own"]?["observers"], [])

        // Alice ends it: every invitee is told.
        try await alice.client.ok("session.end", ["sessionId": .string(id)])
        for friend in [bob, carol] {
            let ended = try await friend.client.event("session.ended")
            XCTAssertEqual(ended["sessionId"], .string(id))
            XCTAssertEqual(ended["reason"], "ended")
        }
        let afterEnd = try await alice.client.ok("session.list")
        XCTAssertEqual(afterEnd["own"], .null)
        let endTwice = try await alice.client.failure("session.end", ["sessionId": .string(id)])
        XCTAssertEqual(endTwice, "not_found")
        let acceptEnded = try await bob.client.failure("session.accept", ["sessionId": .string(id)])
        XCTAssertEqual(acceptEnded, "not_found")
        // And a new session may start.
        try await alice.client.ok("session.start")
    }

    func testAcceptReplyCarriesTheOwnersLastPosition() async throws {
        let (_, alice, bob, _, _) = try await cast()
        try await alice.client.ok("pos", ["lat": 57.7089, "lon": 11.9746, "acc": 8, "ts": 1_763_830_000_000])
        let start = try await alice.client.ok("session.start", ["invite": [.string(bob.username)]])
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.event("session.invite")
        let accepted = try await bob.client.ok("session.accept", ["sessionId": .string(id)])
        let position = try XCTUnwrap(accepted["position"])
        XCTAssertEqual(position["lat"], 57.7089)
        XCTAssertEqual(position["lon"], 11.9746)
        XCTAssertEqual(position["acc"], 8)
        XCTAssertEqual(position["ts"], 1_763_830_000_000)
    }

    func testInviteMoreFriends() async throws {
        let (_, alice, bob, carol, dave) = try await cast()
        let start = try await alice.client.ok("session.start", ["invite": [.string(bob.username)]])
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.event("session.invite")
        let reply = try await alice.client.ok("session.invite", ["sessionId": .string(id), "invite": [.string(carol.username)]])
        XCTAssertEqual(reply["session"]?["invited"]?.stringSet, [bob.username, carol.username])
        let invite = try await carol.client.event("session.invite")
        XCTAssertEqual(invite["session"]?["sessionId"], .string(id))
        let bobAgain = try await bob.client.eventsAfterRoundTrip("session.invite")
        XCTAssertEqual(bobAgain, [], "bob was already invited")

        var code = try await alice.client.failure("session.invite", ["sessionId": .string(id), "invite": [.string(dave.username)]])
        XCTAssertEqual(code, "forbidden", "dave is not alice's friend")
        code = try await alice.client.failure("session.invite", ["sessionId": .string(id)])
        XCTAssertEqual(code, "bad_request", "invite is required")
        code = try await alice.client.failure("session.invite", ["sessionId": .string(id), "invite": .string(carol.username)])
        XCTAssertEqual(code, "bad_request", "invite must be an array")
        code = try await alice.client.failure("session.invite", ["sessionId": "s_nope", "invite": [.string(carol.username)]])
        XCTAssertEqual(code, "not_found")
        code = try await bob.client.failure("session.invite", ["sessionId": .string(id), "invite": [.string(carol.username)]])
        XCTAssertEqual(code, "forbidden", "only the owner invites")
        let daveInvites = try await dave.client.eventsAfterRoundTrip("session.invite")
        XCTAssertEqual(daveInvites, [])
    }

    func testSessionList() async throws {
        let (_, alice, bob, carol, _) = try await cast()
        try await befriend(bob, carol)
        let aliceStart = try await alice.client.ok("session.start", ["invite": [.string(bob.username)], "note": "a"])
        let aliceID = try XCTUnwrap(aliceStart["session"]?["sessionId"]?.stringValue)
        let carolStart = try await carol.client.ok("session.start", ["invite": [.string(bob.username)], "note": "c"])
        let carolID = try XCTUnwrap(carolStart["session"]?["sessionId"]?.stringValue)
        try await bob.client.ok("session.accept", ["sessionId": .string(aliceID)])

        let bobList = try await bob.client.ok("session.list")
        XCTAssertEqual(bobList["own"], .null)
        XCTAssertEqual(bobList["following"]?.arrayValue?.map { $0["sessionId"] }, [.string(aliceID)])
        XCTAssertEqual(bobList["invites"]?.arrayValue?.map { $0["sessionId"] }, [.string(carolID)])
        XCTAssertEqual(bobList["following"]?[0]?["owner"]?["username"], .string(alice.username))
        XCTAssertEqual(bobList["invites"]?[0]?["note"], "c")

        let aliceList = try await alice.client.ok("session.list")
        XCTAssertEqual(aliceList["own"]?["sessionId"], .string(aliceID))
        XCTAssertEqual(aliceList["own"]?["observers"], [.string(bob.username)])
        XCTAssertEqual(aliceList["following"], [])
        XCTAssertEqual(aliceList["invites"], [])
        for key in ["sessionId", "owner", "note", "startedAt", "observers", "invited"] {
            XCTAssertNotNil(aliceList["own"]?[key], "session object has \(key)")
        }
    }

    func testSessionErrors() async throws {
        let (_, alice, bob, carol, dave) = try await cast()
        var code = try await alice.client.failure("session.start", ["invite": [.string(dave.username)]])
        XCTAssertEqual(code, "forbidden", "inviting a non-friend")
        code = try await alice.client.failure("session.start", ["invite": [.string(TestRelay.uniqueUsername("nobody"))]])
        XCTAssertEqual(code, "not_found", "inviting an unknown user")
        code = try await alice.client.failure("session.start", ["invite": "bob"])
        XCTAssertEqual(code, "bad_request", "invite must be an array")
        code = try await alice.client.failure("session.start", ["note": 5])
        XCTAssertEqual(code, "bad_request", "note must be a string")
        let noSession = try await alice.client.ok("session.list")
        XCTAssertEqual(noSession["own"], .null, "failed starts created nothing")

        let start = try await alice.client.ok("session.start", ["invite": [.string(bob.username)]])
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        code = try await alice.client.failure("session.start")
        XCTAssertEqual(code, "conflict", "a second active session")

        code = try await carol.client.failure("session.accept", ["sessionId": .string(id)])
        XCTAssertEqual(code, "forbidden", "carol is not invited")
        code = try await dave.client.failure("session.accept", ["sessionId": .string(id)])
        XCTAssertEqual(code, "forbidden", "dave is not even a friend")
        code = try await carol.client.failure("session.decline", ["sessionId": .string(id)])
        XCTAssertEqual(code, "forbidden", "declining without an invitation")
        code = try await bob.client.failure("session.end", ["sessionId": .string(id)])
        XCTAssertEqual(code, "forbidden", "only the owner ends a session")
        code = try await bob.client.failure("session.leave", ["sessionId": .string(id)])
        XCTAssertEqual(code, "forbidden", "bob has not accepted, so cannot leave")
        code = try await bob.client.failure("session.accept", ["sessionId": "s_does_not_exist"])
        XCTAssertEqual(code, "not_found")
        code = try await bob.client.failure("session.decline", ["sessionId": "s_does_not_exist"])
        XCTAssertEqual(code, "not_found")
        code = try await bob.client.failure("session.leave", ["sessionId": "s_does_not_exist"])
        XCTAssertEqual(code, "not_found")
        code = try await alice.client.failure("session.end", ["sessionId": "s_does_not_exist"])
        XCTAssertEqual(code, "not_found")
        code = try await bob.client.failure("session.accept")
        XCTAssertEqual(code, "bad_request", "sessionId is required")
        code = try await bob.client.failure("session.accept", ["sessionId": 12])
        XCTAssertEqual(code, "bad_request", "sessionId must be a string")

        // The session is untouched by all of that.
        let list = try await alice.client.ok("session.list")
        XCTAssertEqual(list["own"]?["sessionId"], .string(id))
        XCTAssertEqual(list["own"]?["invited"], [.string(bob.username)])
        XCTAssertEqual(list["own"]?["observers"], [])
        try await bob.client.ok("session.accept", ["sessionId": .string(id)])
    }

    func testDeclineThenAcceptIsRefused() async throws {
        let (_, alice, bob, _, _) = try await cast()
        let start = try await alice.client.ok("session.start", ["invite": [.string(bob.username)]])
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.ok("session.decline", ["sessionId": .string(id)])
        let code = try await bob.client.failure("session.accept", ["sessionId": .string(id)])
        XCTAssertTrue(["forbidden", "conflict"].contains(code), "accepting a declined invite: \(code)")
        let list = try await bob.client.ok("session.list")
        XCTAssertEqual(list["invites"], [], "a declined invite is no longer open")
        XCTAssertEqual(list["following"], [])
    }

    func testOfflineInviteeGetsTheInviteAtSignIn() async throws {
        let (relay, alice, bob, _, _) = try await cast()
        await bob.client.close()
        try await alice.client.event("presence", where: { $0["username"] == .string(bob.username) && $0["online"] == false })
        let start = try await alice.client.ok("session.start", ["invite": [.string(bob.username)]])
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        let bobBack = try await relay.reconnect(bob)
        let invite = try await bobBack.client.event("session.invite")
        XCTAssertEqual(invite["session"]?["sessionId"], .string(id))
        try await bobBack.client.ok("session.accept", ["sessionId": .string(id)])
        try await alice.client.event("session.accepted")
        // Once accepted, the invite is no longer "open": a new sign-in does not repeat it.
        let bobPhone = try await relay.device(of: bob)
        let repeated = try await bobPhone.eventsAfterRoundTrip("session.invite")
        XCTAssertEqual(repeated, [])
    }

    func testRemovingAFriendEndsTheirPartInSessions() async throws {
        let (_, alice, bob, _, _) = try await cast()
        let start = try await alice.client.ok("session.start", ["invite": [.string(bob.username)]])
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.ok("session.accept", ["sessionId": .string(id)])
        try await alice.client.event("session.accepted")
        try await alice.client.ok("friend.remove", ["username": .string(bob.username)])
        let ended = try await bob.client.event("session.ended")
        XCTAssertEqual(ended["sessionId"], .string(id))
        try await alice.client.ok("pos", ["lat": 1, "lon": 2])
        let positions = try await bob.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(positions, [], "a removed friend no longer observes")
        let list = try await bob.client.ok("session.list")
        XCTAssertEqual(list["following"], [])
    }
}
