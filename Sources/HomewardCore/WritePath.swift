/// The relay's write path as one value: what it decided and has not stored yet (`journal`), whether memory
/// holds what the store may lack (`unstored`) and when storage was last read, the write failures, the tokens a
/// command revoked, the last-seen times waiting to be written, the write versions the cache holds, and the
/// bookkeeping of decisions (those in flight, a request decided again after a refusal). A value with no I/O:
/// the relay's extensions (`Relay+Writes`, `Relay+Store`, `Relay+Spool`) do the writing and reading and tell
/// it what happened through its transitions; what to do next (read back now, log, submit) follows from what
/// those return.
struct WritePath<Waiter> {
    /// Decided, not stored yet, and what waits for it.
    var journal = WriteJournal<Waiter>()
    /// Set when a write failed (or the spool holds alarms the store lacks), until the state is read back
    /// from storage.
    private(set) var unstored = false
    /// When the cache was last read from storage (or a read was tried).
    private(set) var lastReadBack: Int64 = 0
    /// How many writes failed so far, and the last failure (`writesSettled` compares them).
    private(set) var failures = 0
    private(set) var lastFailure = ""
    /// Tokens the command being decided revoked, until their connections are closed once it is stored.
    private(set) var revokedTokens: [String] = []
    /// Each user's write version as the cache holds it (`RelayStore.applyChecked`): as loaded, moved on by every
    /// commit applied since (this relay's own and the others'). Nil when the store keeps none (a relay alone).
    /// Kept beside the state, not in it: a version only moves on with a commit, and a decision does not touch
    /// every user's version.
    private(set) var versions: UserVersions?
    /// Decisions in flight on a shared store (`recordingRemovals`): the owners of what they remove are kept
    /// until none is.
    private(set) var decisionsInFlight = 0
    /// The request being decided again after its write was refused (`decideAgain`), while it is.
    private(set) var redecision: Attempt?
    /// Last-seen times not staged yet. They only tell friends when someone was last online, so they are
    /// written together, within `Relay.lastSeenWriteDelay` or at `drain`, rather than one commit (one fsync) per
    /// disconnect: after a network blip, thousands of those would queue ahead of the next alarm.
    private(set) var unsavedLastSeen: [String: Int64] = [:]

    /// How often a request has been decided, and since when.
    struct Attempt: Equatable {
        let attempts: Int
        let since: ContinuousClock.Instant
    }

    /// A read-back is tried at most once per this many milliseconds while storage fails (each costs a storage
    /// timeout while the database is down, and operations wait behind it).
    static var readBackInterval: Int64 { 1000 }

    init(versions: UserVersions? = nil) {
        self.versions = versions
    }

    // MARK: Failures and read-backs

    /// A write failed: counted and kept (`lastFailure`), and memory counts as unstored. True when it was not
    /// before: then the read-back is due at once (the relay asks for it); when it already was, read-backs keep
    /// their own pace.
    mutating func writeFailed(_ error: any Error) -> Bool {
        failures += 1
        lastFailure = "\(error)"
        return markUnstored()
    }

    /// Memory holds what the store lacks (a failed write, alarms in the spool): true when it did not before, and
    /// then a read-back is due at once.
    mutating func markUnstored() -> Bool {
        guard !unstored else { return false }
        unstored = true
        lastReadBack = .min / 2
        return true
    }

    /// Whether a read-back is due at `now` (one was tried `readBackInterval` ago or longer).
    func readBackDue(now: Int64) -> Bool { now - lastReadBack >= Self.readBackInterval }

    /// A read of the whole state from storage begins at `now`.
    mutating func readingBack(at now: Int64) { lastReadBack = now }

    /// The read-back failed: memory counts as unstored. True when it did not before.
    mutating func readBackFailed() -> Bool {
        defer { unstored = true }
        return !unstored
    }

    /// The state was read back: memory matches storage, at the store's `versions`. True when it counted as
    /// unstored before (storage is back).
    mutating func readBack(versions stored: UserVersions?) -> Bool {
        defer {
            unstored = false
            versions = stored
        }
        return unstored
    }

    /// What the store holds about `users` was read back (a slice) at their `stored` versions (0 for one missing);
    /// the other users' versions stay as they were.
    mutating func sliceReadBack(of users: Set<String>, versions stored: UserVersions) {
        guard versions != nil else { return }
        for user in users { versions?[user] = stored[user, default: 0] }
    }

    /// What the spool holds could not be stored after a read-back at `now`: memory counts as unstored again,
    /// and the next read-back is one interval away.
    mutating func spoolNotStored(at now: Int64) {
        unstored = true
        lastReadBack = now
    }

    /// The failure message when a write failed since `failures` was `before`, else nil.
    func failedSince(_ before: Int) -> String? { failures == before ? nil : lastFailure }

    // MARK: Staging and versions

    /// One decision's changes join the next batch, with the versions its users were seen at (`bases`); the
    /// tokens they revoke are kept until the decision is done (`takeRevokedTokens`).
    mutating func stage(_ changes: [StoreChange], bases: UserVersions, address: NoticeAddress = NoticeAddress()) {
        journal.stage(changes, bases: bases, address: address)
        for case .revokeToken(let hash) in changes { revokedTokens.append(hash) }
    }

    /// The tokens revoked since last asked.
    mutating func takeRevokedTokens() -> [String] {
        defer { revokedTokens.removeAll() }
        return revokedTokens
    }

    /// A commit moved these users' versions on (this relay's own, or another relay's applied to the cache).
    mutating func versionsMoved(_ moved: UserVersions) {
        versions?.merge(moved) { max($0, $1) }
    }

    /// `users` left the cache (`Relay.evict`): their versions are no longer known, as before they were admitted.
    mutating func forgetVersions(of users: Set<String>) {
        guard versions != nil else { return }
        for user in users { versions?[user] = nil }
    }

    /// `username` was last seen at `time`, to be written with the others; true when none waited before (then
    /// their write is to be scheduled).
    mutating func lastSeen(_ username: String, at time: Int64) -> Bool {
        defer { unsavedLastSeen[username] = time }
        return unsavedLastSeen.isEmpty
    }

    /// The last-seen times waiting, as changes to persist, and none waits any more.
    mutating func takeLastSeen() -> [StoreChange] {
        defer { unsavedLastSeen.removeAll() }
        return unsavedLastSeen.map { StoreChange.lastSeen(username: $0.key, at: $0.value) }
    }

    // MARK: Decisions

    /// A decision on a shared store begins; true when it is the only one in flight (what earlier ones
    /// recorded of removed owners can be forgotten).
    mutating func decisionStarted() -> Bool {
        decisionsInFlight += 1
        return decisionsInFlight == 1
    }

    mutating func decisionEnded() {
        precondition(decisionsInFlight > 0, "a decision ended that did not start")
        decisionsInFlight -= 1
    }

    /// The attempt a request decided at `now` is: the next of the one being decided again, or a first.
    func attempt(at now: ContinuousClock.Instant) -> Attempt {
        Attempt(attempts: (redecision?.attempts ?? 0) + 1, since: redecision?.since ?? now)
    }

    /// A refused request is being decided again (`attempt` counts from it) until `decidedAgain`.
    mutating func decidingAgain(_ attempt: Attempt) { redecision = attempt }

    mutating func decidedAgain() { redecision = nil }
}
