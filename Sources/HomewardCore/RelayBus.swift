import HomewardProtocol

/// How a relay hears what the other relays sharing its store do, and tells them what it does.
///
/// The core sees only this protocol: `LocalBus` (one relay, nothing to tell) is the default, and the
/// server wires in the NATS one (`HomewardCluster`) for `--bus nats://...`. What goes over a bus:
/// - positions, each published once (its `pos` event, encoded once), to the relays that asked for
///   that walker because one of their connections receives them (`updateInterest`);
/// - change notices: after a relay committed changes to the store, those changes and the events they
///   cause, so that the others bring their caches up to date (applying the changes, or reloading from the
///   store) and then deliver the events to their connections;
/// - presence (`PresenceMessage`): who came to and left each relay, as numbered deltas, a small heartbeat
///   per relay each second (with the walkers' positions that changed), and a snapshot on request for a
///   relay that missed a delta.
public protocol RelayBus: Sendable {
    /// False for a relay that is alone: it then builds no notices and no presence messages.
    var isShared: Bool { get }
    /// Starts delivering what the other relays send to `receiver`.
    func start(delivering receiver: any BusReceiver) async throws
    /// Sends `message` (a `pos` event) to the relays that receive `walker`'s positions; with `restriction`
    /// (a walker with pauses) it names whom it may reach there, since another relay may not have applied a
    /// pause yet. Called on the walker's event loop: must not block or suspend, and must keep the order of
    /// calls from one thread.
    func publishPosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?)
    /// Walkers whose positions this relay now needs (a local connection receives them) or no longer needs;
    /// returns once the bus has the change (or cannot have it now: it is then made on reconnecting).
    func updateInterest(adding: Set<String>, removing: Set<String>) async
    /// The last position of `walker` from the relay they are connected to, asked on behalf of `askers`
    /// (usernames or viewer keys): that relay says whom of them a pause hides the walker from (nil when
    /// none answers soon).
    func lastPosition(of walker: String, for askers: [String]) async -> LastPositionAnswer?
    func publishChanges(_ notice: ChangeNotice)
    /// Sends a presence delta or heartbeat to every other relay, in the order of the calls (after what
    /// was published before it through `publishChanges` and `updateInterest` too).
    func publishPresence(_ message: PresenceMessage)
    /// Asks relay `node` for its presence snapshot; its answer comes back through `remotePresence` (none
    /// when it does not answer soon: the receiver asks again).
    func requestPresenceSnapshot(of node: String)
    /// Returns once the bus has everything published before (or cannot have it now).
    func flush() async
    /// Returns once the bus answered a round trip begun by this call and every change notice it sent this
    /// relay before that answer has been handed to the receiver (`remoteChanges`). A notice another relay
    /// published and had the bus confirm (`flush`) before this call is then with the receiver. Returns the
    /// connection's `generation`, or nil when that cannot be confirmed (not started, not connected, no
    /// answer soon): the relay then asks the store instead.
    func barrier() async -> Int?
    /// Which connection to the bus is up: 0 the first, one more after each reconnect (the notices sent
    /// meanwhile were lost); nil before `start` subscribed.
    var generation: Int? { get }
    /// Stops delivering and closes the connection to the bus.
    func stop() async
    /// Whether the bus hands the relay every change notice of the cluster (a whole cache needs them all), or only
    /// those of the users and timer shards the relay follows (`follow`): a cache of connected users.
    var readsEveryNotice: Bool { get }
    /// Whether the bus also publishes each change notice on the subjects of the users and timer shards it concerns
    /// (`ChangeNotice.address`, `--change-notices per-user`): only then does the relay work out that address.
    var publishesPerUser: Bool { get }
    /// Subscribes to the change notices about `users` and drops those about `unfollowing`; returns once the bus has
    /// the subscriptions (or cannot have them now: they are made on reconnecting, and the relay reloads then).
    func follow(users: Set<String>, unfollowing: Set<String>) async
    /// Subscribes to the change notices that write deadlines of the users in `taking`'s timer shards, and drops those
    /// of `releasing`, as `follow(users:unfollowing:)` does.
    func followTimerShards(taking: TimerShards, releasing: TimerShards) async
}

extension RelayBus {
    public var readsEveryNotice: Bool { true }
    public var publishesPerUser: Bool { false }
    public func follow(users: Set<String>, unfollowing: Set<String>) async {}
    public func followTimerShards(taking: TimerShards, releasing: TimerShards) async {}
}

/// What a bus delivers to its relay.
public protocol BusReceiver: AnyObject, Sendable {
    /// A position of `walker` from another relay, for the connections here that receive them (pauses
    /// ignored), less whom `restriction` hides.
    func remotePosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?)
    func remoteChanges(_ notice: ChangeNotice)
    /// Relay `node`'s notices may have been missed until now: it publishes them where this relay did not listen (on
    /// `hw.changes` alone, to a relay hearing only the users it follows), and the bus now takes them there. Read back
    /// what it may have committed meanwhile.
    func missedNotices(of node: String)
    func remotePresence(_ message: PresenceMessage)
    /// Answers another relay's `requestPresenceSnapshot(of:)`: everyone connected here, as of the last delta sent.
    func localPresenceSnapshot() async -> PresenceSnapshot
    /// Answers another relay's `lastPosition(of:for:)`: nil when `walker` is not connected here (another
    /// relay answers), else their last position here and whom of `askers` a pause of theirs hides them from.
    func localLastPosition(of walker: String, for askers: [String]) -> LastPositionAnswer?
    /// The connection to the bus was lost: messages sent meanwhile will be missed.
    func busDisconnected()
    /// The connection to the bus is back: refresh from the store what was missed.
    func busReconnected()
}

/// Another relay committed changes to the store: apply them (or reload from it), then deliver these events.
public struct ChangeNotice: Sendable, Equatable {
    public var node: String
    /// Each event with its recipients, in the order the committing relay sent them.
    public var events: [Event]
    /// Viewer keys of share links that ended: their viewers are closed after the events.
    public var closeViewers: [String]
    /// Hashes of tokens revoked (logout, `auth.revoke`): connections signed in with them are closed.
    public var revokedTokens: [String]
    /// The commits behind the notice, in the order the relay made them, for the others to apply to their
    /// caches instead of reloading (see `Relay+Deltas`). Nil when they cannot be known (a relay of another
    /// version sent it, it could not be read, or they were too large to send): the receiver then reloads.
    public var commits: [Commit]?
    /// Where the notice goes besides the subject every whole cache reads (the sender's business only: not sent).
    /// Empty unless the bus publishes per user (`Relay.addressesNotices`).
    public var address: NoticeAddress

    /// One transaction of the committing relay.
    public struct Commit: Sendable, Equatable {
        /// The write versions the commit gave the users it concerns (`RelayStore.applyChecked`): each one more
        /// than the version before it, so a cache applies it once it holds every earlier write about those
        /// users. Nil when the store keeps no versions; empty when the commit concerns no user's data (then
        /// nothing orders it).
        public var versions: UserVersions?
        /// Its changes that other relays' caches hold (`StoreChange.isCached`).
        public var changes: [StoreChange]

        public init(versions: UserVersions?, changes: [StoreChange]) {
            self.versions = versions
            self.changes = changes
        }
    }

    public struct Event: Sendable, Equatable {
        public var recipients: [String]
        public var message: JSONValue

        public init(recipients: [String], message: JSONValue) {
            self.recipients = recipients
            self.message = message
        }
    }

    public init(node: String, events: [Event] = [], closeViewers: [String] = [], revokedTokens: [String] = [],
                commits: [Commit]? = [], address: NoticeAddress = NoticeAddress()) {
        self.node = node
        self.address = address
        self.events = events
        self.closeViewers = closeViewers
        self.revokedTokens = revokedTokens
        self.commits = commits
    }

    /// Stands for a notice the bus could not read: it tells nothing but that the cache must be reloaded.
    public static let unreadable = ChangeNotice(node: "", commits: nil)
}

/// Whom a change notice concerns, for the bus to publish it where the relays that need it listen: the users whose
/// part of a cache it changes or who hear its events (`RelayState.noticeUsers`), and the owners of what it writes
/// that has a deadline (`RelayState.timerOwners`: the relay holding their timer shard must hear of it).
public struct NoticeAddress: Sendable, Equatable {
    public var users: Set<String>
    public var timerOwners: Set<String>

    public init(users: Set<String> = [], timerOwners: Set<String> = []) {
        self.users = users
        self.timerOwners = timerOwners
    }

    public mutating func formUnion(_ other: NoticeAddress) {
        users.formUnion(other.users)
        timerOwners.formUnion(other.timerOwners)
    }
}

/// The bus of a relay that is alone: nothing to send, nothing to hear.
public struct LocalBus: RelayBus {
    public init() {}
    public var isShared: Bool { false }
    public func start(delivering receiver: any BusReceiver) async throws {}
    public func publishPosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?) {}
    public func updateInterest(adding: Set<String>, removing: Set<String>) async {}
    public func lastPosition(of walker: String, for askers: [String]) async -> LastPositionAnswer? { nil }
    public func publishChanges(_ notice: ChangeNotice) {}
    public func publishPresence(_ message: PresenceMessage) {}
    public func requestPresenceSnapshot(of node: String) {}
    public func flush() async {}
    public func barrier() async -> Int? { nil }
    public var generation: Int? { nil }
    public func stop() async {}
}
