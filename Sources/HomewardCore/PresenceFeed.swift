/// What this relay tells the others about who is connected to it (`PresenceMessage`): the changes not
/// sent yet, numbered into deltas of its epoch, and what its heartbeats said of its walkers' positions.
/// A value with no I/O; the relay sends what it returns.
public struct PresenceFeed: Sendable {
    public let node: String
    /// New at each start, so that the others know the count started again (and nobody from before is here).
    public let epoch: String
    /// The deltas sent in this epoch.
    public private(set) var seq: Int64 = 0
    private var joined: Set<String> = []
    private var left: [String: Int64] = [:]
    /// What the heartbeats said last of each walker's positions: the next says only what changed.
    private var positionsSent: [String: LastPosition] = [:]
    /// Whether a delta of the changes is due (within `PresenceMessage.changeDelay`).
    public var deltaQueued = false

    public init(node: String, epoch: String = RandomID.make("")) {
        self.node = node
        self.epoch = epoch
    }

    /// `username` got their first connection here.
    public mutating func joined(_ username: String) {
        left[username] = nil
        joined.insert(username)
    }

    /// `username`'s last connection here closed at `time`.
    public mutating func left(_ username: String, at time: Int64) {
        joined.remove(username)
        left[username] = time
    }

    /// The changes since the last delta, as the next delta (nil when there are none).
    public mutating func takeDelta() -> PresenceDelta? {
        deltaQueued = false
        guard !joined.isEmpty || !left.isEmpty else { return nil }
        seq += 1
        defer {
            joined.removeAll()
            left.removeAll()
        }
        return PresenceDelta(node: node, epoch: epoch, seq: seq, joined: joined.sorted(), left: left)
    }

    /// The heartbeat, with those of `positions` (the current ones of walkers connected here) that changed
    /// since the previous heartbeat.
    public mutating func heartbeat(positions: [String: LastPosition]) -> PresenceHeartbeat {
        let changed = positions.filter { positionsSent[$0.key] != $0.value }
        positionsSent = positions
        return PresenceHeartbeat(node: node, epoch: epoch, seq: seq, positions: changed)
    }

    /// Everyone connected here as of the last delta: call after sending `takeDelta()`.
    public func snapshot(online: [String], positions: [String: LastPosition]) -> PresenceSnapshot {
        PresenceSnapshot(node: node, epoch: epoch, seq: seq, online: online.sorted(), positions: positions)
    }
}
