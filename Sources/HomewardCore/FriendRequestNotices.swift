/// When a `friend.request` event last went from one user to another, so that asking, withdrawing
/// (or being declined) and asking again cannot push a stream of events to the same person. A repeat
/// within `cooldown` is still a real, stored request: the target finds it in `friend.list` and in the
/// backlog of its next sign-in, it just does not ring again. An accepted request clears the pair:
/// friends who part and make up ask each other as anyone would (the target chose to accept).
///
/// Kept in memory only: after a restart the next request notifies again, which is what a person who
/// missed the first one would want.
struct FriendRequestNotices: Sendable {
    static let cooldown: Int64 = 10 * 60 * 1000
    /// Past this many pairs, expired entries are dropped (the map must not grow with every pair ever seen).
    static let pruneAbove = 100_000

    private struct Pair: Hashable {
        let from: String
        let to: String
    }

    private var lastNotified: [Pair: Int64] = [:]

    /// Whether a request `from` -> `to` at `now` should push an event; if so, records it.
    mutating func shouldNotify(from: String, to: String, now: Int64) -> Bool {
        let pair = Pair(from: from, to: to)
        if let last = lastNotified[pair], now - last < Self.cooldown { return false }
        lastNotified[pair] = now
        if lastNotified.count > Self.pruneAbove { lastNotified = lastNotified.filter { now - $0.value < Self.cooldown } }
        return true
    }

    /// Forgets every pair `keep` refuses (after a reload: pairs that became friends on another relay).
    mutating func filter(_ keep: (_ from: String, _ to: String) -> Bool) {
        lastNotified = lastNotified.filter { keep($0.key.from, $0.key.to) }
    }

    /// Forgets both directions between `a` and `b`: they became friends.
    mutating func forget(_ a: String, _ b: String) {
        lastNotified[Pair(from: a, to: b)] = nil
        lastNotified[Pair(from: b, to: a)] = nil
    }
}
