/// The timers (check-in deadlines, alarm repeats, lost contact, session and link expiry, pause ends,
/// meeting expiry) split into a fixed number of shards by the user whose entity they belong to, so that
/// relays sharing one store can each fire a part of them.
///
/// Every deadline has exactly one such user: a session's (and its links') owner, an alarm's owner, a
/// pause's owner, a meeting's proposer (`RelayState.nextDeadline(in:)`, `fireDue(now:presence:shards:)`).
/// A shard is a number in `0..<count`, fixed for a user: `shard(of:)` is a stable hash (FNV-1a of the
/// UTF-8 bytes), the same in every relay process and every version, unlike Swift's seeded `hashValue`.
public struct TimerShards: Sendable, Hashable, CustomStringConvertible {
    /// How many shards there are. Changing it moves users between shards, so every relay of a cluster must
    /// agree on it: it is a constant, not a setting.
    public static let count = 32

    /// Which of the shards; bit `n` is shard `n`.
    public private(set) var bits: UInt32

    public static let all = TimerShards(bits: .max)
    public static let none = TimerShards(bits: 0)

    public init(bits: UInt32) {
        self.bits = bits
    }

    public init(_ shards: some Sequence<Int>) {
        bits = 0
        for shard in shards { insert(shard) }
    }

    /// The shard of `user`'s timers.
    public static func shard(of user: String) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in user.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return Int(hash % UInt64(count))
    }

    /// Whether the timers of `user` are in these shards.
    public func owns(_ user: String) -> Bool {
        contains(Self.shard(of: user))
    }

    public func contains(_ shard: Int) -> Bool {
        (0..<Self.count).contains(shard) && bits & (1 << UInt32(shard)) != 0
    }

    public mutating func insert(_ shard: Int) {
        precondition((0..<Self.count).contains(shard), "shard \(shard) out of 0..<\(Self.count)")
        bits |= 1 << UInt32(shard)
    }

    public mutating func remove(_ shard: Int) {
        guard contains(shard) else { return }
        bits &= ~(1 << UInt32(shard))
    }

    public var isEmpty: Bool { bits == 0 }
    public var size: Int { bits.nonzeroBitCount }
    public var members: [Int] { (0..<Self.count).filter(contains) }

    public func union(_ other: TimerShards) -> TimerShards { TimerShards(bits: bits | other.bits) }
    public func subtracting(_ other: TimerShards) -> TimerShards { TimerShards(bits: bits & ~other.bits) }

    /// "all", "none", or the shard numbers ("0-3,7"), for logs.
    public var description: String {
        if self == .all { return "all" }
        if isEmpty { return "none" }
        var runs: [String] = []
        var start: Int?
        for shard in 0...Self.count {
            if shard < Self.count, contains(shard) {
                if start == nil { start = shard }
            } else if let first = start {
                runs.append(first == shard - 1 ? "\(first)" : "\(first)-\(shard - 1)")
                start = nil
            }
        }
        return runs.joined(separator: ",")
    }
}
