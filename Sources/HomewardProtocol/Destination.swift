/// Where a walk ends: a circle that ends the session with reason "arrived" once the owner is inside it.
public struct Destination: Sendable, Equatable {
    public static let radiusRange: ClosedRange<Double> = 10...5000

    public var lat: Double
    public var lon: Double
    /// Metres.
    public var radius: Double

    public init(lat: Double, lon: Double, radius: Double) {
        self.lat = lat
        self.lon = lon
        self.radius = radius
    }

    public var json: JSONValue { ["lat": .number(lat), "lon": .number(lon), "radius": .number(radius)] }

    public init(from value: JSONValue) throws(ProtocolError) {
        guard case .object = value else { throw .badRequest("destination must be an object {lat, lon, radius}") }
        let fields = Fields(value)
        lat = try fields.requiredNumber("lat", in: -90...90)
        lon = try fields.requiredNumber("lon", in: -180...180)
        radius = try fields.requiredNumber("radius", in: Self.radiusRange)
    }

    public func contains(lat: Double, lon: Double) -> Bool {
        GreatCircle.distance(fromLat: self.lat, fromLon: self.lon, toLat: lat, toLon: lon) <= radius
    }
}

/// Distances on the Earth as a sphere of mean radius (IUGG), accurate to about 0.5%.
public enum GreatCircle {
    public static let earthRadius = 6_371_008.8

    /// Haversine distance in metres.
    public static func distance(fromLat: Double, fromLon: Double, toLat: Double, toLon: Double) -> Double {
        let φ1 = fromLat * .pi / 180, φ2 = toLat * .pi / 180
        let Δφ = (toLat - fromLat) * .pi / 180, Δλ = (toLon - fromLon) * .pi / 180
        let a = sin(Δφ / 2) * sin(Δφ / 2) + cos(φ1) * cos(φ2) * sin(Δλ / 2) * sin(Δλ / 2)
        return 2 * earthRadius * atan2(a.squareRoot(), (1 - a).squareRoot())
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
