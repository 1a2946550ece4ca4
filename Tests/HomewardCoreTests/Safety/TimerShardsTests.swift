import HomewardCore
import XCTest

/// Which shard a user's timers are in, and how a relay decides which shards to take and release.
final class TimerShardsTests: XCTestCase {
    // MARK: Assignment

    /// Pinned values: every relay process (and every version) must put a user in the same shard, so the hash
    /// is not Swift's per-process seeded one.
    func testAUsersShardIsAStableHashOfTheName() {
        XCTAssertEqual(TimerShards.shard(of: "alice"), 7)
        XCTAssertEqual(TimerShards.shard(of: "bob"), 20)
        XCTAssertEqual(TimerShards.shard(of: "carol"), 18)
        XCTAssertEqual(TimerShards.shard(of: "dave"), 31)
        XCTAssertEqual(TimerShards.shard(of: "ü"), 10)
    }

    func testUsersSpreadOverEveryShard() {
        var perShard = [Int](repeating: 0, count: TimerShards.count)
        for n in 0..<3200 { perShard[TimerShards.shard(of: "user\(n)")] += 1 }
        XCTAssertEqual(perShard.reduce(0, +), 3200)
        XCTAssertGreaterThan(perShard.min() ?? 0, 50, "\(perShard)")
        XCTAssertLessThan(perShard.max() ?? .max, 150, "\(perShard)")
    }

    func testASetOwnsTheUsersOfItsShards() {
        let shards = TimerShards([TimerShards.shard(of: "alice")])
        XCTAssertTrue(shards.owns("alice"))
        XCTAssertFalse(shards.owns("bob"))
        XCTAssertTrue(TimerShards.all.owns("bob"))
        XCTAssertFalse(TimerShards.none.owns("alice"))
        XCTAssertEqual(TimerShards.all.size, TimerShards.count)
        XCTAssertEqual(TimerShards([0, 1, 2, 3, 7, 31]).description, "0-3,7,31")
        XCTAssertEqual(TimerShards.all.description, "all")
        XCTAssertEqual(TimerShards.none.description, "none")
        XCTAssertFalse(TimerShards.all.contains(TimerShards.count), "no shard beyond the count")
    }

    // MARK: Fair share

    func testFairSharesCoverEveryShard() {
        for relays in 1...40 {
            XCTAssertGreaterThanOrEqual(TimerShareDecision.fairShare(relays: relays) * relays, TimerShards.count, "\(relays) relays")
        }
        XCTAssertEqual(TimerShareDecision.fairShare(relays: 1), 32)
        XCTAssertEqual(TimerShareDecision.fairShare(relays: 3), 11)
        XCTAssertEqual(TimerShareDecision.fairShare(relays: 0), 32, "no count yet: itself")
    }

    func testARelayAloneTakesEveryShard() {
        let decision = TimerShareDecision(held: .none, heldElsewhere: .none, relays: 1, start: 5)
        XCTAssertEqual(decision, TimerShareDecision(take: .all))
    }

    func testAHolderOfAllReleasesHalfWhenASecondRelayJoins() {
        let decision = TimerShareDecision(held: .all, heldElsewhere: .none, relays: 2)
        XCTAssertEqual(decision.release, TimerShards(16..<32))
        XCTAssertEqual(decision.take, .none)
    }

    func testANewRelayTakesOnlyFreeShardsUpToItsShare() {
        let decision = TimerShareDecision(held: .none, heldElsewhere: TimerShards(0..<20), relays: 2, start: 3)
        XCTAssertEqual(decision.take, TimerShards(20..<32), "12 free, fewer than its share of 16")
        XCTAssertEqual(decision.release, .none)
    }

    func testShardsHeldElsewhereAreNeverTaken() {
        let decision = TimerShareDecision(held: TimerShards(0..<4), heldElsewhere: TimerShards(4..<32), relays: 1)
        XCTAssertEqual(decision, TimerShareDecision())
    }

    func testARelayAtItsShareDoesNothing() {
        let decision = TimerShareDecision(held: TimerShards(0..<11), heldElsewhere: TimerShards(11..<22), relays: 3)
        XCTAssertEqual(decision, TimerShareDecision(), "11 is its share, and it holds 11")
    }

    func testTakingStartsWhereAsked() {
        let decision = TimerShareDecision(held: .none, heldElsewhere: .none, relays: 4, start: 30)
        XCTAssertEqual(decision.take, TimerShards([30, 31, 0, 1, 2, 3, 4, 5]))
    }

    /// Relays checking in turn, as their leases do, until nothing changes: every shard ends up held by
    /// exactly one relay, none above its share; after one relay is gone (PostgreSQL freed its locks), the
    /// others take all of its shards.
    func testRelaysCheckingInTurnSplitTheShardsAndTakeOverADeadOnes() {
        var held: [TimerShards] = [.all, .none, .none]
        settle(&held)
        XCTAssertEqual(held.map(\.size).sorted(), [10, 11, 11])
        XCTAssertEqual(held.reduce(TimerShards.none) { $0.union($1) }, .all)
        XCTAssertEqual(held.map(\.size).reduce(0, +), TimerShards.count, "no shard held twice")

        held.removeFirst()
        settle(&held)
        XCTAssertEqual(held.map(\.size), [16, 16])
        XCTAssertEqual(held[0].union(held[1]), .all)
    }

    private func settle(_ held: inout [TimerShards]) {
        for round in 0..<10 {
            var changed = false
            for index in held.indices {
                let elsewhere = held.indices.filter { $0 != index }.reduce(TimerShards.none) { $0.union(held[$1]) }
                let decision = TimerShareDecision(held: held[index], heldElsewhere: elsewhere, relays: held.count,
                                                  start: index * 7 + round)
                // A try for a shard another relay holds fails; the decision never asks for one.
                XCTAssertTrue(decision.take.subtracting(elsewhere) == decision.take)
                let next = held[index].subtracting(decision.release).union(decision.take)
                changed = changed || next != held[index]
                held[index] = next
            }
            if !changed { return }
        }
        XCTFail("the shares did not settle: \(held)")
    }
}
