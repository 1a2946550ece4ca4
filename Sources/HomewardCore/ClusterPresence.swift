/// What relays tell each other about who is connected to them (see `PresenceSync` for how the others
/// follow it, `PresenceFeed` for how a relay numbers what it tells).
///
/// Each relay numbers its changes: an `epoch`, new at each start, and a sequence number counting the
/// deltas of that epoch from 1. A delta says who joined and who left (with when) since the previous one;
/// a heartbeat each second says only that the relay is alive and how far it has counted; a snapshot,
/// sent only when another relay asks for it, lists everyone. So the cost of presence follows how often
/// people come and go, not how many are connected.
public enum PresenceMessage: Sendable, Equatable {
    case delta(PresenceDelta)
    case heartbeat(PresenceHeartbeat)
    case snapshot(PresenceSnapshot)

    public var node: String {
        switch self {
        case .delta(let delta): delta.node
        case .heartbeat(let heartbeat): heartbeat.node
        case .snapshot(let snapshot): snapshot.node
        }
    }

    /// How often a relay sends its heartbeat, in milliseconds.
    public static let interval: Int64 = 1000
    /// How soon after someone comes or goes a relay sends the delta of the change.
    public static let changeDelay: Int64 = 50
    /// After this long without hearing from a relay it counts as gone (its users offline).
    public static let expiry: Int64 = 3000
    /// After this long without hearing from a relay (a heartbeat missed), the others read the store for what it
    /// may have committed and not told (`PresenceSync.Action.silent`).
    public static let silence: Int64 = 1200
    /// How often a relay looks for relays that fell silent, between its heartbeats.
    public static let checkInterval: Int64 = 250
}

/// Who got their first connection to `node`, and whose last connection there closed (and when), since its
/// previous delta; the `seq`-th of its `epoch`.
public struct PresenceDelta: Sendable, Equatable {
    public var node: String
    public var epoch: String
    public var seq: Int64
    public var joined: [String]
    public var left: [String: Int64]

    public init(node: String, epoch: String, seq: Int64, joined: [String] = [], left: [String: Int64] = [:]) {
        self.node = node
        self.epoch = epoch
        self.seq = seq
        self.joined = joined
        self.left = left
    }
}

/// `node` is alive and has sent `seq` deltas in `epoch`. With the last positions of its connected walkers
/// that someone may receive (owners of sessions and alarms), only those that changed since its previous
/// heartbeat, each with the restriction it was sent under, so that the others show them by the same rule.
public struct PresenceHeartbeat: Sendable, Equatable {
    public var node: String
    public var epoch: String
    public var seq: Int64
    public var positions: [String: LastPosition]
    /// Whether the sending relay publishes its change notices per user (`--change-notices per-user`), which must be the
    /// same on every relay: set by its bus as it sends (a relay of the version before says nothing, as `all` does).
    public var noticesPerUser: Bool

    public init(node: String, epoch: String, seq: Int64, positions: [String: LastPosition] = [:], noticesPerUser: Bool = false) {
        self.node = node
        self.epoch = epoch
        self.seq = seq
        self.positions = positions
        self.noticesPerUser = noticesPerUser
    }
}

/// Everyone connected to `node` as of its `seq`-th delta of `epoch`, and the last positions of all its
/// connected walkers that someone may receive: the answer to another relay that missed a delta.
public struct PresenceSnapshot: Sendable, Equatable {
    public var node: String
    public var epoch: String
    public var seq: Int64
    public var online: [String]
    public var positions: [String: LastPosition]

    public init(node: String, epoch: String, seq: Int64, online: [String] = [], positions: [String: LastPosition] = [:]) {
        self.node = node
        self.epoch = epoch
        self.seq = seq
        self.online = online
        self.positions = positions
    }
}
