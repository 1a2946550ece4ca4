/// Where a cache of connected users stands in letting go of departed users (`Relay+Eviction`).
struct EvictionState {
    /// Residents noted as admitted or gone, due for eviction once their grace passes.
    var idle: IdleResidents
    /// Whether a sweep is scheduled (`scheduleEviction`).
    var sweepScheduled = false
    /// Users evicted since freed memory was last given back (`Relay.releaseFreedMemory`).
    var evictedSinceRelease = 0

    init(grace: Int64) { idle = IdleResidents(grace: grace) }
}
