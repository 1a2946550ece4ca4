import HomewardCore
import HomewardProtocol
import XCTest

/// Every kind of deadline belongs to exactly one user's timer shard: relays each firing their own shards do,
/// together, exactly what one relay firing all of them does.
final class DeadlineShardsTests: XCTestCase {
    private let now = CoreFixture.now
    private let users = ["alice", "bob", "carol", "dave", "erin", "frank", "grace"]

    /// One kind of deadline per user (each in a shard of their own), and when it is due:
    /// alice's check-in, bob's alarm repeat, carol's pause end, dave's meeting expiry, erin's session expiry,
    /// frank's share link expiry, grace's lost contact.
    private func scheduled() throws -> (RelayState, [String: Int64]) {
        var state = CoreFixture.state(users, friends: users.filter { $0 != "alice" }.map { ("alice", $0) })
        state.safety.alarmRepeatInterval = 30_000
        state.safety.lostContactGrace = 60_000
        let presence = CoreTestPresence(online: Set(users))
        _ = try state.startSession("alice", SessionOptions(invite: ["bob"], checkInBy: now + 10_000), now: now)
        _ = try state.raiseAlarm("bob", Request.AlarmRaise(text: "help"), presence: presence, now: now)
        _ = try state.pauseLocation("carol", from: "alice", until: now + 20_000)
        _ = try state.proposeMeeting("dave", MeetingProposal(to: ["alice"], lat: 1, lon: 2, name: "here", time: now + 1000),
                                     presence: presence, now: now)
        _ = try state.startSession("erin", SessionOptions(invite: ["alice"], ttl: 40), now: now)
        let frankSession = try XCTUnwrap(state.startSession("frank", SessionOptions(invite: ["alice"]), now: now)
            .changes.compactMap { if case .saveSession(let session) = $0 { session.id } else { nil } }.first)
        _ = try state.createShare("frank", frankSession, ttl: 300, token: "frank-link", now: now)
        _ = try state.startSession("grace", SessionOptions(invite: ["alice"]), now: now)
        state.ownerWentOffline("grace", at: now)
        let due: [String: Int64] = [
            "alice": now + 10_000, "bob": now + 30_000, "carol": now + 20_000, "dave": now + 1000 + 24 * 3600 * 1000,
            "erin": now + 40_000, "frank": now + 300_000, "grace": now + 60_000,
        ]
        return (state, due)
    }

    func testTheUsersOfThisTestAreInShardsOfTheirOwn() {
        XCTAssertEqual(Set(users.map(TimerShards.shard(of:))).count, users.count)
    }

    func testEachDeadlineIsInItsOwnersShardOnly() throws {
        let (state, due) = try scheduled()
        for user in users {
            let shard = TimerShards([TimerShards.shard(of: user)])
            XCTAssertEqual(state.nextDeadline(in: shard), due[user], "\(user)'s shard")
        }
        let noneOfThem = TimerShards.all.subtracting(TimerShards(users.map(TimerShards.shard(of:))))
        XCTAssertNil(state.nextDeadline(in: noneOfThem), "no deadline outside its owner's shard")
        XCTAssertEqual(state.nextDeadline(in: .all), due.values.min())
        XCTAssertNil(state.nextDeadline(in: .none))
    }

    func testTheIndexFindsEachDeadlineInItsOwnersShard() throws {
        var (state, due) = try scheduled()
        for user in users {
            XCTAssertEqual(state.nextDeadlineFromIndex(in: TimerShards([TimerShards.shard(of: user)])), due[user], "\(user)'s shard")
        }
        XCTAssertEqual(state.nextDeadlineFromIndex(in: .all), due.values.min())
        XCTAssertNil(state.nextDeadlineFromIndex(in: .none))
        // A check-in moves alice's deadline later, the end of her session removes it: the index follows.
        let alice = try XCTUnwrap(state.ownSession(of: "alice"))
        _ = try state.checkIn("alice", alice.id, checkInBy: now + 25_000)
        XCTAssertEqual(state.nextDeadlineFromIndex(in: .all), now + 20_000, "carol's pause end is next")
        _ = try state.endSession("alice", alice.id, now: now)
        XCTAssertNil(state.nextDeadlineFromIndex(in: TimerShards([TimerShards.shard(of: "alice")])))
    }

    func testOwnersDueComeEarliestFirstInBatches() throws {
        var (state, due) = try scheduled()
        let later = now + 2 * 24 * 3600 * 1000
        let first = state.ownersDue(at: later, limit: 3)
        XCTAssertEqual(first.owners, ["alice", "carol", "bob"])
        XCTAssertTrue(first.more)
        let all = state.ownersDue(at: later, limit: 10)
        XCTAssertEqual(all.owners, users.sorted { due[$0]! < due[$1]! }, "nothing was fired: the same owners again")
        XCTAssertFalse(all.more)
        XCTAssertEqual(state.ownersDue(at: now + 20_000, limit: 10).owners, ["alice", "carol"], "only what is due by then")
    }

    func testFiringTheDueOwnersBatchByBatchDoesWhatFiringAllDoesOnce() throws {
        var (whole, _) = try scheduled()
        var (batched, _) = try scheduled()
        let later = now + 2 * 24 * 3600 * 1000
        let presence = CoreTestPresence()
        let all = whole.fireDue(now: later, presence: presence, shards: .all)
        var changes: [StoreChange] = []
        var batches = 0
        while batches < 10 {
            let due = batched.ownersDue(at: later, limit: 2)
            if due.owners.isEmpty { break }
            changes += batched.fireDue(now: later, presence: presence, owners: Set(due.owners)).changes
            batches += 1
        }
        XCTAssertEqual(batches, 4, "seven owners, two a batch")
        XCTAssertEqual(Set(changes.map { "\($0)" }), Set(all.changes.map { "\($0)" }))
        XCTAssertEqual(changes.count, all.changes.count, "nothing done twice")
        XCTAssertEqual(batched.nextDeadlineFromIndex(in: .all), whole.nextDeadline())
    }

    func testFiringShardByShardDoesWhatFiringAllDoes() throws {
        // Two states made alike (each with its own sequence of ids, so the alarm a missed check-in raises
        // gets the same id in both).
        var (whole, _) = try scheduled()
        var (split, _) = try scheduled()
        let later = now + 2 * 24 * 3600 * 1000
        let presence = CoreTestPresence()
        let all = whole.fireDue(now: later, presence: presence, shards: .all)
        XCTAssertFalse(all.changes.isEmpty)

        var changes: [StoreChange] = []
        var events: [String] = []
        for shard in 0..<TimerShards.count {
            let outcome = split.fireDue(now: later, presence: presence, shards: TimerShards([shard]))
            changes += outcome.changes
            events += outcome.events.map { "\($0.to) \($0.message)" }
        }
        XCTAssertEqual(Set(changes.map { "\($0)" }), Set(all.changes.map { "\($0)" }))
        XCTAssertEqual(changes.count, all.changes.count, "nothing done twice")
        XCTAssertEqual(events.sorted(), all.events.map { "\($0.to) \($0.message)" }.sorted())
        XCTAssertEqual(split.nextDeadline(), whole.nextDeadline())
        XCTAssertEqual(split.sessions.count, whole.sessions.count)
        XCTAssertEqual(split.alarms.count, whole.alarms.count, "alice's missed check-in alarm, once")
    }
}
