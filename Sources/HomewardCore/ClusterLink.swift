import HomewardProtocol
import Metrics

/// What a relay keeps to work among others sharing its store, apart from its cache (`RelayState`, with the
/// users' write `versions` beside it): the notice it is building for the others, what it knows of their presence
/// and tells them of its own, how current its cache is, their notices waiting to be applied in order, what it
/// showed its users while the bus was lost, and the metrics of all that (`ClusterCounters`). A value the relay's
/// actor owns (`Relay.cluster`); `Relay+Cluster`, `Relay+Deltas` and `Relay+Presence` work on it. A relay alone keeps
/// it as made: nothing reads it.
struct ClusterLink {
    /// Changes this relay committed and events it sent that the other relays must hear of, not sent yet.
    var outgoing: ChangeNotice
    /// Whether `outgoing` holds a commit (it is sent even when it carries no event).
    var noticeNeeded = false
    /// What the other relays said about who is connected to them (`Relay+Presence`).
    var presenceSync = PresenceSync()
    /// What this relay tells them about who is connected here (`Relay+Presence`).
    var presenceFeed: PresenceFeed
    /// While the bus is lost: what each connected user was shown of their backlog (see `busLost`).
    var backlogShown: [String: [JSONValue]]?
    /// What `busBack` sent each user, and when (see `alreadyCaughtUp`).
    var caughtUp: [String: [JSONValue]] = [:]
    var caughtUpAt: Int64 = 0
    /// Set once this relay told the others it is gone (`stopBus`): it sends nothing more.
    var busStopped = false
    /// When reading the store's versions last failed (see `catchUpWithStore`).
    var versionsFailedAt: Int64 = .min / 2
    /// Which requests the cache is known current for (see `catchUpBeforeRequest`).
    var freshness = CacheFreshness()
    /// Other relays' notices in their users' order (see `Relay+Deltas`).
    var sequencer = NoticeSequencer()
    /// Whether a `checkHeldNotices` is already due (see `Relay+Deltas`).
    var heldCheckQueued = false
    /// The users whose change notices this relay hears, when it hears only those (`Relay+Following`).
    var followed = Set<String>()
    /// The metrics only a relay among others moves.
    let counters: ClusterCounters

    init(node: String, metrics: any MetricsFactory) {
        counters = ClusterCounters(metrics: metrics)
        outgoing = ChangeNotice(node: node)
        presenceFeed = PresenceFeed(node: node)
    }
}
