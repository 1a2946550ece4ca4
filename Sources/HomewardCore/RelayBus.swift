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
/// - presence digests: who is connected to which relay, and the last positions of walkers, once a second.
public protocol RelayBus: Sendable {
    /// False for a relay that is alone: it then builds no notices and no digests.
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
    func publishPresence(_ digest: PresenceDigest)
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
}

/// What a bus delivers to its relay.
public protocol BusReceiver: AnyObject, Sendable {
    /// A position of `walker` from another relay, for the connections here that receive them (pauses
    /// ignored), less whom `restriction` hides.
    func remotePosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?)
    func remoteChanges(_ notice: ChangeNotice)
    func remotePresence(_ digest: PresenceDigest)
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

    /// One transaction of the committing relay.
    public struct Commit: Sendable, Equatable {
        /// The store's change count the commit took (`RelayStore.applyCounting`); nil when the store counts none.
        public var count: Int64?
        /// Its changes that other relays' caches hold (`StoreChange.isCached`).
        public var changes: [StoreChange]

        public init(count: Int64?, changes: [StoreChange]) {
            self.count = count
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
                commits: [Commit]? = []) {
        self.node = node
        self.events = events
        self.closeViewers = closeViewers
        self.revokedTokens = revokedTokens
        self.commits = commits
    }

    /// Stands for a notice the bus could not read: it tells nothing but that the cache must be reloaded.
    public static let unreadable = ChangeNotice(node: "", commits: nil)
}

/// One relay's connected users: all of them once a second (`full`), and in between, within
/// `PresenceDigest.changeDelay` of a change, only who came and went. A relay not heard from for
/// `PresenceDigest.expiry` counts as gone (its users offline).
public struct PresenceDigest: Sendable, Equatable {
    public var node: String
    /// Every user with a connection to `node` (full), or those who got their first since the last digest.
    public var online: [String]
    public var full = true
    /// Users whose last connection to `node` closed since its previous digest, and when.
    public var lastSeen: [String: Int64]
    /// The last positions of walkers connected to `node` that someone may receive (owners of sessions and
    /// alarms), each with the restriction it was sent under, so that the others show them by the same rule.
    public var positions: [String: LastPosition]

    public init(node: String, online: [String] = [], full: Bool = true, lastSeen: [String: Int64] = [:],
                positions: [String: LastPosition] = [:]) {
        self.node = node
        self.online = online
        self.full = full
        self.lastSeen = lastSeen
        self.positions = positions
    }

    /// How often a relay sends its full digest, in milliseconds.
    public static let interval: Int64 = 1000
    /// How soon after someone comes or goes a relay sends a digest of the change.
    public static let changeDelay: Int64 = 50
    /// After this long without a digest a relay counts as gone.
    public static let expiry: Int64 = 3000
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
    public func publishPresence(_ digest: PresenceDigest) {}
    public func flush() async {}
    public func barrier() async -> Int? { nil }
    public var generation: Int? { nil }
    public func stop() async {}
}
