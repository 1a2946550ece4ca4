/// Group commit: what the relay decided and has not told anyone yet, in the order it
/// decided it, and which part of it is being committed now. A value with no I/O: the relay (`Relay+Writes`)
/// sends the batches to its store and performs what comes back.
///
/// The relay decides from memory, one command at a time (the LMAX way): a decision's durable changes are
/// `stage`d and what it makes heard (its reply, events, audience, push wake) waits as a `Waiter` behind
/// them. One batch is committed at a time; a batch is every change staged while the previous one was being
/// committed (up to `maxChanges`; one decision is never split), so many decisions share one transaction
/// and one fsync, with no delay added: the first write of an idle relay goes out at once. A waiter is
/// released when everything decided before it is stored, so replies and events go out in decision order,
/// and a reply that only reads is never ahead of a write it has seen. When a batch fails, it and
/// everything decided after it (on top of it) fail: `failed` hands back all their waiters.
///
/// On a shared store each decision's changes come with the users they concern and, for each, the version the
/// decision saw less this relay's own commits since the journal was last idle (`base`, `ownCommits`): a batch is
/// checked with, for each user, the oldest base a decision in it saw plus the own commits since
/// (`committingScope`), so a batch is refused when any decision in it missed another relay's write.
///
/// Differs from LMAX's journal in what it holds: the decided changes, not the input commands, so a
/// restart reads state, not a log to replay.
struct WriteJournal<Waiter> {
    private enum Entry {
        case changes([StoreChange], bases: UserVersions, address: NoticeAddress)
        case waiter(Waiter)
    }

    /// Decided and not released yet, oldest first; the first `committing` of them are being committed.
    private var entries: [Entry] = []
    private var committing: Int?
    /// For the batch being committed: its changes, and each of its users with the lowest base a decision in it saw.
    private(set) var committingChanges: [StoreChange] = []
    private var committingBases: UserVersions = [:]
    /// Where the notice of the batch being committed goes (the union of its decisions' addresses).
    private(set) var committingAddress = NoticeAddress()
    /// This relay's own commits per user since the journal was last idle (a shared store's versions).
    private(set) var ownCommits: UserVersions = [:]
    /// The most changes one batch takes (a bigger decision goes alone).
    let maxChanges: Int

    init(maxChanges: Int = 1024) {
        self.maxChanges = maxChanges
    }

    /// Whether nothing is being committed nor waits to be.
    var isIdle: Bool { entries.isEmpty }

    /// Whether a batch is with the store.
    var isCommitting: Bool { committing != nil }

    /// The users every decision staged and not released concerns, as each named them with its bases (empty on a
    /// relay alone): what a refusal of the batch being committed makes stale in the cache, with what was decided
    /// on top of it.
    var stagedUsers: Set<String> {
        entries.reduce(into: []) { users, entry in
            if case .changes(_, let bases, _) = entry { users.formUnion(bases.keys) }
        }
    }

    /// The changes of every decision staged and not released (those being committed among them).
    var stagedChanges: [StoreChange] {
        entries.flatMap { entry -> [StoreChange] in
            if case .changes(let changes, _, _) = entry { return changes }
            return []
        }
    }

    /// One decision's changes, committed atomically with the others of its batch.
    mutating func stage(_ changes: [StoreChange], bases: UserVersions = [:], address: NoticeAddress = NoticeAddress()) {
        guard !changes.isEmpty else { return }
        entries.append(.changes(changes, bases: bases, address: address))
    }

    /// Waits for everything staged so far; returns the waiter back when nothing is outstanding: then it
    /// is released at once.
    mutating func whenStored(_ waiter: Waiter) -> Waiter? {
        guard !entries.isEmpty else { return waiter }
        entries.append(.waiter(waiter))
        return nil
    }

    /// The next batch's changes, when none is being committed and any are staged.
    mutating func nextBatch() -> [StoreChange]? {
        guard committing == nil else { return nil }
        var batch: [StoreChange] = []
        var bases = UserVersions()
        var address = NoticeAddress()
        var end = 0
        for (index, entry) in entries.enumerated() {
            guard case .changes(let changes, let seen, let addressed) = entry else { continue }
            if !batch.isEmpty, batch.count + changes.count > maxChanges { break }
            batch += changes
            bases.merge(seen) { min($0, $1) }
            address.formUnion(addressed)
            end = index + 1
        }
        guard !batch.isEmpty else { return nil }
        committing = end
        committingChanges = batch
        committingBases = bases
        committingAddress = address
        return batch
    }

    /// What a decision that saw `version` of `user` in the cache stages as its base (`stage(_:bases:)`).
    func base(_ version: Int64, of user: String) -> Int64 { version - ownCommits[user, default: 0] }

    /// What the batch being committed is checked with: each of its users at the oldest version a decision in it
    /// saw, plus this relay's own commits since.
    var committingScope: UserVersions {
        committingBases.reduce(into: [:]) { $0[$1.key] = $1.value + ownCommits[$1.key, default: 0] }
    }

    /// The batch being committed is stored (moving the versions of `moved`'s users, on a shared store): the
    /// waiters to release now, in order (its own, and those right behind it that wait for nothing else).
    mutating func committed(moving moved: UserVersions? = nil) -> [Waiter] {
        guard let end = committing else { return [] }
        committing = nil
        committingChanges = []
        committingBases = [:]
        committingAddress = NoticeAddress()
        for user in (moved ?? [:]).keys { ownCommits[user, default: 0] += 1 }
        var released: [Waiter] = []
        var taken = end
        for entry in entries[..<end] { if case .waiter(let waiter) = entry { released.append(waiter) } }
        for entry in entries[end...] {
            guard case .waiter(let waiter) = entry else { break }
            released.append(waiter)
            taken += 1
        }
        entries.removeFirst(taken)
        // Idle: no decision staged holds a base that counts them any more.
        if entries.isEmpty { ownCommits = [:] }
        return released
    }

    /// The batch being committed failed: it and everything staged after it are dropped. Returns every
    /// waiter, in order, and the changes that were not stored.
    mutating func failed() -> (waiters: [Waiter], lost: [StoreChange]) {
        var waiters: [Waiter] = []
        var lost: [StoreChange] = []
        for entry in entries {
            switch entry {
            case .changes(let changes, _, _): lost += changes
            case .waiter(let waiter): waiters.append(waiter)
            }
        }
        entries.removeAll()
        committing = nil
        committingChanges = []
        committingBases = [:]
        committingAddress = NoticeAddress()
        ownCommits = [:]
        return (waiters, lost)
    }
}
