import Foundation
import HomewardProtocol
import XCTest

/// presence events on a user's first connection and last disconnection, and delivery to every device.
final class PresenceEndToEndTests: EndToEndTestCase {
    func testPresenceOnFirstConnectAndLastDisconnect() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)

        // Bob's second device: not his first connection, so no presence event.
        let bobPhone = try await relay.device(of: bob, label: "bob-phone")
        var stray = try await alice.client.eventsAfterRoundTrip("presence")
        XCTAssertEqual(stray, [], "a second connection is not a presence change")

        // Closing both: whichever the relay handles last is the last connection, so exactly one offline event.
        await bobPhone.close()
        await bob.client.close()
        let offline = try await alice.client.event("presence")
        XCTAssertEqual(offline["username"], .string(bob.username))
        XCTAssertEqual(offline["online"], false)
        let lastSeen = try XCTUnwrap(offline["lastSeen"]?.numberValue, "lastSeen is a number: \(offline)")
        XCTAssertEqual(lastSeen, Date().timeIntervalSince1970 * 1000, accuracy: 60_000)
        stray = try await alice.client.eventsAfterRoundTrip("presence")
        XCTAssertEqual(stray, [], "only the last disconnection is announced")

        // First connection again: online.
        let bobBack = try await relay.reconnect(bob)
        let online = try await alice.client.event("presence")
        XCTAssertEqual(online["username"], .string(bob.username))
        XCTAssertEqual(online["online"], true)
        XCTAssertNotNil(online["lastSeen"]?.numberValue)
        let list = try await alice.client.ok("friend.list")
        XCTAssertEqual(list["friends"]?[0]?["online"], true)
        // Bob himself hears nothing about his own presence.
        let own = try await bobBack.client.eventsAfterRoundTrip("presence")
        XCTAssertEqual(own.filter { $0["username"] == .string(bob.username) }, [])
    }

    func testSigningInAgainOnTheSameConnectionIsNotAPresenceChange() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)
        // Bob's only connection stays open throughout: no connection opens or closes.
        try await bob.client.ok("hello", ["token": .string(bob.token)])
        let heard = try await alice.client.eventsAfterRoundTrip("presence")
        XCTAssertEqual(heard, [], "bob's connection neither opened nor closed, yet alice heard: \(heard)")
        let list = try await alice.client.ok("friend.list")
        XCTAssertEqual(list["friends"]?[0]?["online"], true)
    }

    func testOnlyFriendsHearPresence() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        let stranger = try await relay.user("stranger")
        try await befriend(alice, bob)
        await bob.client.close()
        try await alice.client.event("presence", where: { $0["online"] == false })
        _ = try await relay.reconnect(bob)
        try await alice.client.event("presence", where: { $0["online"] == true })
        let strangerHeard = try await stranger.client.eventsAfterRoundTrip("presence")
        XCTAssertEqual(strangerHeard, [])
    }

    func testLogoutOfTheLastConnectionIsAnnounced() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)
        try await bob.client.ok("logout")
        let offline = try await alice.client.event("presence")
        XCTAssertEqual(offline["username"], .string(bob.username))
        XCTAssertEqual(offline["online"], false)
        let list = try await alice.client.ok("friend.list")
        XCTAssertEqual(list["friends"]?[0]?["online"], false)
    }

    func testEveryDeviceOfAUserGetsEveryEvent() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)
        let alicePhone = try await relay.device(of: alice, label: "alice-phone")
        let aliceTablet = try await relay.device(of: alice, label: "alice-tablet")

        let carol = try await relay.user("carol")
        try await carol.client.ok("friend.request", ["username": .string(alice.username)])
        for device in [alice.client, alicePhone, aliceTablet] {
            let event = try await device.event("friend.request")
            XCTAssertEqual(event["from"]?["username"], .string(carol.username), device.label)
        }
        await bob.client.close()
        for device in [alice.client, alicePhone, aliceTablet] {
            let event = try await device.event("presence")
            XCTAssertEqual(event["online"], false, device.label)
            let extra = try await device.eventsAfterRoundTrip("presence")
            XCTAssertEqual(extra, [], "\(device.label) got the event more than once")
        }
    }
}
