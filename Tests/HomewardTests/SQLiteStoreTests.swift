import Foundation
import GRDB
import HomewardCore
import HomewardProtocol
@testable import HomewardStorage
import XCTest

final class SQLiteStoreTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("homeward-sqlite-\(UUID().uuidString)", isDirectory: true)
    }

    override func tearDownWithError() throws {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    /// A database file in a directory that does not exist yet, to check the store creates it.
    private var path: String { directory.appendingPathComponent("data/relay.sqlite").path }

    private func open() throws -> SQLiteStore { try SQLiteStore(path: path) }

    /// Closes `store` and loads what a fresh store on the same file sees.
    private func reopenAndLoad(_ store: SQLiteStore) async throws -> StoredState {
        try store.close()
        let reopened = try open()
        defer { try? reopened.close() }
        return try await reopened.load()
    }

    private func users(_ names: String..., at time: Int64 = 1_000) -> [StoreChange] {
        names.enumerated().map { index, name in
            .createUser(UserProfile(username: name, name: name.capitalized), passwordHash: "hash-\(name)",
                        at: time + Int64(index))
        }
    }

    private func pairs(_ list: [(String, String)]) -> [String] { list.map { "\($0.0)|\($0.1)" } }

    // MARK: - Round trip

    func testEveryChangeSurvivesReopening() async throws {
        let store = try open()
        try await store.apply(users("alice", "bob", "carol", "dave"))
        try await store.apply([
            .createToken(hash: "t-alice", username: "alice", at: 2_000),
            .createToken(hash: "t-bob", username: "bob", at: 2_001),
            .revokeToken(hash: "t-bob"),
        ])
        try await store.apply([
            .addFriendRequest(from: "carol", to: "alice", at: 3_000),
            .addFriendRequest(from: "bob", to: "dave", at: 3_001),
            .addFriendRequest(from: "dave", to: "carol", at: 3_002),
            .removeFriendRequest(from: "bob", to: "dave"),
        ])
        try await store.apply([
            .addFriendship("bob", "alice", at: 4_000),
            .addFriendship("alice", "dave", at: 4_001),
            .addFriendship("carol", "bob", at: 4_002),
            .removeFriendship("bob", "carol"),
        ])
        try await store.apply([
            .setAlarmContacts(owner: "alice", ["dave", "bob"]),
            .setAlarmContacts(owner: "bob", ["alice"]),
            .setAlarmContacts(owner: "bob", []),
        ])

        var session = FollowSession(id: "s_1", owner: "alice", note: "walking home", startedAt: 5_000)
        session.set(.invited, for: "dave")
        session.set(.accepted, for: "bob")
        try await store.apply([.saveSession(session)])

        var alarm = Alarm(id: "a_1", owner: "bob", text: "help", position: Position(lat: 51.5, lon: -0.12, ts: 6_000),
                          createdAt: 6_000, recipients: ["alice", "dave"])
        alarm.deliveredAt["alice"] = 6_001
        _ = alarm.acknowledge(by: "alice")
        try await store.apply([.saveAlarm(alarm)])
        try await store.apply([.lastSeen(username: "carol", at: 7_000), .lastSeen(username: "carol", at: 7_500)])

        let value1 = try await store.passwordHash(of: "carol")
        XCTAssertEqual(value1, "hash-carol")
        let state = try await reopenAndLoad(store)

        XCTAssertEqual(state.users, ["alice", "bob", "carol", "dave"].map { UserProfile(username: $0, name: $0.capitalized) })
        XCTAssertEqual(state.lastSeen, ["carol": 7_500])
        XCTAssertEqual(pairs(state.friendRequests.map { ($0.from, $0.to) }), ["carol|alice", "dave|carol"])
        XCTAssertEqual(pairs(state.friendships), ["alice|bob", "alice|dave"])
        XCTAssertEqual(state.alarmContacts, ["alice": ["dave", "bob"]])
        XCTAssertEqual(state.sessions, [session])
        XCTAssertEqual(state.alarms, [alarm])

        let reopened = try open()
        let value2 = try await reopened.passwordHash(of: "alice")
        XCTAssertEqual(value2, "hash-alice")
        let value3 = try await reopened.passwordHash(of: "nobody")
        XCTAssertNil(value3)
        let value4 = try await reopened.username(forTokenHash: "t-alice")
        XCTAssertEqual(value4, "alice")
        let value5 = try await reopened.username(forTokenHash: "t-bob")
        XCTAssertNil(value5)
        try reopened.close()
    }

    func testEmptyDatabaseLoadsNothing() async throws {
        let state = try await reopenAndLoad(try open())
        XCTAssertTrue(state.users.isEmpty)
        XCTAssertTrue(state.lastSeen.isEmpty)
        XCTAssertTrue(state.friendships.isEmpty)
        XCTAssertTrue(state.friendRequests.isEmpty)
        XCTAssertTrue(state.alarmContacts.isEmpty)
        XCTAssertTrue(state.sessions.isEmpty)
        XCTAssertTrue(state.alarms.isEmpty)
    }

    // MARK: - Friends

    func testFriendshipIsStoredOnceInCanonicalOrder() async throws {
        let store = try open()
        try await store.apply(users("zed", "amy", "max"))
        try await store.apply([.addFriendship("zed", "amy", at: 1), .addFriendship("amy", "zed", at: 2)])
        try await store.apply([.addFriendship("max", "amy", at: 3)])
        let rows = try store.inspect { db in
            try Row.fetchAll(db, sql: "SELECT user_a, user_b FROM friendships ORDER BY user_a, user_b")
                .map { "\($0["user_a"] as String)|\($0["user_b"] as String)" }
        }
        XCTAssertEqual(rows, ["amy|max", "amy|zed"])

        try await store.apply([.removeFriendship("zed", "amy")])
        let reopened = try await reopenAndLoad(store)
        XCTAssertEqual(pairs(reopened.friendships), ["amy|max"])
    }

    func testFriendRequestTwiceIsIgnored() async throws {
        let store = try open()
        try await store.apply(users("amy", "zed"))
        try await store.apply([.addFriendRequest(from: "amy", to: "zed", at: 1)])
        try await store.apply([.addFriendRequest(from: "amy", to: "zed", at: 2)])
        let reopened = try await reopenAndLoad(store)
        XCTAssertEqual(pairs(reopened.friendRequests.map { ($0.from, $0.to) }), ["amy|zed"])
    }

    // MARK: - Sessions

    func testSessionInviteeStatesAndOrderArePreserved() async throws {
        let store = try open()
        try await store.apply(users("owner", "a", "b", "c", "d"))
        var session = FollowSession(id: "s_1", owner: "owner", note: nil, startedAt: 10)
        session.set(.invited, for: "c")
        session.set(.accepted, for: "a")
        session.set(.declined, for: "d")
        session.set(.invited, for: "b")
        try await store.apply([.saveSession(session)])

        // Saving again replaces the invitees with exactly the new list.
        session.set(.left, for: "a")
        session.set(.accepted, for: "b")
        session.remove("d")
        session.note = "late"
        try await store.apply([.saveSession(session)])

        let loaded = try await reopenAndLoad(store).sessions
        XCTAssertEqual(loaded, [session])
        XCTAssertEqual(loaded.first?.invitees, ["c", "a", "b"])
        XCTAssertEqual(loaded.first?.state(of: "a"), .left)
        XCTAssertEqual(loaded.first?.state(of: "b"), .accepted)
        XCTAssertEqual(loaded.first?.state(of: "c"), .invited)
        XCTAssertNil(loaded.first?.state(of: "d"))
        XCTAssertEqual(loaded.first?.note, "late")
    }

    func testOnlyOneActiveSessionPerOwner() async throws {
        let store = try open()
        try await store.apply(users("owner"))
        try await store.apply([.saveSession(FollowSession(id: "s_1", owner: "owner", note: nil, startedAt: 1))])
        await assertThrowsAsync { try await store.apply([.saveSession(FollowSession(id: "s_2", owner: "owner", note: nil, startedAt: 2))]) }
        // Ending the first one in the same batch frees the owner.
        let second = FollowSession(id: "s_2", owner: "owner", note: nil, startedAt: 2)
        try await store.apply([.endSession(id: "s_1", reason: "replaced", at: 2), .saveSession(second)])
        let reopened = try await reopenAndLoad(store)
        XCTAssertEqual(reopened.sessions, [second])
    }

    // MARK: - Alarms

    func testAlarmAckOrderAndDeliveriesArePreserved() async throws {
        let store = try open()
        try await store.apply(users("owner", "b", "c", "d", "e"))
        let position = Position(lat: -33.8688, lon: 151.2093, acc: 4.5, alt: 12.25, spd: 1.5, hdg: 359.5, batt: 42,
                                ts: 1_700_000_000_123)
        var alarm = Alarm(id: "a_1", owner: "owner", text: "help me", position: position, createdAt: 100, auto: true,
                          recipients: ["d", "b", "c", "e"])
        alarm.deliveredAt = ["d": 101, "c": 102]
        try await store.apply([.saveAlarm(alarm)])

        _ = alarm.acknowledge(by: "c")
        alarm.deliveredAt["b"] = 103
        try await store.apply([.saveAlarm(alarm)])
        let firstAckTime = try ackedAt(store, "a_1", "c")
        XCTAssertNotNil(firstAckTime)

        _ = alarm.acknowledge(by: "d")
        alarm.removeRecipient("e")
        try await store.apply([.saveAlarm(alarm)])
        // Saving again keeps the time of the first acknowledgement.
        XCTAssertEqual(try ackedAt(store, "a_1", "c"), firstAckTime)

        let other = Alarm(id: "a_2", owner: "b", text: Alarm.defaultText, position: nil, createdAt: 200, recipients: ["owner"])
        try await store.apply([.saveAlarm(other)])

        let loaded = try await reopenAndLoad(store).alarms
        XCTAssertEqual(loaded, [alarm, other])
        XCTAssertEqual(loaded.first?.recipients, ["d", "b", "c"])
        XCTAssertEqual(loaded.first?.acked, ["c", "d"])
        XCTAssertEqual(loaded.first?.deliveredAt, ["d": 101, "c": 102, "b": 103])
        XCTAssertEqual(loaded.first?.position, position)
        XCTAssertEqual(loaded.first?.auto, true)
        XCTAssertNil(loaded.last?.position)
        XCTAssertEqual(loaded.last?.auto, false)
    }

    func testRepeatedRecipientsAndContactsDoNotFailTheSave() async throws {
        let store = try open()
        try await store.apply(users("owner", "b"))
        let alarm = Alarm(id: "a_1", owner: "owner", text: "x", position: nil, createdAt: 1, recipients: ["b", "b"])
        try await store.apply([.saveAlarm(alarm), .setAlarmContacts(owner: "owner", ["b", "b"])])
        let state = try await reopenAndLoad(store)
        XCTAssertEqual(state.alarms.first?.recipients, ["b"])
        XCTAssertEqual(state.alarmContacts, ["owner": ["b"]])
    }

    func testEndedSessionsAndAlarmsAreNotLoaded() async throws {
        let store = try open()
        try await store.apply(users("a", "b"))
        var kept = FollowSession(id: "s_kept", owner: "b", note: nil, startedAt: 2)
        kept.set(.accepted, for: "a")
        var ended = FollowSession(id: "s_ended", owner: "a", note: nil, startedAt: 1)
        ended.set(.accepted, for: "b")
        let keptAlarm = Alarm(id: "a_kept", owner: "a", text: "k", position: nil, createdAt: 3, recipients: ["b"])
        let endedAlarm = Alarm(id: "a_ended", owner: "b", text: "e", position: nil, createdAt: 4, recipients: ["a"])
        try await store.apply([.saveSession(kept), .saveSession(ended), .saveAlarm(keptAlarm), .saveAlarm(endedAlarm)])
        try await store.apply([
            .endSession(id: "s_ended", reason: "stopped", at: 10),
            .endAlarm(id: "a_ended", reason: "cancelled", at: 11),
        ])

        let ends = try store.inspect { db in
            try Row.fetchAll(db, sql: """
                SELECT id, ended_at, end_reason FROM sessions WHERE ended_at IS NOT NULL
                UNION ALL SELECT id, ended_at, end_reason FROM alarms WHERE ended_at IS NOT NULL
                ORDER BY id
                """).map { "\($0["id"] as String) \($0["ended_at"] as Int64) \($0["end_reason"] as String)" }
        }
        XCTAssertEqual(ends, ["a_ended 11 cancelled", "s_ended 10 stopped"])

        let state = try await reopenAndLoad(store)
        XCTAssertEqual(state.sessions, [kept])
        XCTAssertEqual(state.alarms, [keptAlarm])
    }

    // MARK: - Tokens

    func testRevokedTokenNoLongerResolves() async throws {
        let store = try open()
        try await store.apply(users("alice"))
        try await store.apply([.createToken(hash: "h1", username: "alice", at: 1), .createToken(hash: "h2", username: "alice", at: 2)])
        let value6 = try await store.username(forTokenHash: "h1")
        XCTAssertEqual(value6, "alice")
        try await store.apply([.revokeToken(hash: "h1")])
        let value7 = try await store.username(forTokenHash: "h1")
        XCTAssertNil(value7)
        try store.close()

        let reopened = try open()
        let value8 = try await reopened.username(forTokenHash: "h1")
        XCTAssertNil(value8)
        let value9 = try await reopened.username(forTokenHash: "h2")
        XCTAssertEqual(value9, "alice")
        try reopened.close()
    }

    func testTokenForUnknownUserIsRejected() async throws {
        let store = try open()
        await assertThrowsAsync { try await store.apply([.createToken(hash: "h", username: "ghost", at: 1)]) }
        let value10 = try await store.username(forTokenHash: "h")
        XCTAssertNil(value10)
    }

    // MARK: - Transactions

    func testFailingBatchLeavesNothingApplied() async throws {
        let store = try open()
        try await store.apply(users("alice"))
        let session = FollowSession(id: "s_1", owner: "alice", note: nil, startedAt: 1)
        await assertThrowsAsync { try await store.apply([
            .createUser(UserProfile(username: "bob", name: "Bob"), passwordHash: "h", at: 2),
            .createToken(hash: "t-bob", username: "bob", at: 2),
            .addFriendship("alice", "bob", at: 2),
            .saveSession(session),
            .lastSeen(username: "alice", at: 2),
            .createUser(UserProfile(username: "bob", name: "Bob again"), passwordHash: "h", at: 3),
        ]) }
        let value11 = try await store.passwordHash(of: "bob")
        XCTAssertNil(value11)
        let value12 = try await store.username(forTokenHash: "t-bob")
        XCTAssertNil(value12)

        let state = try await reopenAndLoad(store)
        XCTAssertEqual(state.users, [UserProfile(username: "alice", name: "Alice")])
        XCTAssertTrue(state.lastSeen.isEmpty)
        XCTAssertTrue(state.friendships.isEmpty)
        XCTAssertTrue(state.sessions.isEmpty)
    }

    // MARK: - Connection settings

    func testDatabaseIsWALWithFullSyncAndForeignKeys() async throws {
        for store in [try open(), try open()] {  // a fresh file, then an existing one
            try store.inspect { db in
                XCTAssertEqual(try String.fetchOne(db, sql: "PRAGMA journal_mode"), "wal")
                XCTAssertEqual(try Int.fetchOne(db, sql: "PRAGMA synchronous"), 2)  // FULL
                XCTAssertEqual(try Int.fetchOne(db, sql: "PRAGMA foreign_keys"), 1)
                XCTAssertEqual(try Bool.fetchOne(db, sql: "SELECT COUNT(*) > 0 FROM grdb_migrations WHERE identifier = 'v1'"), true)
            }
            try store.close()
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))
    }

    func testInMemoryStore() async throws {
        let store = try SQLiteStore.inMemory()
        try await store.apply(users("alice", "bob"))
        try await store.apply([.addFriendship("bob", "alice", at: 5), .lastSeen(username: "bob", at: 9)])
        let state = try await store.load()
        XCTAssertEqual(state.users.map(\.username), ["alice", "bob"])
        XCTAssertEqual(pairs(state.friendships), ["alice|bob"])
        XCTAssertEqual(state.lastSeen, ["bob": 9])
        let value13 = try await store.passwordHash(of: "bob")
        XCTAssertEqual(value13, "hash-bob")
    }

    // MARK: - Helpers

    private func ackedAt(_ store: SQLiteStore, _ alarm: String, _ username: String) throws -> Int64? {
        try store.inspect { db in
            try Int64.fetchOne(db, sql: "SELECT acked_at FROM alarm_recipients WHERE alarm_id = ? AND username = ?",
                               arguments: [alarm, username])
        }
    }
}

/// SQLite and GRDB pass strings as C strings: text with a NUL must still be stored whole, and a key with a
/// NUL must not match the key it would be cut to.
extension SQLiteStoreTests {
    private func kate(_ store: SQLiteStore) async throws {
        try await store.apply([.createUser(UserProfile(username: "kate1", name: "Kate"), passwordHash: "hash-kate1", at: 1),
                               .createUser(UserProfile(username: "ben", name: "Ben"), passwordHash: "hash-ben", at: 2),
                               .createToken(hash: "t-kate1", username: "kate1", at: 3)])
    }

    func testANameWithNULIsNotTheNameBeforeIt() async throws {
        let store = try SQLiteStore.inMemory()
        try await kate(store)
        let kate = try await store.passwordHash(of: "kate1")
        XCTAssertEqual(kate, "hash-kate1")
        for lookalike in ["kate1\u{0}", "kate1\u{0}anything"] {
            let hash = try await store.passwordHash(of: lookalike)
            XCTAssertNil(hash, lookalike.debugDescription)
        }
        let owner = try await store.username(forTokenHash: "t-kate1\u{0}")
        XCTAssertNil(owner)
    }

    func testAChangeWithNULInAKeyIsRefusedWhole() async throws {
        let store = try SQLiteStore.inMemory()
        try await kate(store)
        let alarm = Alarm(id: "a_1", owner: "kate1", text: "help", position: nil, createdAt: 6, recipients: ["ben\u{0}x"])
        let batches: [[StoreChange]] = [
            [.addFriendRequest(from: "ben", to: "kate1", at: 4), .addFriendRequest(from: "kate1\u{0}", to: "ben", at: 5)],
            [.saveAlarm(alarm)],
        ]
        for batch in batches {
            do {
                try await store.apply(batch)
                XCTFail("stored a key with NUL: \(batch)")
            } catch {}
        }
        let state = try await store.load()
        XCTAssertTrue(state.friendRequests.isEmpty, "nothing of the refused batch is stored")
        XCTAssertTrue(state.alarms.isEmpty)
    }

    func testTextWithNULSurvivesReopeningWhole() async throws {
        let store = try open()
        try await kate(store)
        let text = "help\u{0} at the bridge"
        let alarm = Alarm(id: "a_1", owner: "kate1", text: text, position: nil, createdAt: 10, recipients: ["ben"])
        let session = FollowSession(id: "s_1", owner: "ben", note: "via\u{0} the park", startedAt: 11)
        try await store.apply([.saveAlarm(alarm), .saveSession(session),
                               .createUser(UserProfile(username: "zed", name: "Z\u{0}ed"), passwordHash: "h", at: 12)])
        try store.inspect { db in
            try db.execute(sql: "INSERT INTO users (username, name, password_hash, created_at) VALUES ('old', 'Old Name', 'h', 13)")
        }

        let state = try await reopenAndLoad(store)
        XCTAssertEqual(state.alarms.first?.text, text)
        XCTAssertEqual(state.sessions.first?.note, "via\u{0} the park")
        XCTAssertEqual(state.users.first { $0.username == "zed" }?.name, "Z\u{0}ed")
        // Rows written as TEXT before this change read the same as before.
        XCTAssertEqual(state.users.first { $0.username == "old" }?.name, "Old Name")
    }
}
