/// Residents of a cache of connected users that may be evicted once idle (`Relay.evictIdleResidents`): each user
/// admitted or leaving is noted with the time, and is due for eviction `grace` later unless noted again since.
///
/// A FIFO in the order of the notes: the due ones are at its front, so a sweep costs the entries it takes, never a
/// walk of the residents. A user noted again leaves an older entry behind, which is skipped when it comes up (its time
/// is not the user's latest); entries are at most one per note within the last `grace`, plus those not swept yet.
struct IdleResidents {
    /// Milliseconds a user stays resident after their last note.
    let grace: Int64
    private var latest: [String: Int64] = [:]
    private var queue = FIFO<(user: String, at: Int64)>()

    init(grace: Int64) { self.grace = grace }

    /// `user` was admitted, or left, at `now`.
    mutating func note(_ user: String, at now: Int64) {
        latest[user] = now
        queue.append((user, now))
    }

    /// `user` is no longer resident, or stays as long as something else keeps them (a connection): nothing is due.
    mutating func forget(_ user: String) { latest[user] = nil }

    /// Up to `limit` users whose last note is at least `grace` before `now`, in the order noted; each is taken
    /// (noted again to keep them).
    mutating func takeDue(at now: Int64, limit: Int) -> [String] {
        var due: [String] = []
        while due.count < limit, let first = queue.first, first.at + grace <= now {
            _ = queue.popFirst()
            guard latest[first.user] == first.at else { continue }
            latest[first.user] = nil
            due.append(first.user)
        }
        return due
    }

    /// When the next entry falls due (nil: none waits). It may be a stale one, which a sweep then skips.
    var nextDue: Int64? { queue.first.map { $0.at + grace } }

    /// Users waiting for their grace to pass.
    var count: Int { latest.count }
}
