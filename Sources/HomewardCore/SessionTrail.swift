import Foundation
import HomewardProtocol

/// How much of a walk the relay keeps in memory: the path a late observer, a share-link viewer or an
/// alarm recipient is shown behind the walker's live position.
public struct TrailLimits: Sendable, Equatable {
    /// Points older than this (by arrival at the relay) are dropped.
    public var maxAgeMillis: Int64
    /// At most this many points per walk; the oldest goes first.
    public var maxPoints: Int
    /// A position closer than this to the last point kept is not kept (GPS jitter, standing still).
    public var minDistanceMetres: Double

    public init(maxAgeMillis: Int64 = 60 * 60 * 1000, maxPoints: Int = 1000, minDistanceMetres: Double = 10) {
        precondition(maxPoints > 0 && maxAgeMillis > 0 && minDistanceMetres >= 0)
        self.maxAgeMillis = maxAgeMillis
        self.maxPoints = maxPoints
        self.minDistanceMetres = minDistanceMetres
    }
}

/// One point of a trail, with the pause restriction its position was sent under (nil: hidden from nobody),
/// so that whom a pause hid it from is never shown it, not even after the pause ended.
public struct TrailPoint: Sendable, Equatable {
    public var position: Position
    public var restriction: PositionRestriction?
    /// When the relay received it: what the age limit counts from (a client's `ts` may be anything).
    public var receivedAt: Int64

    public init(position: Position, restriction: PositionRestriction?, receivedAt: Int64) {
        self.position = position
        self.restriction = restriction
        self.receivedAt = receivedAt
    }
}

/// The bounded, in-memory path of one active session, recorded by the fan-out under the walker's presence
/// shard lock (no lock of its own): a ring of at most `maxPoints`, so recording is O(1) amortised and never
/// moves the points already kept. Dropped with the session; not stored, so after a restart it starts again
/// (`since` says from when it is complete).
public struct SessionTrail: Sendable, Equatable {
    public let sessionId: String
    /// When this relay began recording this session: nothing before it is kept (a restart, or a session the
    /// walker started on another relay), so a client can tell a trail that starts late from a whole one.
    public let since: Int64
    public let limits: TrailLimits

    /// The ring: `storage` fills up to `maxPoints`, then `head` is the oldest point and new ones overwrite it.
    private var storage: [TrailPoint] = []
    private var head = 0
    public private(set) var count = 0

    public init(sessionId: String, since: Int64, limits: TrailLimits = TrailLimits()) {
        self.sessionId = sessionId
        self.since = since
        self.limits = limits
    }

    /// Another relay's record, point for point (it thinned them already), as its answer to `hw.last` gives it.
    public init(sessionId: String, since: Int64, limits: TrailLimits = TrailLimits(), points: [TrailPoint]) {
        self.init(sessionId: sessionId, since: since, limits: limits)
        storage = Array(points.suffix(limits.maxPoints))
        count = storage.count
    }

    /// Keeps `position` unless it lies within `minDistanceMetres` of the last point kept under the same
    /// restriction (a point whose restriction differs is always kept: it decides who sees that stretch),
    /// then drops points past the age limit.
    public mutating func record(_ position: Position, restriction: PositionRestriction?, now: Int64) {
        dropExpired(now: now)
        if let last = newest, last.restriction == restriction,
           Self.metres(from: last.position, to: position) < limits.minDistanceMetres {
            return
        }
        let point = TrailPoint(position: position, restriction: restriction, receivedAt: now)
        if count < storage.count {
            storage[(head + count) % storage.count] = point
            count += 1
        } else if storage.count < limits.maxPoints {
            // Growing: the ring is laid out from index 0 again first (rare: only after the age limit dropped
            // points and the walk came back to more than before), so that appending keeps the order.
            if head != 0 { (storage, head) = (allPoints, 0) }
            storage.append(point)
            count += 1
        } else {
            storage[head] = point
            head = (head + 1) % storage.count
        }
    }

    /// The points, oldest first, that none of `askers` was hidden from when each was sent.
    public func points(shownTo askers: some Collection<String>, now: Int64) -> [Position] {
        let oldest = now - limits.maxAgeMillis
        var shown: [Position] = []
        shown.reserveCapacity(count)
        for index in 0..<count {
            let point = storage[(head + index) % storage.count]
            guard point.receivedAt >= oldest else { continue }
            if let restriction = point.restriction, askers.contains(where: restriction.hides) { continue }
            shown.append(point.position)
        }
        return shown
    }

    /// Every point kept, oldest first, with its restriction (for another relay to filter by the same rule).
    public var allPoints: [TrailPoint] {
        (0..<count).map { storage[(head + $0) % storage.count] }
    }

    private var newest: TrailPoint? {
        count == 0 ? nil : storage[(head + count - 1) % storage.count]
    }

    private mutating func dropExpired(now: Int64) {
        let oldest = now - limits.maxAgeMillis
        while count > 0, storage[head].receivedAt < oldest {
            head = (head + 1) % storage.count
            count -= 1
        }
        if count == 0 {
            // Empty: start the ring over, so a walker back after a long pause does not keep a full buffer.
            storage.removeAll(keepingCapacity: false)
            head = 0
        }
    }

    /// Equal when they hold the same points of the same session, however the ring lies in memory.
    public static func == (a: SessionTrail, b: SessionTrail) -> Bool {
        (a.sessionId, a.since, a.limits) == (b.sessionId, b.since, b.limits) && a.allPoints == b.allPoints
    }

    /// Distance on a sphere (haversine): exact enough at walking scale, and cheap.
    static func metres(from a: Position, to b: Position) -> Double {
        let radius = 6_371_000.0
        let lat1 = a.lat * .pi / 180, lat2 = b.lat * .pi / 180
        let dLat = lat2 - lat1, dLon = (b.lon - a.lon) * .pi / 180
        let h = sin(dLat / 2) * sin(dLat / 2) + cos(lat1) * cos(lat2) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * radius * asin(min(1, h.squareRoot()))
    }
}
