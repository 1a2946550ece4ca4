/// What one relay does with the timer shards at one check, from what it holds, what the others hold and
/// how many relays compete (`PostgresTimerLease`): its fair share is `ceil(TimerShards.count / relays)`;
/// above it, it releases the excess (so a relay that just started gets some); below it, it tries to take
/// free shards up to it. Shards held by another relay are never touched: a dead relay's shards become
/// free when PostgreSQL releases its locks, and are taken then.
///
/// Fair shares sum to at least `count`, so once every relay has reached its share no shard is left free.
public struct TimerShareDecision: Sendable, Equatable {
    /// Shards to stop firing and then release.
    public var release: TimerShards
    /// Free shards to try to take (another relay may take one first; that try fails).
    public var take: TimerShards

    public init(release: TimerShards = .none, take: TimerShards = .none) {
        self.release = release
        self.take = take
    }

    /// A relay's share with `relays` competing (itself included, at least one).
    public static func fairShare(relays: Int) -> Int {
        let relays = max(1, relays)
        return (TimerShards.count + relays - 1) / relays
    }

    /// - Parameters:
    ///   - held: the shards this relay holds.
    ///   - heldElsewhere: the shards other relays hold.
    ///   - relays: how many relays compete, this one included.
    ///   - start: where to begin looking for free shards; relays starting at different places rarely try for
    ///     the same shard at the same moment, so a dead relay's shards are split at the first try.
    public init(held: TimerShards, heldElsewhere: TimerShards, relays: Int, start: Int = 0) {
        self.init()
        let share = Self.fairShare(relays: relays)
        if held.size > share {
            // The highest-numbered ones: deterministic, and a relay keeps the shards it fires longest.
            for shard in held.members.reversed().prefix(held.size - share) { release.insert(shard) }
            return
        }
        let free = TimerShards.all.subtracting(held).subtracting(heldElsewhere)
        var wanted = share - held.size
        for offset in 0..<TimerShards.count where wanted > 0 {
            let shard = ((start % TimerShards.count) + TimerShards.count + offset) % TimerShards.count
            if free.contains(shard) {
                take.insert(shard)
                wanted -= 1
            }
        }
    }
}
