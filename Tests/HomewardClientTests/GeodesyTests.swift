import HomewardCLI
import XCTest

/// Great-circle formulas against published worked examples.
///
/// The Movable Type examples (Chris Veness, "Calculate distance, bearing and more between
/// Latitude/Longitude points", movable-type.co.uk/scripts/latlong.html) use a sphere of radius
/// 6371 km and print results to 4 significant figures (distance) or the arc-second (angles).
/// The Rosetta Code "Haversine formula" task uses a radius of 6372.8 km and prints the full double.
final class GeodesyTests: XCTestCase {
    private let movableTypeRadius = 6_371_000.0
    private let arcSecond = 1.0 / 3600

    private func dms(_ degrees: Double, _ minutes: Double, _ seconds: Double) -> Double {
        degrees + minutes / 60 + seconds / 3600
    }

    private var landsEnd: Coordinate { Coordinate(lat: dms(50, 3, 59), lon: -dms(5, 42, 53)) }
    private var johnOGroats: Coordinate { Coordinate(lat: dms(58, 38, 38), lon: -dms(3, 4, 12)) }

    func testDistanceLandsEndToJohnOGroats() {
        // Published: 968.9 km.
        let distance = Geodesy.distance(landsEnd, johnOGroats, radius: movableTypeRadius)
        XCTAssertEqual(distance / 1000, 968.9, accuracy: 0.05)
    }

    func testDistanceNashvilleToLosAngelesRosettaCode() {
        // Published: 2887.2599506071106 km with R = 6372.8 km.
        let distance = Geodesy.distance(Coordinate(lat: 36.12, lon: -86.67), Coordinate(lat: 33.94, lon: -118.40), radius: 6_372_800)
        XCTAssertEqual(distance / 1000, 2887.2599506071106, accuracy: 1e-9)
    }

    func testInitialAndFinalBearingLandsEndToJohnOGroats() {
        // Published: initial 009° 07′ 11″, final 011° 16′ 31″.
        XCTAssertEqual(Geodesy.initialBearing(landsEnd, johnOGroats), dms(9, 7, 11), accuracy: arcSecond)
        XCTAssertEqual(Geodesy.finalBearing(landsEnd, johnOGroats), dms(11, 16, 31), accuracy: arcSecond)
    }

    func testMidpointLandsEndToJohnOGroats() {
        // Published: 54° 21′ 44″ N, 004° 31′ 50″ W.
        let midpoint = Geodesy.intermediate(landsEnd, johnOGroats, fraction: 0.5)
        XCTAssertEqual(midpoint.lat, dms(54, 21, 44), accuracy: arcSecond)
        XCTAssertEqual(midpoint.lon, -dms(4, 31, 50), accuracy: arcSecond)
    }

    func testDestinationGivenDistanceAndBearing() {
        // Published: from 53° 19′ 14″ N, 001° 43′ 47″ W on 096° 01′ 18″ for 124.8 km
        // lies 53° 11′ 18″ N, 000° 08′ 00″ E, arriving on a bearing of 097° 30′ 52″.
        let start = Coordinate(lat: dms(53, 19, 14), lon: -dms(1, 43, 47))
        let end = Geodesy.destination(from: start, bearing: dms(96, 1, 18), distance: 124_800, radius: movableTypeRadius)
        XCTAssertEqual(end.lat, dms(53, 11, 18), accuracy: arcSecond)
        XCTAssertEqual(end.lon, dms(0, 8, 0), accuracy: arcSecond)
        XCTAssertEqual(Geodesy.finalBearing(start, end), dms(97, 30, 52), accuracy: arcSecond)
    }

    func testCardinalBearingsAndADegreeOfLatitude() {
        let origin = Coordinate(lat: 0, lon: 0)
        XCTAssertEqual(Geodesy.initialBearing(origin, Coordinate(lat: 1, lon: 0)), 0, accuracy: 1e-12)
        XCTAssertEqual(Geodesy.initialBearing(origin, Coordinate(lat: 0, lon: 1)), 90, accuracy: 1e-12)
        XCTAssertEqual(Geodesy.initialBearing(origin, Coordinate(lat: -1, lon: 0)), 180, accuracy: 1e-12)
        XCTAssertEqual(Geodesy.initialBearing(origin, Coordinate(lat: 0, lon: -1)), 270, accuracy: 1e-12)
        // One degree of a meridian on the IUGG mean sphere: 2πR / 360 = 111 195.08 m.
        XCTAssertEqual(Geodesy.distance(Coordinate(lat: 57, lon: 12), Coordinate(lat: 58, lon: 12)), 111_195.08, accuracy: 0.01)
    }

    func testDestinationInvertsDistanceAndBearing() {
        let start = Coordinate(lat: 57.7089, lon: 11.9746)
        for bearing in stride(from: 0.0, to: 360, by: 30) {
            let end = Geodesy.destination(from: start, bearing: bearing, distance: 1234)
            XCTAssertEqual(Geodesy.distance(start, end), 1234, accuracy: 1e-6)
            XCTAssertEqual(Geodesy.initialBearing(start, end), bearing, accuracy: 1e-6)
        }
    }
}

final class RouteTests: XCTestCase {
    func testStepsAlongAMeridianAtWalkingSpeed() throws {
        // 0.01° of latitude is 1111.95 m: at 1.4 m/s every second that is 794 steps of 1.4 m, a
        // last shorter step of 0.35 m, and the starting position: 796 positions.
        let start = Coordinate(lat: 57.70, lon: 11.97)
        let end = Coordinate(lat: 57.71, lon: 11.97)
        let route = try Route(points: [start, end])
        XCTAssertEqual(route.length, 1111.9508, accuracy: 1e-3)
        let steps = route.steps(speed: 1.4, interval: 1)
        XCTAssertEqual(steps.count, 796)
        XCTAssertEqual(steps.first?.coordinate, start)
        XCTAssertEqual(steps.last?.coordinate.lat ?? 0, end.lat, accuracy: 1e-12)
        XCTAssertEqual(steps.last?.remaining ?? 1, 0, accuracy: 1e-9)
        for (previous, next) in zip(steps, steps.dropFirst()).dropLast() {
            XCTAssertEqual(Geodesy.distance(previous.coordinate, next.coordinate), 1.4, accuracy: 1e-6)
            XCTAssertEqual(next.offset - previous.offset, 1, accuracy: 1e-12)
            XCTAssertEqual(angle(next.heading ?? -1, from: 0), 0, accuracy: 1e-6)
        }
        let last = Geodesy.distance(steps[steps.count - 2].coordinate, end)
        XCTAssertEqual(last, 1111.9508 - 794 * 1.4, accuracy: 1e-3)
    }

    /// The smaller angle between two bearings: 359.999999° is 0.000001° from north.
    private func angle(_ bearing: Double, from other: Double) -> Double {
        let difference = abs(bearing - other).truncatingRemainder(dividingBy: 360)
        return min(difference, 360 - difference)
    }

    func testStepsFollowEveryLegOfAPolyline() throws {
        // East along the equator for 0.001°, then north for 0.001°: each leg is 111.195 m.
        let route = try Route(points: [Coordinate(lat: 0, lon: 0), Coordinate(lat: 0, lon: 0.001), Coordinate(lat: 0.001, lon: 0.001)],
                              elevations: [0, 10, 20])
        XCTAssertEqual(route.length, 222.390, accuracy: 1e-3)
        let halfway = route.location(atDistance: route.length / 2)
        XCTAssertEqual(halfway.coordinate.lat, 0, accuracy: 1e-9)
        XCTAssertEqual(halfway.coordinate.lon, 0.001, accuracy: 1e-9)
        XCTAssertEqual(halfway.elevation ?? -1, 10, accuracy: 1e-9)
        let onFirstLeg = route.location(atDistance: 50)
        XCTAssertEqual(onFirstLeg.heading ?? -1, 90, accuracy: 1e-6)
        XCTAssertEqual(onFirstLeg.elevation ?? -1, 10 * 50 / 111.195, accuracy: 1e-3)
        let onSecondLeg = route.location(atDistance: 150)
        XCTAssertEqual(angle(onSecondLeg.heading ?? -1, from: 0), 0, accuracy: 1e-6)
        XCTAssertEqual(Geodesy.distance(Coordinate(lat: 0, lon: 0.001), onSecondLeg.coordinate), 150 - 111.195, accuracy: 1e-3)

        let steps = route.steps(speed: 10, interval: 2)
        XCTAssertEqual(steps.count, 13)
        XCTAssertEqual(steps[6].distance, 120, accuracy: 1e-9)
        XCTAssertEqual(steps.last?.offset, 24)
    }

    func testASinglePointRouteIsOneStandingStep() throws {
        let route = try Route(points: [Coordinate(lat: 1, lon: 2)])
        let steps = route.steps(speed: 1.4, interval: 1)
        XCTAssertEqual(steps.count, 1)
        XCTAssertNil(steps[0].heading)
        XCTAssertThrowsError(try Route(points: []))
        XCTAssertThrowsError(try Route(points: [Coordinate(lat: 91, lon: 0)]))
    }
}

final class GPSNoiseTests: XCTestCase {
    func testNoiseHasTheAccuracyAsIts68PercentRadiusAndIsReproducible() {
        let truth = Coordinate(lat: 57.7089, lon: 11.9746)
        var noise = GPSNoise(accuracy: 10, seed: 42)
        let errors = (0..<20_000).map { _ in Geodesy.distance(truth, noise.perturb(truth)) }
        let within = Double(errors.filter { $0 <= 10 }.count) / Double(errors.count)
        XCTAssertEqual(within, 0.68, accuracy: 0.015)

        var first = GPSNoise(accuracy: 5, seed: 7)
        var second = GPSNoise(accuracy: 5, seed: 7)
        XCTAssertEqual((0..<10).map { _ in first.perturb(truth) }, (0..<10).map { _ in second.perturb(truth) })

        var exact = GPSNoise(accuracy: 0, seed: 1)
        XCTAssertEqual(exact.perturb(truth), truth)
    }
}
