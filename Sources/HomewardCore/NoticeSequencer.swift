/// Puts the other relays' change notices in the order their commits took in the store, and decides for
/// each batch whether the cache can apply their changes or must reload.
///
/// A commit can be applied only when its change count is the one after the cache's (`loadedChangeCount`):
/// then the cache held every commit before it. Notices from different relays may arrive out of that order
/// (each relay's notices come in the order it sent them, but nothing orders two relays'), so a notice whose
/// commits are ahead is held, with every notice after it (events go out in the order notices came), until
/// the missing commit's notice arrives, for at most `holdLimit`; then the cache reloads. Anything else it
/// cannot place reloads at once: a commit at or below the cache's count (it may have been committing while
/// the cache loaded), a notice without commits it can read (`commits == nil`), a store that counts nothing,
/// or a cache this relay's own write put out of order (`RelayState.ownWriteAhead`).
struct NoticeSequencer {
    /// Notices waiting for a commit before theirs, in the order they came; commits already applied removed.
    private(set) var held: [ChangeNotice] = []
    /// When the oldest notice still held came (monotonic nanoseconds).
    private(set) var heldSince: UInt64?
    let holdLimit: UInt64

    init(holdLimit: UInt64 = NoticeSequencer.defaultHoldLimit) {
        self.holdLimit = holdLimit
    }

    /// 100 ms: a commit on another relay reaches here within a few milliseconds of the next one's notice,
    /// unless it never does (its transaction failed after taking its count): then the reload is not long in coming.
    static let defaultHoldLimit: UInt64 = 100_000_000

    enum Step: Equatable {
        /// Apply these commits, in this order, then deliver these notices' events.
        case apply([ChangeNotice.Commit], deliver: [ChangeNotice])
        /// Reload the cache from the store, then deliver these notices' events.
        case reload(deliver: [ChangeNotice])
    }

    /// What to do with `notices` (just received; may be none) and those still held, for a cache at `loaded`.
    mutating func take(_ notices: [ChangeNotice], loaded: Int64?, inOrder: Bool, now: UInt64) -> Step {
        var queue = held + notices
        held = []
        let commits = queue.flatMap { $0.commits ?? [] }
        let counts = commits.compactMap(\.count)
        guard inOrder, let loaded, queue.allSatisfy({ $0.commits != nil }), counts.count == commits.count,
              counts.allSatisfy({ $0 > loaded }), Set(counts).count == counts.count else {
            heldSince = nil
            return .reload(deliver: queue)
        }
        var byCount = Dictionary(uniqueKeysWithValues: commits.map { ($0.count!, $0) })
        var next = loaded + 1
        var run: [ChangeNotice.Commit] = []
        while let commit = byCount.removeValue(forKey: next) {
            run.append(commit)
            next += 1
        }
        for index in queue.indices { queue[index].commits?.removeAll { $0.count! < next } }
        let ready = queue.prefix { $0.commits?.isEmpty ?? false }.count
        held = Array(queue.dropFirst(ready))
        guard !held.isEmpty else {
            heldSince = nil
            return .apply(run, deliver: queue)
        }
        let since = heldSince ?? now
        if now >= since &+ holdLimit {
            // The gap did not fill: a reload covers every commit of the notices received so far.
            heldSince = nil
            held = []
            return .reload(deliver: queue)
        }
        heldSince = since
        return .apply(run, deliver: Array(queue.prefix(ready)))
    }

    /// The cache was reloaded, at `loaded`, for another reason: every commit of the notices held (they
    /// came before the reload began, so were committed) is in it. Notices left with nothing to wait for
    /// are delivered at the next `take`.
    mutating func reloaded(at loaded: Int64?) {
        guard let loaded else { return }
        for index in held.indices { held[index].commits?.removeAll { ($0.count ?? .max) <= loaded } }
    }

    /// The highest commit count among the notices held: the cache lacks the commits up to it (nil when none is held).
    var highestHeldCount: Int64? { held.flatMap { $0.commits ?? [] }.compactMap(\.count).max() }

    /// How long until the oldest held notice's wait is over (nil when none is held).
    func remainingHold(now: UInt64) -> UInt64? {
        heldSince.map { since in (since &+ holdLimit) > now ? (since &+ holdLimit) - now : 0 }
    }
}
