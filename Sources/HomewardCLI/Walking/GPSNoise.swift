import Foundation
import HomewardProtocol

/// Makes a true position look like a phone's GPS fix of a given accuracy.
///
/// `accuracy` follows the convention of phone location APIs (Android's `getAccuracy()`): the
/// radius in metres of the circle holding the true position with 68 % probability. With an
/// independent normal error of σ per axis, P(r ≤ kσ) = 1 − exp(−k²/2) = 0.68 gives k ≈ 1.5096.
public struct GPSNoise: Sendable {
    public static let radiusPerSigma = 1.5096

    public var accuracy: Double
    private var random: SplitMix64

    public init(accuracy: Double, seed: UInt64) {
        self.accuracy = max(0, accuracy)
        self.random = SplitMix64(seed: seed)
    }

    /// `coordinate` moved by a random error of the configured accuracy.
    public mutating func perturb(_ coordinate: Coordinate) -> Coordinate {
        guard accuracy > 0 else { return coordinate }
        let sigma = accuracy / Self.radiusPerSigma
        let (north, east) = gaussianPair()
        let distance = (north * north + east * east).squareRoot() * sigma
        let bearing = atan2(east, north).degrees
        return Geodesy.destination(from: coordinate, bearing: bearing, distance: distance)
    }

    /// Two independent standard normal values (Box-Muller).
    private mutating func gaussianPair() -> (Double, Double) {
        let u1 = Double.random(in: Double.ulpOfOne..<1, using: &random)
        let u2 = Double.random(in: 0..<1, using: &random)
        let r = (-2 * log(u1)).squareRoot()
        return (r * cos(2 * .pi * u2), r * sin(2 * .pi * u2))
    }
}
