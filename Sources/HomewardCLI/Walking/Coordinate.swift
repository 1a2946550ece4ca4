import Foundation

/// A point on the Earth in decimal degrees (WGS 84 latitude and longitude).
public struct Coordinate: Sendable, Equatable, CustomStringConvertible {
    public var lat: Double
    public var lon: Double

    public init(lat: Double, lon: Double) {
        self.lat = lat
        self.lon = lon
    }

    public var isValid: Bool { lat.isFinite && lon.isFinite && (-90...90).contains(lat) && (-180...180).contains(lon) }

    public var description: String { String(format: "%.6f, %.6f", lat, lon) }

    /// Parses "57.7089,11.9746" (spaces allowed after the comma).
    public init?(parsing text: String) {
        let parts = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count == 2, let lat = Double(parts[0]), let lon = Double(parts[1]) else { return nil }
        self.init(lat: lat, lon: lon)
        guard isValid else { return nil }
    }
}
