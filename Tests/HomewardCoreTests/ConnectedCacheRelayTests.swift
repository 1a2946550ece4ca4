import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import XCTest

/// A relay caching only its connected users (`CacheMode.connected`) on SQLite: started on a store filled with users,
/// it answers a signed-in user's requests about users it does not hold as a whole cache would, by admitting their
/// part before the rule runs, and holds the part of no one else.
final class ConnectedCacheRelayTests: XCTestCase {
    /// Users nobody here names: the cache must not hold them.
    private static let others = (0..<60).map { String(format: "user%03d", $0) }

    private func harness(friends: [(String, String)] = [("alice", "bob"), ("alice", "carol")],
                         seed: [StoreChange] = []) async throws -> SafetyHarness {
        try await SafetyHarness(users: ["alice", "bob", "carol", "dave"] + Self.others, friends: friends, cache: .connected, seed: seed)
    }

    func testStartsWithNobodyResidentAndAdmitsOnlyWhoSignsInOrIsNamed() async throws {
        let harness = try await harness()
        let residents0 = await harness.relay.residents
        XCTAssertEqual(residents0, [], "nobody's part is loaded at start")
        let alice = try await harness.connect("alice")
        let residents1 = await harness.relay.residents
        XCTAssertEqual(residents1.map { $0.isSuperset(of: ["alice"]) }, true)
        _ = try await harness.ok(.friendRequest(username: "dave"), as: alice.1, sink: alice.0)
        let maybeResidents = await harness.relay.residents
        let residents = try XCTUnwrap(maybeResidents)
        XCTAssertTrue(residents.isSuperset(of: ["alice", "dave"]), "\(residents)")
        XCTAssertTrue(residents.isDisjoint(with: Self.others), "users nobody named stay out of the cache: \(residents)")
        XCTAssertLessThanOrEqual(residents.count, 4)
    }

    func testFriendRequestToAUserNotResidentReachesThemAndTheirAcceptReachesTheRequester() async throws {
        let harness = try await harness()
        let alice = try await harness.connect("alice")
        // Without dave's part, the rules would answer not_found: no profile of theirs in the cache.
        _ = try await harness.ok(.friendRequest(username: "dave"), as: alice.1, sink: alice.0)
        let dave = try await harness.connect("dave")
        XCTAssertEqual(dave.0.events("friend.request").count, 1, "the request is in dave's backlog: \(dave.0.messages)")
        _ = try await harness.ok(.friendAccept(username: "alice"), as: dave.1, sink: dave.0)
        XCTAssertEqual(alice.0.events("friend.added").count, 1)
        let list = try await harness.ok(.friendList, as: alice.1, sink: alice.0)
        let names = list.field("friends")?.arrayValue?.compactMap { $0["username"]?.stringValue } ?? []
        XCTAssertEqual(Set(names), ["bob", "carol", "dave"])
    }

    func testARequestFromABlockedUserStaysHiddenWhenTheBlockerIsNotResident() async throws {
        let harness = try await harness(seed: [.addBlock(blocker: "dave", blocked: "alice", at: 1)])
        let alice = try await harness.connect("alice")
        // dave's block is in dave's part only: read before the rule decides, the request is kept from him.
        let reply = await harness.serve(.friendRequest(username: "dave"), as: alice.1, sink: alice.0)
        XCTAssertNoThrow(try reply.get(), "a blocked user's request looks like any other to them")
        let dave = try await harness.connect("dave")
        XCTAssertTrue(dave.0.events("friend.request").isEmpty, "\(dave.0.messages)")
        let list = try await harness.ok(.friendList, as: dave.1, sink: dave.0)
        XCTAssertEqual(list.field("incoming")?.arrayValue?.count ?? 0, 0, "\(list.fields)")
    }

    func testSessionInviteToAFriendNotResidentReachesThemAtSignIn() async throws {
        let harness = try await harness()
        let alice = try await harness.connect("alice")
        _ = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: alice.1, sink: alice.0)
        let bob = try await harness.connect("bob")
        XCTAssertEqual(bob.0.events("session.invite").count, 1, "\(bob.0.messages)")
        let list = try await harness.ok(.sessionList, as: bob.1, sink: bob.0)
        XCTAssertEqual(list.field("invites")?.arrayValue?.count, 1, "\(list.fields)")
    }

    func testAlarmToContactsNotResidentReachesThem() async throws {
        let harness = try await harness()
        let alice = try await harness.connect("alice")
        _ = try await harness.ok(.alarmContacts(usernames: ["bob", "carol"]), as: alice.1, sink: alice.0)
        let carol = try await harness.connect("carol")
        _ = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "help")), as: alice.1, sink: alice.0)
        XCTAssertEqual(carol.0.events("alarm").count, 1, "a contact connected here hears it at once")
        let bob = try await harness.connect("bob")
        XCTAssertEqual(bob.0.events("alarm").count, 1, "a contact not resident when it was raised gets it at sign-in: \(bob.0.messages)")
    }

    func testSearchFindsUsersNotResident() async throws {
        let harness = try await harness()
        let alice = try await harness.connect("alice")
        let reply = try await harness.ok(.userSearch(query: "user00"), as: alice.1, sink: alice.0)
        let names = reply.field("users")?.arrayValue?.compactMap { $0["username"]?.stringValue } ?? []
        XCTAssertEqual(names, (0..<10).map { String(format: "user%03d", $0) }, "read from the store, not the cache")
        let maybeResidents = await harness.relay.residents
        let residents = try XCTUnwrap(maybeResidents)
        XCTAssertTrue(residents.isDisjoint(with: Self.others), "a search admits nobody")
    }

    func testAMissedCheckInOfAnOwnerNotResidentAlarmsTheirFriends() async throws {
        let harness = try await harness()
        let alice = try await harness.connect("alice")
        let deadline = harness.clock.now + 60_000
        _ = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob"], checkInBy: deadline)), as: alice.1, sink: alice.0)
        await harness.disconnect(alice.1, alice.0)
        // A new relay on the same store: alice's session is loaded for its deadline, alice herself is not resident.
        try await harness.restart()
        let notResident = await harness.relay.residents
        XCTAssertEqual(notResident, [])
        let needed = await harness.relay.usersNeededForDueWork(at: deadline + 1)
        XCTAssertTrue(needed.contains("alice"), "the due check-in names its owner: \(needed)")
        let bob = try await harness.connect("bob")
        bob.0.clear()
        await harness.advance(by: 61_000)
        XCTAssertEqual(bob.0.events("alarm").count, 1, "the missed check-in alarms the observer: \(bob.0.messages)")
        let maybeResidents = await harness.relay.residents
        let residents = try XCTUnwrap(maybeResidents)
        XCTAssertTrue(residents.contains("alice"), "the owner was admitted before the timer fired")
    }

    func testAWholeCacheHoldsEveryUserAndAdmitsNobody() async throws {
        let harness = try await SafetyHarness(users: ["alice", "dave"], friends: [])
        let alice = try await harness.connect("alice")
        _ = try await harness.ok(.friendRequest(username: "dave"), as: alice.1, sink: alice.0)
        let residents = await harness.relay.residents
        XCTAssertNil(residents, "the default cache is whole")
    }
}
