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
    struct Entry: Sendable, Equatable {
        var deadline: Int64
        var owner: String
    }

    /// Each owner's earliest deadline as last noted; an owner here has a current entry in their shard's heap.
    private var noted: [String: Int64] = [:]
    private var heaps = [DeadlineHeap](repeating: DeadlineHeap(), count: TimerShards.count)
    /// Entries in all heaps, current and stale.
    private var entries = 0

    /// `owner`'s earliest deadline is `deadline` now (nil: they own nothing with one).
    mutating func note(_ owner: String, deadline: Int64?) {
        guard noted[owner] != deadline else { return }
        noted[owner] = deadline
        guard let deadline else { return }
        heaps[TimerShards.shard(of: owner)].push(Entry(deadline: deadline, owner: owner))
        entries += 1
        if entries > 2 * noted.count + Self.staleAllowance { rebuild() }
    }

    /// The current entry with the earliest deadline among the owners in `shards` (stale ones in front are dropped).
    mutating func first(in shards: TimerShards) -> Entry? {
        var first: Entry?
        for shard in 0..<TimerShards.count where shards.contains(shard) {
            while let top = heaps[shard].first, noted[top.owner] != top.deadline {
                heaps[shard].popFirst()
                entries -= 1
            }
            if let top = heaps[shard].first, first.map({ DeadlineHeap.precedes(top, $0) }) ?? true { first = top }
        }
        return first
    }

    /// Takes the entry `first(in: shards)` returns if its deadline is at or before `now`: its owner is forgotten until
    /// noted again.
    mutating func takeDue(at now: Int64, in shards: TimerShards) -> Entry? {
        guard let entry = first(in: shards), entry.deadline <= now else { return nil }
        heaps[TimerShards.shard(of: entry.owner)].popFirst()
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
        heaps = entriesByShard.map(DeadlineHeap.init)
        entries = noted.count
    }
}

/// A binary min-heap of deadline entries, earliest first (equal deadlines by owner, so that the order is the same in
/// every run).
struct DeadlineHeap: Sendable {
    private var items: [DeadlineIndex.Entry] = []

    init() {}

    /// A heap of `items`, in O(n).
    init(_ items: [DeadlineIndex.Entry]) {
        self.items = items
        for index in stride(from: items.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    var first: DeadlineIndex.Entry? { items.first }
    var count: Int { items.count }

    mutating func push(_ entry: DeadlineIndex.Entry) {
        items.append(entry)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.precedes(items[child], items[parent]) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    mutating func popFirst() -> DeadlineIndex.Entry? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let first = items.removeLast()
        if !items.isEmpty { siftDown(0) }
        return first
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            var smallest = parent
            let left = 2 * parent + 1, right = left + 1
            if left < items.count, Self.precedes(items[left], items[smallest]) { smallest = left }
            if right < items.count, Self.precedes(items[right], items[smallest]) { smallest = right }
            guard smallest != parent else { return }
            items.swapAt(parent, smallest)
            parent = smallest
        }
    }

    static func precedes(_ a: DeadlineIndex.Entry, _ b: DeadlineIndex.Entry) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.owner < b.owner
    }
}
