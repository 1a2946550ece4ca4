import HomewardCLI
import XCTest

final class GPXTrackTests: XCTestCase {
    private func fixture(_ name: String) throws -> String {
        let url = try XCTUnwrap(Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Fixtures"),
                                "missing fixture \(name)")
        return url.path
    }

    func testReadsTrackPointsOfEverySegmentWithElevation() throws {
        let track = try GPXTrack.load(path: fixture("walk-home.gpx"))
        XCTAssertEqual(track.name, "Station to Brunnsparken")
        XCTAssertEqual(track.points.count, 5)
        XCTAssertEqual(track.points.first, Coordinate(lat: 57.708870, lon: 11.973480))
        XCTAssertEqual(track.points.last, Coordinate(lat: 57.706560, lon: 11.968960))
        XCTAssertEqual(track.elevations, [12.0, 11.5, 10.0, 9.5, nil])
        let route = try track.route
        XCTAssertGreaterThan(route.length, 400)
        XCTAssertLessThan(route.length, 600)
    }

    func testFallsBackToRoutePoints() throws {
        let track = try GPXTrack.load(path: fixture("route-only.gpx"))
        XCTAssertEqual(track.points, [Coordinate(lat: -33.9249, lon: 18.4241), Coordinate(lat: -33.9258, lon: 18.4232)])
    }

    func testMalformedXMLIsAClearErrorWithItsLine() throws {
        XCTAssertThrowsError(try GPXTrack.load(path: fixture("malformed.gpx"))) { error in
            guard case .malformed(let line, _, _)? = error as? GPXError else { return XCTFail("unexpected \(error)") }
            XCTAssertEqual(line, 6)
            XCTAssertTrue("\(error)".hasPrefix("malformed GPX at line 6"), "\(error)")
            XCTAssertTrue("\(error)".contains("closing tag"), "\(error)")
        }
    }

    func testAnOutOfRangeCoordinateIsRejected() throws {
        XCTAssertThrowsError(try GPXTrack.load(path: fixture("bad-coordinate.gpx"))) { error in
            guard case .invalidPoint(let line, let reason)? = error as? GPXError else { return XCTFail("unexpected \(error)") }
            XCTAssertEqual(line, 6)
            XCTAssertTrue(reason.contains("97.5"), reason)
        }
    }

    func testOtherFilesAreRefusedWithTheReason() throws {
        XCTAssertThrowsError(try GPXTrack.load(path: fixture("no-points.gpx"))) { error in
            XCTAssertEqual(error as? GPXError, .noPoints)
        }
        XCTAssertThrowsError(try GPXTrack.load(path: fixture("not-gpx.kml"))) { error in
            XCTAssertEqual(error as? GPXError, .notGPX(root: "kml"))
        }
        XCTAssertThrowsError(try GPXTrack.load(path: "/nonexistent/walk.gpx")) { error in
            guard case .unreadable(let path, _)? = error as? GPXError else { return XCTFail("unexpected \(error)") }
            XCTAssertEqual(path, "/nonexistent/walk.gpx")
        }
    }
}
