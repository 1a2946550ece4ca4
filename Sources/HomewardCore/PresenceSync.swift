/// Who is connected to each other relay, followed from their deltas, heartbeats and snapshots
/// (`PresenceMessage`). A value with no I/O: each input returns what the relay must do (users who came
/// online or went offline there, a snapshot to ask for), so unit tests drive it directly.
///
/// The rules, per relay heard of:
/// - a delta numbered one past the last one applied is applied; one at or below it is old news;
/// - a gap (a delta further ahead, or a heartbeat counting more deltas than were applied) or a new epoch
///   (the relay restarted) asks that relay for a snapshot; meanwhile what was known stays as it was, and the
///   deltas that arrive are held, to be applied after the snapshot when they are newer than it. A new epoch
///   whose first delta (or heartbeat at 0) is the first thing heard needs no snapshot: a restarted relay
///   has nobody from before, so its users are replaced by what that delta says;
/// - a snapshot replaces the relay's users, then the held deltas follow; a snapshot that does not come is
///   asked for again each `retryInterval` while the relay is still heard;
/// - a relay not heard from for `PresenceMessage.expiry` is gone: its users count as offline from when its
///   next heartbeat was due (never earlier than it could have died, so a lost-contact grace never runs short).
public struct PresenceSync: Sendable {
    public enum Action: Sendable, Equatable {
        case online(String, node: String)
        case offline(String, node: String, lastSeen: Int64)
        case requestSnapshot(node: String)
        /// `node` missed its heartbeat: it may have died between a commit and the notice telling of it, so what it
        /// committed may reach the store and no relay's connections (`Relay.catchUpAfterSilence`).
        case silent(node: String)
    }

    struct Node {
        var epoch: String
        /// The last delta applied (0: none of this epoch).
        var seq: Int64
        var users: Set<String>
        var heardAt: Int64
        /// The `heardAt` whose silence was reported (`Action.silent`), so each silence is reported once.
        var silenceReported: Int64?
        /// While a snapshot is awaited: when it was asked for, and the deltas that came since.
        var awaiting: Awaiting?
    }

    struct Awaiting {
        var askedAt: Int64
        var held: [PresenceDelta]
    }

    private var nodes: [String: Node] = [:]

    /// Deltas held while a snapshot is awaited; past this the oldest go (the snapshot, or the next one, covers them).
    public static let heldLimit = 256
    /// How long to wait for a snapshot before asking again.
    public static let retryInterval: Int64 = 1000

    public init() {}

    /// The users connected to `node` as far as this relay knows.
    public func users(of node: String) -> Set<String> { nodes[node]?.users ?? [] }

    /// The relays heard of (and not gone).
    public var knownNodes: Set<String> { Set(nodes.keys) }

    /// Whether a snapshot of `node` is awaited.
    public func isAwaitingSnapshot(of node: String) -> Bool { nodes[node]?.awaiting != nil }

    public mutating func receive(_ message: PresenceMessage, now: Int64) -> [Action] {
        switch message {
        case .delta(let delta): receive(delta, now: now)
        case .heartbeat(let heartbeat): receive(heartbeat, now: now)
        case .snapshot(let snapshot): receive(snapshot, now: now)
        }
    }

    /// Relays that missed a heartbeat are reported once per silence; relays silent for longer than the expiry
    /// are gone; snapshots not answered are asked for again.
    public mutating func tick(now: Int64) -> [Action] {
        var actions: [Action] = []
        for (name, node) in nodes.sorted(by: { $0.key < $1.key }) {
            if now - node.heardAt > PresenceMessage.silence, node.silenceReported != node.heardAt {
                nodes[name]?.silenceReported = node.heardAt
                actions.append(.silent(node: name))
            }
            if now - node.heardAt > PresenceMessage.expiry {
                let gone = min(now, node.heardAt + PresenceMessage.interval)
                actions += node.users.sorted().map { .offline($0, node: name, lastSeen: gone) }
                nodes[name] = nil
            } else if let awaiting = node.awaiting, now - awaiting.askedAt >= Self.retryInterval {
                nodes[name]?.awaiting?.askedAt = now
                actions.append(.requestSnapshot(node: name))
            }
        }
        return actions
    }

    private mutating func receive(_ delta: PresenceDelta, now: Int64) -> [Action] {
        guard var node = nodes[delta.node] else {
            nodes[delta.node] = Node(epoch: delta.epoch, seq: 0, users: [], heardAt: now)
            return delta.seq == 1 ? apply(delta, now: now) : awaitSnapshot(of: delta.node, holding: delta, now: now)
        }
        node.heardAt = now
        nodes[delta.node] = node
        if delta.epoch != node.epoch, delta.seq == 1 {
            // Restarted, and this is its first delta: nobody connected before the restart still is, but for
            // those who connected again since.
            return restart(delta.node, epoch: delta.epoch, keeping: Set(delta.joined), now: now) + apply(delta, now: now)
        }
        if node.awaiting != nil || delta.epoch != node.epoch {
            return awaitSnapshot(of: delta.node, holding: delta, now: now)
        }
        if delta.seq <= node.seq { return [] }
        if delta.seq == node.seq + 1 { return apply(delta, now: now) }
        return awaitSnapshot(of: delta.node, holding: delta, now: now)
    }

    private mutating func receive(_ heartbeat: PresenceHeartbeat, now: Int64) -> [Action] {
        guard var node = nodes[heartbeat.node] else {
            nodes[heartbeat.node] = Node(epoch: heartbeat.epoch, seq: 0, users: [], heardAt: now)
            return heartbeat.seq == 0 ? [] : awaitSnapshot(of: heartbeat.node, holding: nil, now: now)
        }
        node.heardAt = now
        nodes[heartbeat.node] = node
        if heartbeat.epoch != node.epoch {
            // Restarted and nobody connected since: nobody from before is connected there.
            if heartbeat.seq == 0 { return restart(heartbeat.node, epoch: heartbeat.epoch, keeping: [], now: now) }
            return awaitSnapshot(of: heartbeat.node, holding: nil, now: now)
        }
        guard heartbeat.seq > node.seq else { return [] }
        // A delta was lost (or is held while a snapshot is awaited).
        return awaitSnapshot(of: heartbeat.node, holding: nil, now: now)
    }

    private mutating func receive(_ snapshot: PresenceSnapshot, now: Int64) -> [Action] {
        let known = nodes[snapshot.node]
        // Older than what was applied since (a second answer to a request asked twice): nothing new.
        if let known, known.awaiting == nil, known.epoch == snapshot.epoch, snapshot.seq <= known.seq { return [] }
        let held = known?.awaiting?.held ?? []
        var node = known ?? Node(epoch: snapshot.epoch, seq: 0, users: [], heardAt: now)
        node.heardAt = now
        let users = Set(snapshot.online)
        var actions = node.users.subtracting(users).sorted().map { Action.offline($0, node: snapshot.node, lastSeen: now) }
        actions += users.subtracting(node.users).sorted().map { Action.online($0, node: snapshot.node) }
        node.users = users
        node.epoch = snapshot.epoch
        node.seq = snapshot.seq
        node.awaiting = nil
        nodes[snapshot.node] = node
        // The deltas that came while waiting and are newer than the snapshot follow it, in order.
        let newer = held.filter { $0.epoch == snapshot.epoch && $0.seq > snapshot.seq }.sorted { $0.seq < $1.seq }
        for (index, delta) in newer.enumerated() {
            guard delta.seq == nodes[snapshot.node]!.seq + 1 else {
                // Still a gap (the delta was dropped from the held ones, or lost): ask again.
                actions += awaitSnapshot(of: snapshot.node, holding: nil, now: now)
                nodes[snapshot.node]!.awaiting?.held = Array(newer[index...])
                return actions
            }
            actions += apply(delta, now: now)
        }
        return actions
    }

    /// Applies `delta`, the next one of its node.
    private mutating func apply(_ delta: PresenceDelta, now: Int64) -> [Action] {
        guard var node = nodes[delta.node] else { return [] }
        var actions: [Action] = []
        for (username, lastSeen) in delta.left.sorted(by: { $0.key < $1.key }) where node.users.remove(username) != nil {
            actions.append(.offline(username, node: delta.node, lastSeen: lastSeen))
        }
        for username in delta.joined where node.users.insert(username).inserted {
            actions.append(.online(username, node: delta.node))
        }
        node.seq = delta.seq
        node.epoch = delta.epoch
        nodes[delta.node] = node
        return actions
    }

    /// A new epoch of `name` that starts from nobody: its users from before are offline since now, but for
    /// those `keeping` (connected again in the new epoch: they never appear to leave).
    private mutating func restart(_ name: String, epoch: String, keeping: Set<String>, now: Int64) -> [Action] {
        guard var node = nodes[name] else { return [] }
        let actions = node.users.subtracting(keeping).sorted().map { Action.offline($0, node: name, lastSeen: now) }
        node.users.formIntersection(keeping)
        node.epoch = epoch
        node.seq = 0
        node.awaiting = nil
        nodes[name] = node
        return actions
    }

    /// Asks `name` for a snapshot unless one is awaited already; keeps `delta` (if any) for after it.
    private mutating func awaitSnapshot(of name: String, holding delta: PresenceDelta?, now: Int64) -> [Action] {
        guard var node = nodes[name] else { return [] }
        let asked = node.awaiting == nil
        if asked { node.awaiting = Awaiting(askedAt: now, held: []) }
        if let delta {
            node.awaiting!.held.append(delta)
            if node.awaiting!.held.count > Self.heldLimit { node.awaiting!.held.removeFirst() }
        }
        nodes[name] = node
        return asked ? [.requestSnapshot(node: name)] : []
    }
}
