import Foundation
import HomewardProtocol

/// Great-circle calculations on a spherical Earth.
///
/// A sphere is off by up to 0.3 % against the WGS 84 ellipsoid, far below GPS noise over the
/// few kilometres of a walk home, and it keeps stepping along a path simple and exact enough to
/// test against published values (the formulas are the ones in Chris Veness's "Movable Type"
/// collection, which publishes worked examples).
public enum Geodesy {
    /// The IUGG mean Earth radius in metres, the relay's too.
    public static let meanEarthRadius = GreatCircle.earthRadius

    /// Haversine distance in metres (the relay's own formula, so that "arrived" means the same
    /// to both); well-conditioned for the short distances of walking.
    public static func distance(_ from: Coordinate, _ to: Coordinate, radius: Double = meanEarthRadius) -> Double {
        let onRelaySphere = GreatCircle.distance(fromLat: from.lat, fromLon: from.lon, toLat: to.lat, toLon: to.lon)
        return radius == GreatCircle.earthRadius ? onRelaySphere : onRelaySphere / GreatCircle.earthRadius * radius
    }

    /// The initial bearing (forward azimuth) from `from` towards `to`, degrees clockwise from north in [0, 360).
    public static func initialBearing(_ from: Coordinate, _ to: Coordinate) -> Double {
        let φ1 = from.lat.radians, φ2 = to.lat.radians
        let Δλ = (to.lon - from.lon).radians
        let y = sin(Δλ) * cos(φ2)
        let x = cos(φ1) * sin(φ2) - sin(φ1) * cos(φ2) * cos(Δλ)
        return normalizedBearing(atan2(y, x).degrees)
    }

    /// The bearing on arrival at `to`: the initial bearing from `to` back to `from`, reversed.
    public static func finalBearing(_ from: Coordinate, _ to: Coordinate) -> Double {
        normalizedBearing(initialBearing(to, from) + 180)
    }

    /// The point `distance` metres from `start` along the great circle leaving it at `bearing` degrees.
    public static func destination(from start: Coordinate, bearing: Double, distance: Double,
                                   radius: Double = meanEarthRadius) -> Coordinate {
        let δ = distance / radius
        let θ = bearing.radians
        let φ1 = start.lat.radians, λ1 = start.lon.radians
        let sinφ2 = sin(φ1) * cos(δ) + cos(φ1) * sin(δ) * cos(θ)
        let φ2 = asin(min(max(sinφ2, -1), 1))
        let λ2 = λ1 + atan2(sin(θ) * sin(δ) * cos(φ1), cos(δ) - sin(φ1) * sinφ2)
        return Coordinate(lat: φ2.degrees, lon: normalizedLongitude(λ2.degrees))
    }

    /// The point at `fraction` (0...1) of the way along the great circle from `from` to `to`.
    public static func intermediate(_ from: Coordinate, _ to: Coordinate, fraction: Double) -> Coordinate {
        let δ = distance(from, to, radius: 1)
        guard δ > 1e-15 else { return from }
        let a = sin((1 - fraction) * δ) / sin(δ)
        let b = sin(fraction * δ) / sin(δ)
        let φ1 = from.lat.radians, λ1 = from.lon.radians
        let φ2 = to.lat.radians, λ2 = to.lon.radians
        let x = a * cos(φ1) * cos(λ1) + b * cos(φ2) * cos(λ2)
        let y = a * cos(φ1) * sin(λ1) + b * cos(φ2) * sin(λ2)
        let z = a * sin(φ1) + b * sin(φ2)
        return Coordinate(lat: atan2(z, (x * x + y * y).squareRoot()).degrees, lon: atan2(y, x).degrees)
    }

    static func normalizedBearing(_ degrees: Double) -> Double {
        let wrapped = degrees.truncatingRemainder(dividingBy: 360)
        let positive = wrapped < 0 ? wrapped + 360 : wrapped
        return positive >= 360 ? 0 : positive
    }

    static func normalizedLongitude(_ degrees: Double) -> Double {
        var value = (degrees + 540).truncatingRemainder(dividingBy: 360) - 180
        if value == -180, degrees > 0 { value = 180 }
        return value
    }
}

extension Double {
    var radians: Double { self * .pi / 180 }
    var degrees: Double { self * 180 / .pi }
}
