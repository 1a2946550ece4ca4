import HomewardProtocol
import Synchronization

/// Who is online, when they were last seen, where they last were, and who receives whose positions.
///
/// Read by the position fan-out on every network thread, so it is not owned by the relay's queue
/// (a position must not wait behind a storage write). It is split into shards by username, each
/// behind its own mutex, and each user's entry carries the connections of everyone who receives
/// their positions (`audienceSinks`). A position therefore takes exactly one lock, its sender's
/// shard's, and walkers on different event loops rarely meet on the same one.
///
/// On a shared bus each entry also carries `reach`, its audience with pauses ignored, and its connections:
/// what this relay subscribes to and delivers positions from other relays to. The walker's relay is the
/// one that knows their pauses when a position leaves it, so it restricts that position
/// (`PositionRestriction`) and this relay applies the restriction: a pause that just ended elsewhere
/// loses no position here while this relay's cache still has it.
///
/// Writers: `attach`, `detach`, `setAudience`, `setDestination` and `seedLastSeen` keep
/// `audienceSinks` in step across shards, one shard at a time, and must not run concurrently with
/// each other. The relay calls them only from its actor, which serialises them; the fan-out only
/// reads `audienceSinks` and writes the sender's last position and time.
public final class PresenceTable: PresenceView, Sendable {
    /// Kept for every user the relay has heard of (every owner and observer of every active session from the
    /// start, every resident and each of their friends for their last-seen time), in shard dictionaries whose
    /// buckets hold it inline: every byte here is paid per bucket, about twice per entry at the dictionaries'
    /// load. So what most entries leave unset is out of line (`OutOfLine`, 8 bytes), and the two small fields
    /// sit together (`lastSeen`'s tag and `owner` share a word).
    struct Entry {
        var sinks: [ObjectIdentifier: any ClientSink] = [:]
        /// Other relays this user is connected to (from their presence deltas and snapshots).
        var remoteNodes: Set<String> = []
        var lastSeen: Int64?
        /// Whether this user owns an active session, alarm or standing share and has not paused for
        /// everyone (`RelayState.mayBeReceived`): on a shared bus their positions are published even
        /// before anyone accepted, since another relay may already have an observer whose accept this
        /// relay has not heard of yet.
        var owner = false
        /// The last position with the restriction it was sent under (`LastPosition`).
        var last = LastPosition()
        /// The last position of this user (connected to another relay) that this relay delivered and that no
        /// pause restricted, as that relay encoded it: read (`lastPosition`) only when someone asks, such as
        /// `session.lost` when that relay dies, so the hot path only keeps a reference.
        var deliveredRemotely: EncodedMessage? {
            get { deliveredRemotelyStorage.value }
            set { deliveredRemotelyStorage.value = newValue }
        }
        private var deliveredRemotelyStorage = OutOfLine<EncodedMessage>()
        /// Users who receive this user's positions (pauses applied).
        var audience: Set<String> = []
        /// `audience` with pauses ignored (a superset of it): whom positions of this user from another
        /// relay may reach here, as that relay's `PositionRestriction` allows.
        var reach: Set<String> = []
        /// For a user with pauses, whom their positions may reach on other relays (which may not have
        /// applied a pause yet); also whom this relay's answer to `hw.last` hides their position from, and
        /// the restriction each position they send is recorded under (`last`).
        var restriction: PositionRestriction? {
            get { restrictionStorage.value }
            set { restrictionStorage.value = newValue }
        }
        private var restrictionStorage = OutOfLine<PositionRestriction>()
        /// The connections of `audience`, what a position of this user is sent to.
        var audienceSinks: [any ClientSink] = []
        /// The connections of `reach`, and (at the same index) whose each is: what a position of this user
        /// from another relay is sent to, less those its restriction hides.
        var reachSinks: [any ClientSink] = []
        var reachNames: [String] = []
        /// Users whose reach includes this user: their sinks change with this user's connections.
        var receivesFrom: Set<String> = []
        /// The destination of the user's active session, tested against each of their positions (out of line,
        /// as the trail: most entries are of users who are not walking).
        var destination = OutOfLine<(sessionId: String, destination: Destination)>()
        /// The path of the user's active session, recorded with each of their positions (`SessionTrail`).
        var trail = OutOfLine<SessionTrail>()
    }

    /// Where a position must go, and whether it completed its sender's walk.
    public struct Fanout {
        public var sinks: [any ClientSink] = []
        /// The session whose destination the position fell inside.
        public var arrived: String?
        /// Whether anyone (here or on another relay) may receive the sender's positions.
        public var hasAudience = false
        /// For a sender with pauses: whom the position may reach on other relays.
        public var restriction: PositionRestriction?
    }

    final class Shard: Sendable {
        let entries = Mutex<[String: Entry]>([:])
    }

    private let shards: [Shard]
    /// Users with at least one connection, kept by `attach` and `detach` so that reading it, on every
    /// sign-in and sign-out, does not walk every entry.
    private let online = Atomic<Int>(0)
    /// Senders whose positions some local connection started or stopped receiving since the relay last
    /// asked (`takeInterestChanges`): what the relay subscribes to on a shared bus.
    private let interest = Mutex<(added: Set<String>, removed: Set<String>)>(([], []))

    public init(shardCount: Int = 16) {
        shards = (0..<max(1, shardCount)).map { _ in Shard() }
    }

    private func shard(of username: String) -> Shard {
        shards[Int(UInt(bitPattern: username.hashValue) % UInt(shards.count))]
    }

    private func withEntry<T>(_ username: String, _ body: (inout Entry) -> T) -> T {
        shard(of: username).entries.withLock { body(&$0[username, default: Entry()]) }
    }

    private func read<T>(_ username: String, _ body: (Entry?) -> T) -> T {
        shard(of: username).entries.withLock { body($0[username]) }
    }

    // MARK: Writers (one at a time: the relay's actor)

    /// Adds a connection; returns true when it is the user's first.
    public func attach(_ username: String, _ sink: any ClientSink, now: Int64) -> Bool {
        let first = add(sink, to: username, now: now)
        if first { online.add(1, ordering: .relaxed) }
        return first
    }

    /// Removes a connection; returns true when it was the user's last.
    public func detach(_ username: String, _ sink: any ClientSink, now: Int64) -> Bool {
        let last = remove(sink, from: username, now: now)
        if last { online.subtract(1, ordering: .relaxed) }
        return last
    }

    /// Adds a share-link viewer's connection under its link's viewer key (`ShareLink.viewerKey`): the
    /// owner's audience names that key, so positions reach the viewer by the same fan-out as observers.
    /// Viewers are not users: they do not count as online and have no last-seen time.
    public func attachViewer(_ viewerKey: String, _ sink: any ClientSink) {
        _ = add(sink, to: viewerKey, now: nil)
    }

    public func detachViewer(_ viewerKey: String, _ sink: any ClientSink) {
        _ = remove(sink, from: viewerKey, now: nil)
    }

    /// Adds `sink` to `name`'s connections and to the audience lists that name `name`; true when it is the first.
    private func add(_ sink: any ClientSink, to name: String, now: Int64?) -> Bool {
        let (first, senders) = withEntry(name) { entry in
            let first = entry.sinks.isEmpty
            entry.sinks[ObjectIdentifier(sink)] = sink
            if let now { entry.lastSeen = now }
            return (first, entry.receivesFrom)
        }
        for sender in senders { refreshAudienceSinks(of: sender) }
        return first
    }

    /// Removes `sink` from `name`'s connections; true when it was the last.
    private func remove(_ sink: any ClientSink, from name: String, now: Int64?) -> Bool {
        let (removed, last, senders) = withEntry(name) { entry in
            guard entry.sinks.removeValue(forKey: ObjectIdentifier(sink)) != nil else { return (false, false, Set<String>()) }
            if let now { entry.lastSeen = now }
            return (true, entry.sinks.isEmpty, entry.receivesFrom)
        }
        guard removed else { return false }
        for sender in senders { refreshAudienceSinks(of: sender) }
        return last
    }

    /// Sets who receives `username`'s positions: `audience` here (pauses applied), and `reach` (pauses
    /// ignored; `audience` when nil) from other relays. `reach` always includes `audience`.
    public func setAudience(of username: String, to audience: Set<String>, reach: Set<String>? = nil) {
        let reach = reach.map { $0.union(audience) } ?? audience
        let previous = withEntry(username) { entry in
            let previous = (entry.audience, entry.reach)
            entry.audience = audience
            entry.reach = reach
            return previous
        }
        guard previous != (audience, reach) else { return }
        for member in previous.1.subtracting(reach) { withEntry(member) { _ = $0.receivesFrom.remove(username) } }
        for member in reach.subtracting(previous.1) { withEntry(member) { _ = $0.receivesFrom.insert(username) } }
        refreshAudienceSinks(of: username)
    }

    public func setOwner(_ username: String, _ owner: Bool, restriction: PositionRestriction? = nil) {
        withEntry(username) { entry in
            entry.owner = owner
            entry.restriction = restriction
        }
    }

    public func setDestination(of username: String, to destination: (sessionId: String, destination: Destination)?) {
        withEntry(username) { $0.destination.value = destination }
    }

    /// Starts recording the trail of `username`'s active session `sessionId` (from `now`; kept when it is
    /// the session already recorded), or drops it when they have none.
    public func setTrail(of username: String, sessionId: String?, now: Int64, limits: TrailLimits = TrailLimits()) {
        withEntry(username) { entry in
            guard entry.trail.value?.sessionId != sessionId else { return }
            entry.trail.value = sessionId.map { SessionTrail(sessionId: $0, since: now, limits: limits) }
        }
    }

    public func seedLastSeen(_ lastSeen: [String: Int64]) {
        for (username, time) in lastSeen { withEntry(username) { $0.lastSeen = time } }
    }

    /// Forgets the entries of `users` that hold nothing but a last-seen time: users a cache of connected users
    /// evicted, whose time is stored and comes back with their slice (`seedLastSeen`). An entry that holds anything
    /// else (a connection here or elsewhere, a last position, an audience, a trail) stays whole.
    public func forgetIdle(_ users: some Sequence<String>) {
        for username in users {
            shard(of: username).entries.withLock { entries in
                if entries[username]?.holdsOnlyLastSeen == true { entries[username] = nil }
            }
        }
    }

    /// Recomputes who `sender`'s positions go to, one member's shard at a time. Whether this relay needs
    /// them from the others (its interest) follows `reach`: a pause does not unsubscribe.
    private func refreshAudienceSinks(of sender: String) {
        let (audience, reach) = read(sender) { ($0?.audience ?? [], $0?.reach ?? []) }
        var sinks: [any ClientSink] = []
        var reachSinks: [any ClientSink] = []
        var reachNames: [String] = []
        for member in reach {
            let memberSinks = read(member) { Array($0?.sinks.values ?? [:].values) }
            if audience.contains(member) { sinks += memberSinks }
            reachSinks += memberSinks
            reachNames += repeatElement(member, count: memberSinks.count)
        }
        let hadReach = withEntry(sender) { entry in
            defer { (entry.audienceSinks, entry.reachSinks, entry.reachNames) = (sinks, reachSinks, reachNames) }
            return !entry.reachSinks.isEmpty
        }
        guard hadReach == reachSinks.isEmpty else { return }
        interest.withLock { interest in
            if reachSinks.isEmpty {
                if interest.added.remove(sender) == nil { interest.removed.insert(sender) }
            } else {
                if interest.removed.remove(sender) == nil { interest.added.insert(sender) }
            }
        }
    }

    /// The senders some local connection started (`added`) or stopped (`removed`) receiving since the last call.
    public func takeInterestChanges() -> (added: Set<String>, removed: Set<String>) {
        interest.withLock { interest in
            defer { interest = ([], []) }
            return interest
        }
    }

    // MARK: Other relays (writers: the relay's actor)

    /// Records whether `username` is connected to relay `node`; returns true when that changed whether
    /// they are online anywhere (here or on any relay).
    public func setRemote(_ username: String, node: String, connected: Bool, now: Int64, lastSeen: Int64? = nil) -> Bool {
        withEntry(username) { entry in
            let wasOnline = !entry.sinks.isEmpty || !entry.remoteNodes.isEmpty
            if connected {
                entry.remoteNodes.insert(node)
                if entry.sinks.isEmpty { entry.lastSeen = now }
            } else {
                guard entry.remoteNodes.remove(node) != nil else { return false }
                if entry.sinks.isEmpty, entry.remoteNodes.isEmpty { entry.lastSeen = lastSeen ?? now }
            }
            return wasOnline != (!entry.sinks.isEmpty || !entry.remoteNodes.isEmpty)
        }
    }

    /// A walker's last positions as another relay holds them (with their restrictions); kept unless the
    /// walker is connected here.
    public func setRemotePosition(_ last: LastPosition, of username: String) {
        withEntry(username) { entry in
            if entry.sinks.isEmpty { entry.last = last }
        }
    }

    /// A walker's trail as their relay records it (`hw.last`); kept unless the walker is connected here.
    public func setRemoteTrail(_ trail: SessionTrail, of username: String) {
        withEntry(username) { entry in
            if entry.sinks.isEmpty { entry.trail.value = trail }
        }
    }

    /// Users with a connection to this relay.
    public func localUsers() -> [String] {
        shards.flatMap { shard in shard.entries.withLock { $0.filter { !$0.value.sinks.isEmpty }.map(\.key) } }
    }

    /// Whether `username` is connected to another relay.
    public func isOnlineElsewhere(_ username: String) -> Bool {
        read(username) { !($0?.remoteNodes.isEmpty ?? true) }
    }

    /// A position from another relay: the connections here that receive `username`'s positions, pauses
    /// ignored, less whom `restriction` (the sender's relay's) hides. One lock, the sender's shard, as for
    /// a local position.
    public func remoteAudience(of username: String, restriction: PositionRestriction? = nil) -> [any ClientSink] {
        read(username) { entry in
            guard let entry else { return [] }
            return Self.remoteSinks(entry, restriction: restriction)
        }
    }

    /// `remoteAudience`, and keeps `message` as `username`'s last position when no pause restricts it (one
    /// hidden from anyone is never kept: it could not be shown to everyone watching). Still one lock.
    public func deliverRemote(_ message: EncodedMessage, of username: String,
                              restriction: PositionRestriction?) -> [any ClientSink] {
        shard(of: username).entries.withLock { entries in
            // One hash of the name for the whole delivery: every position heard from another relay passes here.
            guard let index = entries.index(forKey: username) else { return [] }
            if entries.values[index].sinks.isEmpty { entries.values[index].deliveredRemotely = restriction == nil ? message : nil }
            return Self.remoteSinks(entries.values[index], restriction: restriction)
        }
    }

    private static func remoteSinks(_ entry: Entry, restriction: PositionRestriction?) -> [any ClientSink] {
        guard let restriction else { return entry.reachSinks }
        return zip(entry.reachNames, entry.reachSinks).filter { !restriction.hides($0.0) }.map(\.1)
    }

    /// Answers another relay asking for `username`'s last position on behalf of `askers`: nil when they are
    /// not connected here, else their last positions (with the restrictions each was sent under) unless their
    /// pauses hide them from every asker, and whom they hide them from. One lock; the pauses are as the
    /// relay last set them (`setOwner`).
    public func lastPositionAnswer(of username: String, for askers: [String]) -> LastPositionAnswer? {
        read(username) { entry in
            guard let entry, !entry.sinks.isEmpty else { return nil }
            return LastPositionAnswer(last: entry.last, trail: entry.trail.value, restriction: entry.restriction, askers: askers)
        }
    }

    // MARK: The fan-out

    /// Stores `position` as the sender's last, with the restriction it goes out under (so that whom a pause
    /// hides it from is never shown it later); says who must receive it and whether it ends a walk.
    /// One lock: the sender's shard.
    public func fanout(_ position: Position, from username: String, now: Int64) -> Fanout {
        shard(of: username).entries.withLock { entries in
            guard entries[username] != nil else { return Fanout() }
            return Self.store(position, now: now, in: &entries[username]!)
        }
    }

    private static func store(_ position: Position, now: Int64, in entry: inout Entry) -> Fanout {
        let restriction = entry.restriction
        entry.last.record(position, restriction: restriction)
        entry.trail.value?.record(position, restriction: restriction, now: now)
        entry.lastSeen = now
        var fanout = Fanout(sinks: entry.audienceSinks, hasAudience: entry.owner || !entry.audience.isEmpty)
        fanout.restriction = restriction
        if let target = entry.destination.value, target.destination.contains(lat: position.lat, lon: position.lon) {
            fanout.arrived = target.sessionId
        }
        return fanout
    }

    // MARK: Readers

    public func sinks(of username: String) -> [any ClientSink] {
        read(username) { Array($0?.sinks.values ?? [:].values) }
    }

    public func connectionCount(of username: String) -> Int {
        read(username) { $0?.sinks.count ?? 0 }
    }

    public var onlineUserCount: Int {
        online.load(ordering: .relaxed)
    }

    /// Connected to this relay or another one.
    public func isOnline(_ username: String) -> Bool {
        read(username) { entry in
            guard let entry else { return false }
            return !entry.sinks.isEmpty || !entry.remoteNodes.isEmpty
        }
    }

    public func lastSeen(_ username: String) -> Int64? {
        read(username) { $0?.lastSeen }
    }

    /// The newest of the user's position here, the one their relay's digest or answer gave, and the last one
    /// delivered here from their relay.
    public func lastPosition(_ username: String) -> Position? {
        let (last, delivered) = read(username) { ($0?.last.latest, $0?.deliveredRemotely) }
        return Self.newer(last, Self.position(in: delivered))
    }

    /// The newest position none of `askers` was hidden from: by the `LastPosition` rule, or the last one this
    /// relay delivered from another relay with no pause restricting it, whichever is newer.
    public func lastPosition(of username: String, shownTo askers: [String]) -> Position? {
        let (shown, delivered) = read(username) { ($0?.last.shown(to: askers), $0?.deliveredRemotely) }
        return Self.newer(shown, Self.position(in: delivered))
    }

    /// The trail of `username`'s active session as `askers` may see it (each point hidden from any of them
    /// when it was sent left out); nil when this relay records none.
    public func trail(of username: String, shownTo askers: [String], now: Int64) -> TrailInfo? {
        read(username) { entry in
            entry?.trail.value.map { TrailInfo(sessionId: $0.sessionId, since: $0.since, points: $0.points(shownTo: askers, now: now)) }
        }
    }

    /// The trail itself with each point's restriction, for another relay to show by the same rule.
    public func trailRecord(of username: String) -> SessionTrail? {
        read(username) { $0?.trail.value }
    }

    /// The record itself, for the presence digest (other relays show it by the same rule).
    public func lastPositions(_ username: String) -> LastPosition {
        read(username) { $0?.last ?? LastPosition() }
    }

    /// A position event another relay encoded, read back (only when someone asks for it).
    private static func position(in message: EncodedMessage?) -> Position? {
        guard let message, let event = try? JSONParser.parse(message.bytes.readableBytesView) else { return nil }
        return try? Position(from: event, now: 0)
    }

    private static func newer(_ a: Position?, _ b: Position?) -> Position? {
        guard let a else { return b }
        guard let b else { return a }
        return b.ts > a.ts ? b : a
    }
}

extension PresenceTable.Entry {
    /// Nothing but a last-seen time (`PresenceTable.forgetIdle`).
    var holdsOnlyLastSeen: Bool {
        sinks.isEmpty && remoteNodes.isEmpty && last.isEmpty && deliveredRemotely == nil && audience.isEmpty && reach.isEmpty
            && !owner && restriction == nil && audienceSinks.isEmpty && reachSinks.isEmpty && receivesFrom.isEmpty
            && destination.value == nil && trail.value == nil
    }
}
