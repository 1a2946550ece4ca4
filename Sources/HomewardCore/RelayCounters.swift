import Metrics

/// The relay's metrics (`/metrics`): alarms, signed-in users, timer shards, how its cache was read and let go of. Those
/// only a relay sharing its store moves are `ClusterCounters`, in its `ClusterLink`.
struct RelayCounters {
    let alarmsRaised: Counter
    let alarmsAcknowledged: Counter
    let alarmsPending: Gauge
    /// Alarms delivered while the store failed and not stored yet.
    let alarmsSpooled: Gauge
    let usersOnline: Gauge
    /// How many timer shards this relay fires.
    let timerShardsHeld: Gauge
    /// How often the cache was read whole from the store, and how often only some users' part of it (`reloadSlices`).
    let reloads: Counter
    let sliceReloads: Counter
    /// How many users' whole part the cache holds (`CacheMode.connected`; a whole cache does not count).
    let residentUsers: Gauge
    /// Users evicted from a cache of connected users (`Relay+Eviction`).
    let evictions: Counter

    init(metrics: any MetricsFactory) {
        alarmsRaised = Counter(label: "homeward_alarms_raised_total", factory: metrics)
        alarmsAcknowledged = Counter(label: "homeward_alarms_acknowledged_total", factory: metrics)
        alarmsPending = Gauge(label: "homeward_alarms_pending", factory: metrics)
        alarmsSpooled = Gauge(label: "homeward_alarms_spooled", factory: metrics)
        usersOnline = Gauge(label: "homeward_authenticated_users", factory: metrics)
        timerShardsHeld = Gauge(label: "homeward_timer_shards_held", factory: metrics)
        reloads = Counter(label: "homeward_cache_reloads_total", factory: metrics)
        sliceReloads = Counter(label: "homeward_cache_slices_total", factory: metrics)
        residentUsers = Gauge(label: "homeward_cache_resident_users", factory: metrics)
        evictions = Counter(label: "homeward_cache_evictions_total", factory: metrics)
    }
}

/// The metrics only a relay sharing its store moves (`ClusterLink.counters`): the other relays' commits its cache
/// applied instead of reading the store, and the users whose change notices it follows (`Relay+Following`).
struct ClusterCounters {
    let appliedCommits: Counter
    /// How many users' change notices this relay follows, and how often a gap for a followed user was repaired by
    /// reading back slices.
    let followedUsers: Gauge
    let gapRepairs: Counter

    init(metrics: any MetricsFactory) {
        appliedCommits = Counter(label: "homeward_cache_commits_applied_total", factory: metrics)
        followedUsers = Gauge(label: "homeward_cache_followed_users", factory: metrics)
        gapRepairs = Counter(label: "homeward_cache_gap_repairs_total", factory: metrics)
    }
}
