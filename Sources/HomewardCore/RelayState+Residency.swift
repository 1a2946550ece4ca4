import HomewardProtocol

/// A cache that holds only some users' part of the state (`CacheMode.connected`).
///
/// The invariant: for a resident user, every stored row that concerns them is in the cache and current (their
/// slice, `StoredState.slice(of:)`, kept up to date as a whole cache is). What the cache holds about anyone else
/// may be partial (the other side of a resident's relation, an entity with a deadline, a remote notice) and no
/// rule reads it as complete: before a rule runs, the relay admits the slices of the users it reads
/// (`usersNeeded`).
extension RelayState {
    /// Whether `username`'s whole part is in the cache (always, for a whole cache).
    public func isResident(_ username: String) -> Bool { resident?.contains(username) ?? true }

    /// The users whose whole part deciding `request` by `actor` reads: the relay admits the slices of those not
    /// resident before it decides.
    public func usersNeeded(for request: Request, by actor: String) -> Set<String> {
        var users: Set<String> = [actor]
        switch request {
        case .friendRequest(let other), .friendAccept(let other), .friendDecline(let other), .friendRemove(let other),
             .userBlock(let other), .userUnblock(let other), .friendLocation(let other), .friendTrail(let other):
            users.insert(other)
        case .msgSend(let to, _): users.insert(to)
        default: break
        }
        return users
    }

    /// The users whose whole part the work due at `now` in `shards` reads (`fireDue`).
    public func usersNeeded(forDueAt now: Int64, shards: TimerShards = .all) -> Set<String> {
        []
    }

    /// Makes `users` resident: their part of the cache is replaced by `slice` (`replaceSlice`), read from the
    /// store in one snapshot. Does nothing to which users are resident in a whole cache.
    public mutating func admit(_ slice: StoredState, of users: Set<String>) {
        replaceSlice(of: users, with: slice)
        resident?.formUnion(users)
    }
}
