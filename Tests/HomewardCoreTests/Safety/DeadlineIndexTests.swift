@testable import HomewardCore
import Testing

/// The timers' index (`DeadlineIndex`): owners come out in the order of their noted deadline, per timer shard; a
/// deadline noted again replaces the earlier one, none removes it, and stale entries never count.
struct DeadlineIndexTests {
    /// Takes everything due at `now` in `shards`, in order.
    private func takeAll(_ index: inout DeadlineIndex, at now: Int64 = .max, in shards: TimerShards = .all) -> [DeadlineIndex.Entry] {
        var taken: [DeadlineIndex.Entry] = []
        while let entry = index.takeDue(at: now, in: shards) { taken.append(entry) }
        return taken
    }

    @Test func ownersComeOutEarliestDeadlineFirst() {
        var index = DeadlineIndex()
        let deadlines: [String: Int64] = ["ann": 30, "bob": 10, "cat": 50, "dan": 20, "eve": 40]
        for (owner, deadline) in deadlines { index.note(owner, deadline: deadline) }
        #expect(index.first(in: .all) == .init(deadline: 10, owner: "bob"))
        #expect(takeAll(&index, at: 30).map(\.owner) == ["bob", "dan", "ann"], "only what is due by then")
        #expect(takeAll(&index).map(\.owner) == ["eve", "cat"])
        #expect(index.first(in: .all) == nil, "each is taken once")
    }

    @Test func aDeadlineNotedAgainReplacesTheOlderOneEitherWay() {
        var index = DeadlineIndex()
        index.note("ann", deadline: 10)
        index.note("bob", deadline: 20)
        index.note("ann", deadline: 30)
        #expect(index.first(in: .all) == .init(deadline: 20, owner: "bob"), "ann's 10 is stale")
        index.note("bob", deadline: 5)
        #expect(takeAll(&index) == [.init(deadline: 5, owner: "bob"), .init(deadline: 30, owner: "ann")])
    }

    @Test func anOwnerNotedWithNoDeadlineIsGoneAndMayComeBack() {
        var index = DeadlineIndex()
        index.note("ann", deadline: 10)
        index.note("ann", deadline: nil)
        #expect(index.first(in: .all) == nil)
        #expect(index.count == 0)
        index.note("ann", deadline: 10)
        #expect(takeAll(&index) == [.init(deadline: 10, owner: "ann")], "the stale entry with the same deadline counts once")
    }

    @Test func equalDeadlinesAllComeOutInOwnerOrder() {
        var index = DeadlineIndex()
        for owner in ["dan", "ann", "cat", "bob"] { index.note(owner, deadline: 7) }
        #expect(takeAll(&index).map(\.owner) == ["ann", "bob", "cat", "dan"])
    }

    @Test func onlyTheOwnersOfTheShardsAskedAboutCount() throws {
        let owners = ["ann", "bob", "cat", "dan", "eve"]
        #expect(Set(owners.map(TimerShards.shard(of:))).count == owners.count, "each in a shard of their own")
        var index = DeadlineIndex()
        for (offset, owner) in owners.enumerated() { index.note(owner, deadline: Int64(offset)) }
        let some = TimerShards(["bob", "dan"].map(TimerShards.shard(of:)))
        #expect(index.first(in: some)?.owner == "bob")
        #expect(takeAll(&index, in: some).map(\.owner) == ["bob", "dan"])
        #expect(index.first(in: .none) == nil)
        #expect(takeAll(&index).map(\.owner) == ["ann", "cat", "eve"], "the other shards' owners are untouched")
    }

    @Test func manyUpdatesKeepTheAnswersWhileStaleEntriesAreDropped() {
        var index = DeadlineIndex()
        var expected: [String: Int64] = [:]
        var generator = SystemRandomNumberGenerator()
        for step in 0..<20_000 {
            let owner = "user\(Int.random(in: 0..<300, using: &generator))"
            let deadline: Int64? = step % 7 == 0 ? nil : Int64.random(in: 0..<1_000_000, using: &generator)
            index.note(owner, deadline: deadline)
            expected[owner] = deadline
            if step % 1_000 == 0 {
                let earliest = expected.map { (deadline: $0.value, owner: $0.key) }.min { ($0.deadline, $0.owner) < ($1.deadline, $1.owner) }
                #expect(index.first(in: .all) == earliest.map { .init(deadline: $0.deadline, owner: $0.owner) })
            }
        }
        #expect(index.count == expected.count)
        let order = expected.map { DeadlineIndex.Entry(deadline: $0.value, owner: $0.key) }
            .sorted { ($0.deadline, $0.owner) < ($1.deadline, $1.owner) }
        #expect(takeAll(&index) == order)
    }
}
