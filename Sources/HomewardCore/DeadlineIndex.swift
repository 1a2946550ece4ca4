import HeapModule

/// The owners of what has a deadline (sessions, alarms, share links, pauses, meeting points; `TimerShards` says whose
/// each deadline is), in the order their earliest deadline falls due, one heap per timer shard: the relay finds when its
/// timer must fire next and whose work is due at O(log n) a change (`RelayState+Deadlines`), where it walked every
/// deadline for each.
///
/// Each owner's earliest deadline is noted when what they own changes (`note`). An entry whose deadline is no longer
/// its owner's noted one is stale, and is dropped when it comes to the front (lazy deletion); the heaps are rebuilt from
/// the noted deadlines when stale entries outnumber the current ones. A noted deadline may be earlier than the owner's
/// actual one (what makes it later need not be noted at once), never later: `RelayState` checks an entry against what
/// the owner owns before it counts.
struct DeadlineIndex: Sendable {
    /// Ordered by deadline, equal deadlines by owner, so that the order is the same in every run.
    struct Entry: Sendable, Comparable {
        var deadline: Int64
        var owner: String

        static func < (a: Entry, b: Entry) -> Bool {
            a.deadline != b.deadline ? a.deadline < b.deadline : a.owner < b.owner
        }
    }

    /// Each owner's earliest deadline as last noted; an owner here has a current entry in their shard's heap.
    private var noted: [String: Int64] = [:]
    private var heaps = [Heap<Entry>](repeating: Heap(), count: TimerShards.count)
    /// Entries in all heaps, current and stale.
    private var entries = 0

    /// `owner`'s earliest deadline is `deadline` now (nil: they own nothing with one).
    mutating func note(_ owner: String, deadline: Int64?) {
        guard noted[owner] != deadline else { return }
        noted[owner] = deadline
        guard let deadline else { return }
        heaps[TimerShards.shard(of: owner)].insert(Entry(deadline: deadline, owner: owner))
        entries += 1
        if entries > 2 * noted.count + Self.staleAllowance { rebuild() }
    }

    /// The current entry with the earliest deadline among the owners in `shards` (stale ones in front are dropped).
    mutating func first(in shards: TimerShards) -> Entry? {
        var first: Entry?
        for shard in 0..<TimerShards.count where shards.contains(shard) {
            while let top = heaps[shard].min, noted[top.owner] != top.deadline {
                heaps[shard].removeMin()
                entries -= 1
            }
            if let top = heaps[shard].min, first.map({ top < $0 }) ?? true { first = top }
        }
        return first
    }

    /// Takes the entry `first(in: shards)` returns if its deadline is at or before `now`: its owner is forgotten until
    /// noted again.
    mutating func takeDue(at now: Int64, in shards: TimerShards) -> Entry? {
        guard let entry = first(in: shards), entry.deadline <= now else { return nil }
        heaps[TimerShards.shard(of: entry.owner)].removeMin()
        entries -= 1
        noted[entry.owner] = nil
        return entry
    }

    /// How many owners are noted with a deadline.
    var count: Int { noted.count }

    /// Stale entries allowed beyond one per noted owner before the heaps are rebuilt.
    static let staleAllowance = 1_024

    private mutating func rebuild() {
        var entriesByShard = [[Entry]](repeating: [], count: TimerShards.count)
        for (owner, deadline) in noted { entriesByShard[TimerShards.shard(of: owner)].append(Entry(deadline: deadline, owner: owner)) }
        heaps = entriesByShard.map { Heap($0) }
        entries = noted.count
    }
}
