/// A path to walk: great-circle legs between points, with the elevation where known.
public struct Route: Sendable, Equatable {
    public let points: [Coordinate]
    public let elevations: [Double?]
    /// Distance along the route to each point; `cumulative[0] == 0`.
    public let cumulative: [Double]

    public var length: Double { cumulative.last ?? 0 }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case empty
        case invalidPoint(index: Int)

        public var description: String {
            switch self {
            case .empty: return "a route needs at least one point"
            case .invalidPoint(let index): return "point \(index + 1) of the route is not a valid latitude/longitude"
            }
        }
    }

    public init(points: [Coordinate], elevations: [Double?]? = nil) throws(Failure) {
        guard !points.isEmpty else { throw .empty }
        if let bad = points.firstIndex(where: { !$0.isValid }) { throw .invalidPoint(index: bad) }
        self.points = points
        self.elevations = elevations ?? Array(repeating: nil, count: points.count)
        var cumulative = [0.0]
        for index in points.indices.dropFirst() {
            cumulative.append(cumulative[index - 1] + Geodesy.distance(points[index - 1], points[index]))
        }
        self.cumulative = cumulative
    }

    /// Where a walker is after `distance` metres: the point, the heading of the leg, and the elevation.
    public func location(atDistance distance: Double) -> (coordinate: Coordinate, heading: Double?, elevation: Double?) {
        guard points.count > 1 else { return (points[0], nil, elevations[0]) }
        let clamped = min(max(distance, 0), length)
        // The leg holding `clamped`: the last one whose start is at or before it, skipping zero-length legs.
        var leg = 0
        while leg < points.count - 2, cumulative[leg + 1] <= clamped { leg += 1 }
        let legLength = cumulative[leg + 1] - cumulative[leg]
        let fraction = legLength > 0 ? (clamped - cumulative[leg]) / legLength : 1
        let from = points[leg], to = points[leg + 1]
        let coordinate = fraction >= 1 ? to : fraction <= 0 ? from : Geodesy.intermediate(from, to, fraction: fraction)
        let heading = legLength > 0 ? Geodesy.initialBearing(coordinate == to ? from : coordinate, to) : nil
        var elevation: Double?
        if let a = elevations[leg], let b = elevations[leg + 1] { elevation = a + (b - a) * fraction }
        return (coordinate, heading.map { coordinate == to ? Geodesy.finalBearing(from, to) : $0 }, elevation)
    }

    /// The positions of a walk at `speed` m/s reporting every `interval` seconds: one at the
    /// start, one per interval, and a last one exactly at the end (after a shorter final step).
    public func steps(speed: Double, interval: Double) -> [RouteStep] {
        precondition(speed > 0 && interval > 0, "speed and interval must be positive")
        let stride = speed * interval
        let count = length > 0 ? Int((length / stride).rounded(.up)) : 0
        return (0...count).map { index in
            let distance = min(Double(index) * stride, length)
            let location = location(atDistance: distance)
            return RouteStep(index: index, count: count + 1, distance: distance, remaining: length - distance,
                             coordinate: location.coordinate, heading: location.heading, elevation: location.elevation,
                             offset: Double(index) * interval)
        }
    }
}

/// One position of a simulated walk.
public struct RouteStep: Sendable, Equatable {
    /// 0-based.
    public var index: Int
    public var count: Int
    /// Metres walked so far, and left to walk.
    public var distance: Double
    public var remaining: Double
    public var coordinate: Coordinate
    /// Degrees clockwise from north; nil when standing still.
    public var heading: Double?
    public var elevation: Double?
    /// Seconds after the start.
    public var offset: Double
}
