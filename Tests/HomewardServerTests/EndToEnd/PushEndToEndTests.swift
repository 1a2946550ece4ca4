import Crypto
import Foundation
import HomewardProtocol
import HomewardWebPush
import XCTest

/// Push (protocol 1.1) through the whole relay: the key clients subscribe with, and subscriptions
/// as a user manages them. Delivery to a push service is covered by tests/python/test_push.py (a
/// push service double that decrypts with third-party code) and `PushDeliveryWorkerTests`.
final class PushEndToEndTests: EndToEndTestCase {
    private func subscription(endpoint: String) -> [(String, JSONValue)] {
        [("kind", "webpush"), ("endpoint", .string(endpoint)),
         ("keys", .object([("p256dh", .string(Base64URL.encode(P256.KeyAgreement.PrivateKey().publicKey.x963Representation))),
                           ("auth", .string(Base64URL.encode([UInt8](repeating: 9, count: 16))))]))]
    }

    func testSignInAndGETPushKeyGiveTheSameVAPIDKeyAndItSurvivesARestart() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let hello = try await relay.connect().ok("hello", ["token": .string(alice.token)])
        XCTAssertEqual(hello["features"], ["share", "push", "friends-map", "trail"])
        let key = try XCTUnwrap(hello["vapidPublicKey"]?.stringValue)
        XCTAssertEqual(Base64URL.decode(key)?.count, 65)

        let published = try await relay.http("/v1/push/key")
        XCTAssertEqual(published.status, .ok)
        XCTAssertEqual(try JSONParser.parse(published.body)["vapidPublicKey"], .string(key))

        try await relay.restart()
        let again = try await relay.connect().ok("hello", ["token": .string(alice.token)])
        XCTAssertEqual(again["vapidPublicKey"], .string(key), "a new key would orphan every browser subscription")
    }

    func testSubscriptionsAreTheUsersOwnAndSurviveARestart() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        let made = try await alice.client.ok("push.subscribe", subscription(endpoint: "https://8.8.8.8/push/a"))
        let id = try XCTUnwrap(made["subscriptionId"]?.stringValue)
        let bobsUnsubscribe = try await bob.client.failure("push.unsubscribe", ["subscriptionId": .string(id)])
        XCTAssertEqual(bobsUnsubscribe, "not_found")
        let bobsList = try await bob.client.ok("push.list")["subscriptions"]
        XCTAssertEqual(bobsList, .array([]))

        try await relay.restart()
        let back = try await relay.reconnect(alice)
        guard case .array(let listed)? = try await back.client.ok("push.list")["subscriptions"], listed.count == 1 else {
            return XCTFail("alice's subscription was not kept")
        }
        XCTAssertEqual(listed[0]["subscriptionId"], .string(id))
        XCTAssertEqual(listed[0]["endpoint"], "https://8.8.8.8/push/a")
        XCTAssertNil(listed[0]["keys"], "push.list never shows the keys")
        try await back.client.ok("push.unsubscribe", ["subscriptionId": .string(id)])
        let leftAfterUnsubscribe = try await back.client.ok("push.list")["subscriptions"]
        XCTAssertEqual(leftAfterUnsubscribe, .array([]))
    }

    func testRefusedSubscriptionsKeepTheConnectionAndStoreNothing() async throws {
        let relay = try await startRelay { $0.push.maxSubscriptionsPerUser = 1 }
        let alice = try await relay.user("alice")
        let plainHTTP = try await alice.client.failure("push.subscribe", subscription(endpoint: "http://8.8.8.8/push"))
        XCTAssertEqual(plainHTTP, "bad_request")
        let privateAddress = try await alice.client.failure("push.subscribe", subscription(endpoint: "https://10.0.0.1/push"))
        XCTAssertEqual(privateAddress, "bad_request")
        try await alice.client.ok("push.subscribe", subscription(endpoint: "https://8.8.8.8/push/1"))
        let overTheLimit = try await alice.client.failure("push.subscribe", subscription(endpoint: "https://8.8.8.8/push/2"))
        XCTAssertEqual(overTheLimit, "rate_limited")
        try await alice.client.ok("push.subscribe", subscription(endpoint: "https://8.8.8.8/push/1"))  // the same endpoint renews
        guard case .array(let list)? = try await alice.client.ok("push.list")["subscriptions"] else { return XCTFail("no list") }
        XCTAssertEqual(list.count, 1)
        try await alice.client.ok("ping")
    }
}
