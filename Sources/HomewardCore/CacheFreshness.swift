/// What a relay sharing its store knows about how current its cache is, so that a request is decided on it
/// only once it holds every write another relay acknowledged before the request came (`Relay+Cluster`,
/// `catchUpBeforeRequest`).
///
/// Commands are numbered in the order they reach the mailbox. A check that began after command n was
/// submitted (a bus barrier) covers commands 1...n: whatever another relay
/// acknowledged before they came, the cache then shows. So one check serves every request that was waiting
/// while it ran. A barrier is trusted only on a bus connection that was up when the cache was last loaded
/// whole (after a reconnect the notices sent meanwhile are lost), and after a failed one the store is asked
/// instead for a while (the request's user's versions), so that a bus that does not answer costs one
/// timeout, not one per request.
struct CacheFreshness {
    /// Commands submitted up to this number are covered by a check made since.
    private(set) var checkedThrough = 0
    /// The bus connection (`RelayBus.generation`) on which the cache was last found current by the store.
    private(set) var currentOnBus: Int?
    /// When a barrier last failed (the rules' clock, milliseconds).
    private(set) var barrierFailedAt: Int64 = .min / 2

    /// How long after a failed barrier requests are checked against the store.
    static let barrierPause: Int64 = 1000

    func covers(command: Int) -> Bool { command <= checkedThrough }

    /// Whether a barrier on bus connection `generation` shows everything: no notice was lost since the
    /// cache was last found current by the store.
    func trusts(_ generation: Int) -> Bool { currentOnBus == generation }

    func mayUseBarrier(now: Int64) -> Bool { now - barrierFailedAt >= Self.barrierPause }

    /// A check that began once `submitted` commands had come brought the cache up to date.
    mutating func checked(through submitted: Int) { checkedThrough = max(checkedThrough, submitted) }

    /// The cache was loaded whole from the store (a reload) while bus connection
    /// `generation` was the one up (nil: the bus not started yet, which proves nothing).
    mutating func currentWithStore(onBus generation: Int?) {
        guard let generation else { return }
        currentOnBus = max(currentOnBus ?? generation, generation)
    }

    mutating func barrierFailed(at now: Int64) { barrierFailedAt = now }
}
