import HomewardProtocol
import Synchronization

/// Who is online, when they were last seen, where they last were, and who receives whose positions.
///
/// Guarded by a mutex rather than owned by the relay's queue because the position fan-out reads
/// it from every network thread and must not wait behind storage writes.
public final class PresenceTable: PresenceView, Sendable {
    struct Entry {
        var sinks: [ObjectIdentifier: any ClientSink] = [:]
        var lastSeen: Int64?
        var lastPosition: Position?
        /// Users who receive this user's positions.
        var audience: Set<String> = []
        /// The destination of the user's active session, tested against each of their positions.
        var destination: (sessionId: String, destination: Destination)?
    }

    /// Where a position must go, and whether it completed its sender's walk.
    public struct Fanout {
        public var sinks: [any ClientSink] = []
        /// The session whose destination the position fell inside.
        public var arrived: String?
    }

    private let entries = Mutex<[String: Entry]>([:])
    /// Users with at least one connection, kept by `attach` and `detach` (under the `entries` lock)
    /// so that reading it, on every sign-in and sign-out, does not walk every entry.
    private let online = Atomic<Int>(0)

    public init() {}

    /// Adds a connection; returns true when it is the user's first.
    public func attach(_ username: String, _ sink: any ClientSink, now: Int64) -> Bool {
        entries.withLock { entries in
            let first = entries[username]?.sinks.isEmpty ?? true
            entries[username, default: Entry()].sinks[ObjectIdentifier(sink)] = sink
            entries[username]!.lastSeen = now
            if first { online.add(1, ordering: .relaxed) }
            return first
        }
    }

    /// Removes a connection; returns true when it was the user's last.
    public func detach(_ username: String, _ sink: any ClientSink, now: Int64) -> Bool {
        entries.withLock { entries in
            guard entries[username]?.sinks.removeValue(forKey: ObjectIdentifier(sink)) != nil else { return false }
            entries[username]!.lastSeen = now
            let last = entries[username]!.sinks.isEmpty
            if last { online.subtract(1, ordering: .relaxed) }
            return last
        }
    }

    public func sinks(of username: String) -> [any ClientSink] {
        entries.withLock { Array(($0[username]?.sinks ?? [:]).values) }
    }

    public func connectionCount(of username: String) -> Int {
        entries.withLock { $0[username]?.sinks.count ?? 0 }
    }

    public var onlineUserCount: Int {
        online.load(ordering: .relaxed)
    }

    public func setAudience(of username: String, to audience: Set<String>) {
        entries.withLock { $0[username, default: Entry()].audience = audience }
    }

    public func setDestination(of username: String, to destination: (sessionId: String, destination: Destination)?) {
        entries.withLock { $0[username, default: Entry()].destination = destination }
    }

    public func seedLastSeen(_ lastSeen: [String: Int64]) {
        entries.withLock { entries in
            for (username, time) in lastSeen { entries[username, default: Entry()].lastSeen = time }
        }
    }

    /// Stores `position` as the sender's last and returns every connection that must receive it.
    public func record(_ position: Position, from username: String, now: Int64) -> [any ClientSink] {
        fanout(position, from: username, now: now).sinks
    }

    /// Stores `position` as the sender's last; says who must receive it and whether it ends a walk.
    public func fanout(_ position: Position, from username: String, now: Int64) -> Fanout {
        entries.withLock { entries in
            guard var entry = entries[username] else { return Fanout() }
            entry.lastPosition = position
            entry.lastSeen = now
            entries[username] = entry
            var fanout = Fanout()
            for member in entry.audience {
                if let memberSinks = entries[member]?.sinks { fanout.sinks.append(contentsOf: memberSinks.values) }
            }
            if let target = entry.destination, target.destination.contains(lat: position.lat, lon: position.lon) {
                fanout.arrived = target.sessionId
            }
            return fanout
        }
    }

    public func isOnline(_ username: String) -> Bool {
        entries.withLock { !($0[username]?.sinks.isEmpty ?? true) }
    }

    public func lastSeen(_ username: String) -> Int64? {
        entries.withLock { $0[username]?.lastSeen }
    }

    public func lastPosition(_ username: String) -> Position? {
        entries.withLock { $0[username]?.lastPosition }
    }
}
