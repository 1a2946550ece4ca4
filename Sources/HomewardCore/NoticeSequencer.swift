/// Puts the other relays' commits in the order the store gave the users they concern, and decides for each
/// batch of notices whether the cache can apply their changes or must reload.
///
/// Every checked write moves the version of each user it concerns on by one (`RelayStore.applyChecked`), and
/// its notice carries the versions it gave them. A commit can be applied when, for each of its users, the
/// cache holds the version just before: it then holds every earlier write about them, and writes about other
/// users commute with it (each stored entity is written only with its owner among the users, so two commits
/// that change one entity share a user and are ordered by that user's versions). A commit whose users the
/// cache already holds at its versions or later came before the cache's last load and is skipped.
///
/// Notices from different relays may arrive out of their users' order (each relay's notices come in the order
/// it sent them, but nothing orders two relays'), so a commit that is ahead for some user waits, and its notice
/// is held with every notice after it (events go out in the order notices came), until the missing commit's
/// notice arrives, for at most `holdLimit`; then the cache reloads. Anything it cannot place reloads at once: a
/// notice without commits it can read (`commits == nil`), a commit without versions (a store that keeps none),
/// or a commit the cache holds for some of its users and lacks for others (it cannot have been applied by half).
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
    /// unless it never does (lost with a relay that died between its commit and its publish): then the reload
    /// is not long in coming.
    static let defaultHoldLimit: UInt64 = 100_000_000

    enum Step: Equatable {
        /// Apply these commits, in this order, then deliver these notices' events.
        case apply([ChangeNotice.Commit], deliver: [ChangeNotice])
        /// Reload the cache from the store, then deliver these notices' events.
        case reload(deliver: [ChangeNotice])
        /// A cache that follows some users (`followed`): a commit waited longer than the hold limit for an earlier one
        /// about a followed user. Apply these commits and deliver these notices' events, then read back the slices of
        /// the followed users the store has ahead (`reloaded(at:)` then drops the held commits those slices hold) and
        /// take again: the notices still held stay, so what they carry about users not followed is not lost.
        case repair([ChangeNotice.Commit], deliver: [ChangeNotice])
    }

    /// Where a commit stands against a cache's versions.
    enum Placement: Equatable {
        /// The cache holds it (a load after it): skipped.
        case held
        /// The cache holds every write before it about each of its users: apply it now.
        case next
        /// A write before it about one of its users is missing here: wait for that commit's notice.
        case ahead
        /// Held for some of its users and missing for others: the cache is not what the store had at any time.
        case inconsistent
    }

    /// `complete`: whether a user missing from `cache` is at 0 (a whole cache knows every user's version), or unknown
    /// (a cache of connected users knows its residents' and those it heard of since: a commit is placed by those; one
    /// about nobody it knows is applied as it comes, since what the cache holds about others may be partial anyway).
    /// `followed`: a cache that hears only the notices of the users it follows places a commit by those users' versions
    /// alone (a user it does not follow is not heard in full: their version would make commits look ahead).
    static func placement(of versions: UserVersions, in cache: UserVersions, complete: Bool = true,
                          followed: Set<String>? = nil) -> Placement {
        let versions = complete ? versions
            : versions.filter { entry in cache[entry.key] != nil && (followed?.contains(entry.key) ?? true) }
        var held = 0, next = 0
        for (user, version) in versions {
            let cached = cache[user] ?? 0
            if cached >= version { held += 1 } else if cached == version - 1 { next += 1 }
        }
        if held == versions.count, !versions.isEmpty { return .held }
        if next == versions.count { return .next }
        return held == 0 ? .ahead : .inconsistent
    }

    /// What to do with `notices` (just received; may be none) and those still held, for a cache at `versions`
    /// (nil: the cache keeps none, so it cannot place any commit).
    mutating func take(_ notices: [ChangeNotice], versions: UserVersions?, complete: Bool = true, followed: Set<String>? = nil,
                       now: UInt64) -> Step {
        var queue = held + notices
        held = []
        guard var cache = versions,
              queue.allSatisfy({ notice in notice.commits.map { $0.allSatisfy { $0.versions != nil } } ?? false }) else {
            heldSince = nil
            return .reload(deliver: queue)
        }
        // Applies whatever can be applied, in the order the notices came, until nothing more can: a commit
        // that waits may be waiting for one of a later notice (another relay's).
        var run: [ChangeNotice.Commit] = []
        var progress = true
        while progress {
            progress = false
            for index in queue.indices {
                var waiting: [ChangeNotice.Commit] = []
                // A relay's commits in one notice keep their order: once one waits, those after it wait too.
                for commit in queue[index].commits ?? [] {
                    let versions = commit.versions ?? [:]
                    guard waiting.isEmpty else { waiting.append(commit); continue }
                    switch Self.placement(of: versions, in: cache, complete: complete, followed: followed) {
                    case .held:
                        progress = true
                    case .next:
                        run.append(commit)
                        cache.merge(versions) { max($0, $1) }
                        progress = true
                    case .ahead:
                        waiting.append(commit)
                    case .inconsistent:
                        heldSince = nil
                        return .reload(deliver: queue)
                    }
                }
                queue[index].commits = waiting
            }
        }
        let ready = queue.prefix { $0.commits?.isEmpty ?? false }.count
        held = Array(queue.dropFirst(ready))
        guard !held.isEmpty else {
            heldSince = nil
            return .apply(run, deliver: queue)
        }
        let since = heldSince ?? now
        if now >= since &+ holdLimit, followed != nil {
            // The gap did not fill: the followed users behind are read back, then the held notices taken again.
            heldSince = nil
            return .repair(run, deliver: Array(queue.prefix(ready)))
        }
        if now >= since &+ holdLimit {
            // The gap did not fill: a reload covers every commit of the notices received so far.
            heldSince = nil
            held = []
            return .reload(deliver: queue)
        }
        heldSince = since
        return .apply(run, deliver: Array(queue.prefix(ready)))
    }

    /// The cache was reloaded, at `versions`, for another reason: every commit of the notices held (they came
    /// before the reload began, so were committed) is in it. Notices left with nothing to wait for are
    /// delivered at the next `take`.
    mutating func reloaded(at versions: UserVersions?, complete: Bool = true, followed: Set<String>? = nil) {
        guard let versions else { return }
        for index in held.indices {
            held[index].commits?.removeAll {
                Self.placement(of: $0.versions ?? [:], in: versions, complete: complete, followed: followed) == .held
            }
        }
    }

    /// Whether notices wait for a commit this cache lacks.
    var isHolding: Bool { !held.isEmpty }

    /// How long until the oldest held notice's wait is over (nil when none is held).
    func remainingHold(now: UInt64) -> UInt64? {
        heldSince.map { since in (since &+ holdLimit) > now ? (since &+ holdLimit) - now : 0 }
    }
}
