import Foundation
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// Panic alarms: raise, ack, cancel, contacts, offline delivery, and positions while active.
final class AlarmsEndToEndTests: EndToEndTestCase {
    func testRaiseReachesOnlineFriends() async throws {
        let (_, alice, bob, carol, dave) = try await cast()
        let reply = try await alice.client.ok("alarm.raise", ["text": "help, at the station", "lat": 57.7, "lon": 11.97, "acc": 15])
        let alarm = try XCTUnwrap(reply["alarm"])
        let id = try XCTUnwrap(alarm["alarmId"]?.stringValue)
        XCTAssertEqual(alarm["from"], ["username": .string(alice.username), "name": "Alice"])
        XCTAssertEqual(alarm["text"], "help, at the station")
        XCTAssertEqual(alarm["position"]?["lat"], 57.7)
        XCTAssertEqual(alarm["position"]?["lon"], 11.97)
        XCTAssertEqual(alarm["position"]?["acc"], 15)
        XCTAssertEqual(alarm["createdAt"]?.numberValue ?? 0, Date().timeIntervalSince1970 * 1000, accuracy: 60_000)
        XCTAssertEqual(alarm["acked"], [])
        let recipients = try XCTUnwrap(reply["recipients"]?.arrayValue)
        XCTAssertEqual(Set(recipients.compactMap { $0["username"]?.stringValue }), [bob.username, carol.username])
        for recipient in recipients { XCTAssertEqual(recipient["online"], true, "\(recipient)") }

        for friend in [bob, carol] {
            let event = try await friend.client.event("alarm")
            XCTAssertEqual(event["alarm"]?["alarmId"], .string(id))
            XCTAssertEqual(event["alarm"]?["from"]?["username"], .string(alice.username))
            XCTAssertEqual(event["alarm"]?["text"], "help, at the station")
        }
        let daveAlarms = try await dave.client.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(daveAlarms, [])
        let ownAlarms = try await alice.client.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(ownAlarms, [], "the owner is not a recipient")
    }

    func testDefaultTextAndLastKnownPosition() async throws {
        let (_, alice, bob, _, _) = try await cast()
        try await alice.client.ok("pos", ["lat": 48.85, "lon": 2.35, "ts": 1_700_000_000_000])
        let reply = try await alice.client.ok("alarm.raise")
        let text = try XCTUnwrap(reply["alarm"]?["text"]?.stringValue)
        XCTAssertFalse(text.isEmpty, "text defaults to a generic call for help")
        XCTAssertEqual(reply["alarm"]?["position"]?["lat"], 48.85, "the owner's last known position")
        XCTAssertEqual(reply["alarm"]?["position"]?["lon"], 2.35)
        let event = try await bob.client.event("alarm")
        XCTAssertEqual(event["alarm"]?["text"], .string(text))
    }

    func testRaiseWithoutAnyPosition() async throws {
        let (_, alice, bob, _, _) = try await cast()
        let reply = try await alice.client.ok("alarm.raise")
        XCTAssertEqual(reply["alarm"]?["position"], .null)
        try await bob.client.event("alarm")
    }

    func testOfflineFriendGetsTheAlarmAtSignIn() async throws {
        let (relay, alice, bob, carol, _) = try await cast()
        await bob.client.close()
        try await alice.client.event("presence", where: { $0["username"] == .string(bob.username) && $0["online"] == false })
        let reply = try await alice.client.ok("alarm.raise", ["text": "come quick"])
        let id = try XCTUnwrap(reply["alarm"]?["alarmId"]?.stringValue)
        let recipients = try XCTUnwrap(reply["recipients"]?.arrayValue)
        let online = Dictionary(uniqueKeysWithValues: recipients.map { ($0["username"]?.stringValue ?? "?", $0["online"]) })
        XCTAssertEqual(online[bob.username], false)
        XCTAssertEqual(online[carol.username], true)
        try await carol.client.event("alarm")

        // Bob signs in with his password on a new connection: the alarm is waiting.
        let phone = try await relay.connect(label: "bob-login")
        try await phone.ok("login", ["username": .string(bob.username), "password": .string(bob.password)])
        let event = try await phone.event("alarm")
        XCTAssertEqual(event["alarm"]?["alarmId"], .string(id))
        XCTAssertEqual(event["alarm"]?["text"], "come quick")
    }

    func testAckGoesToOwnerAndOtherRecipients() async throws {
        let (_, alice, bob, carol, _) = try await cast()
        let reply = try await alice.client.ok("alarm.raise")
        let id = try XCTUnwrap(reply["alarm"]?["alarmId"]?.stringValue)
        try await bob.client.event("alarm")
        try await carol.client.event("alarm")

        try await bob.client.ok("alarm.ack", ["alarmId": .string(id)])
        for client in [alice.client, carol.client] {
            let acked = try await client.event("alarm.acked")
            XCTAssertEqual(acked["alarmId"], .string(id), client.label)
            XCTAssertEqual(acked["by"], .string(bob.username), client.label)
        }
        let own = try await bob.client.eventsAfterRoundTrip("alarm.acked")
        XCTAssertEqual(own, [], "the acknowledging recipient is not told of his own ack")

        let errors = try await alice.client.failure("alarm.ack", ["alarmId": .string(id)])
        XCTAssertEqual(errors, "forbidden", "the owner is not a recipient")
    }

    func testAckedListShowsInTheBacklog() async throws {
        let (relay, alice, bob, carol, _) = try await cast()
        let reply = try await alice.client.ok("alarm.raise")
        let id = try XCTUnwrap(reply["alarm"]?["alarmId"]?.stringValue)
        try await bob.client.ok("alarm.ack", ["alarmId": .string(id)])
        try await carol.client.event("alarm.acked")
        let carolPhone = try await relay.device(of: carol)
        let event = try await carolPhone.event("alarm")
        XCTAssertEqual(event["alarm"]?["alarmId"], .string(id))
        XCTAssertEqual(event["alarm"]?["acked"], [.string(bob.username)])
    }

    func testCancel() async throws {
        let (relay, alice, bob, carol, _) = try await cast()
        let reply = try await alice.client.ok("alarm.raise")
        let id = try XCTUnwrap(reply["alarm"]?["alarmId"]?.stringValue)
        try await bob.client.event("alarm")

        let forbidden = try await bob.client.failure("alarm.cancel", ["alarmId": .string(id)])
        XCTAssertEqual(forbidden, "forbidden", "only the owner cancels")

        try await alice.client.ok("alarm.cancel", ["alarmId": .string(id), "reason": "false alarm"])
        for friend in [bob, carol] {
            let cancelled = try await friend.client.event("alarm.cancelled")
            XCTAssertEqual(cancelled["alarmId"], .string(id))
            XCTAssertEqual(cancelled["reason"], "false alarm")
        }
        let ackCancelled = try await bob.client.failure("alarm.ack", ["alarmId": .string(id)])
        XCTAssertEqual(ackCancelled, "not_found")
        let cancelTwice = try await alice.client.failure("alarm.cancel", ["alarmId": .string(id)])
        XCTAssertEqual(cancelTwice, "not_found")

        // A cancelled alarm is not delivered at the next sign-in.
        let bobPhone = try await relay.device(of: bob)
        let stale = try await bobPhone.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(stale, [])
    }

    func testCancelWithoutReason() async throws {
        let (_, alice, bob, _, _) = try await cast()
        let reply = try await alice.client.ok("alarm.raise")
        let id = try XCTUnwrap(reply["alarm"]?["alarmId"]?.stringValue)
        try await alice.client.ok("alarm.cancel", ["alarmId": .string(id)])
        let cancelled = try await bob.client.event("alarm.cancelled")
        XCTAssertEqual(cancelled["alarmId"], .string(id))
        XCTAssertNotNil(cancelled["reason"], "reason is always present")
    }

    func testExplicitRecipients() async throws {
        let (_, alice, bob, carol, dave) = try await cast()
        let forbidden = try await alice.client.failure("alarm.raise", ["to": [.string(dave.username)]])
        XCTAssertEqual(forbidden, "forbidden", "dave is not a friend")
        let mixed = try await alice.client.failure("alarm.raise", ["to": [.string(bob.username), .string(dave.username)]])
        XCTAssertEqual(mixed, "forbidden")
        let daveAlarms = try await dave.client.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(daveAlarms, [])
        let bobEarly = try await bob.client.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(bobEarly, [], "a refused alarm reaches nobody")

        let reply = try await alice.client.ok("alarm.raise", ["to": [.string(carol.username)]])
        XCTAssertEqual(reply["recipients"]?.arrayValue?.map { $0["username"] }, [.string(carol.username)])
        try await carol.client.event("alarm")
        let bobAlarms = try await bob.client.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(bobAlarms, [])
        let notRecipient = try await bob.client.failure("alarm.ack", ["alarmId": reply["alarm"]?["alarmId"] ?? .null])
        XCTAssertEqual(notRecipient, "forbidden")
    }

    func testContacts() async throws {
        let (_, alice, bob, carol, dave) = try await cast()
        let empty = try await alice.client.ok("alarm.contacts")
        XCTAssertEqual(empty["usernames"], [])
        let set = try await alice.client.ok("alarm.contacts", ["usernames": [.string(bob.username)]])
        XCTAssertEqual(set["usernames"], [.string(bob.username)])
        let get = try await alice.client.ok("alarm.contacts")
        XCTAssertEqual(get["usernames"], [.string(bob.username)])
        let forbidden = try await alice.client.failure("alarm.contacts", ["usernames": [.string(dave.username)]])
        XCTAssertEqual(forbidden, "forbidden")
        let bad = try await alice.client.failure("alarm.contacts", ["usernames": .string(bob.username)])
        XCTAssertEqual(bad, "bad_request")
        let unchanged = try await alice.client.ok("alarm.contacts")
        XCTAssertEqual(unchanged["usernames"], [.string(bob.username)])

        // Without `to`, the alarm goes to the contacts only.
        let reply = try await alice.client.ok("alarm.raise")
        XCTAssertEqual(reply["recipients"]?.arrayValue?.map { $0["username"] }, [.string(bob.username)])
        try await bob.client.event("alarm")
        let carolAlarms = try await carol.client.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(carolAlarms, [])
        // `to` overrides the contacts.
        let explicit = try await alice.client.ok("alarm.raise", ["to": [.string(carol.username)]])
        XCTAssertEqual(explicit["recipients"]?.arrayValue?.map { $0["username"] }, [.string(carol.username)])
        try await carol.client.event("alarm")
    }

    func testPositionsStreamToRecipientsWhileActive() async throws {
        let (_, alice, bob, carol, dave) = try await cast()
        let reply = try await alice.client.ok("alarm.raise", ["to": [.string(bob.username)]])
        let id = try XCTUnwrap(reply["alarm"]?["alarmId"]?.stringValue)
        // The alarm event is sent after the relay has set up the audience.
        try await bob.client.event("alarm")
        try await alice.client.ok("pos", ["lat": 3, "lon": 4])
        let pos = try await bob.client.event("pos")
        XCTAssertEqual(pos["from"], .string(alice.username))
        XCTAssertEqual(pos["lat"], 3)
        let more = try await bob.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(more, [])
        for other in [carol, dave] {
            let leaked = try await other.client.eventsAfterRoundTrip("pos")
            XCTAssertEqual(leaked, [], other.username)
        }

        try await alice.client.ok("alarm.cancel", ["alarmId": .string(id)])
        try await bob.client.event("alarm.cancelled")
        try await alice.client.ok("pos", ["lat": 5, "lon": 6])
        let afterCancel = try await bob.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(afterCancel, [], "no positions once the alarm is cancelled")
    }

    func testSessionObserverWhoIsAlsoAlarmRecipientGetsEachPositionOnce() async throws {
        let (_, alice, bob, _, _) = try await cast()
        let start = try await alice.client.ok("session.start", ["invite": [.string(bob.username)]])
        let sessionID = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.ok("session.accept", ["sessionId": .string(sessionID)])
        try await alice.client.event("session.accepted")
        try await alice.client.ok("alarm.raise", ["to": [.string(bob.username)]])
        try await bob.client.event("alarm")
        try await alice.client.ok("pos", ["lat": 7, "lon": 8])
        try await bob.client.event("pos")
        let extra = try await bob.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(extra, [], "an observer who is also a recipient gets each position exactly once")
    }

    func testAlarmErrors() async throws {
        let (_, alice, bob, _, _) = try await cast()
        var code = try await alice.client.failure("alarm.raise", ["lat": 50])
        XCTAssertEqual(code, "bad_request", "lat without lon")
        code = try await alice.client.failure("alarm.raise", ["lat": 91, "lon": 0])
        XCTAssertEqual(code, "bad_request", "lat out of range")
        code = try await alice.client.failure("alarm.raise", ["text": 5])
        XCTAssertEqual(code, "bad_request", "text must be a string")
        code = try await alice.client.failure("alarm.raise", ["to": .string(bob.username)])
        XCTAssertEqual(code, "bad_request", "to must be an array")
        code = try await alice.client.failure("alarm.raise", ["to": [.string(TestRelay.uniqueUsername("nobody"))]])
        XCTAssertEqual(code, "not_found", "to an unknown user")
        code = try await bob.client.failure("alarm.ack", ["alarmId": "a_unknown"])
        XCTAssertEqual(code, "not_found")
        code = try await bob.client.failure("alarm.ack")
        XCTAssertEqual(code, "bad_request")
        code = try await alice.client.failure("alarm.cancel", ["alarmId": "a_unknown"])
        XCTAssertEqual(code, "not_found")
        code = try await alice.client.failure("alarm.cancel")
        XCTAssertEqual(code, "bad_request")
        let alarms = try await bob.client.eventsAfterRoundTrip("alarm")
        XCTAssertEqual(alarms, [], "no failed raise reached anyone")
    }

    func testRemovingAFriendCancelsTheirAlarmLink() async throws {
        let (_, alice, bob, carol, _) = try await cast()
        let reply = try await alice.client.ok("alarm.raise")
        let id = try XCTUnwrap(reply["alarm"]?["alarmId"]?.stringValue)
        try await bob.client.event("alarm")
        try await carol.client.event("alarm")
        try await alice.client.ok("friend.remove", ["username": .string(bob.username)])
        let cancelled = try await bob.client.event("alarm.cancelled")
        XCTAssertEqual(cancelled["alarmId"], .string(id))
        let code = try await bob.client.failure("alarm.ack", ["alarmId": .string(id)])
        XCTAssertEqual(code, "forbidden", "bob is no longer a recipient")
        try await alice.client.ok("pos", ["lat": 1, "lon": 1])
        try await carol.client.event("pos")
        let bobPos = try await bob.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(bobPos, [])
    }
}
