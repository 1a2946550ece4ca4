import HomewardProtocol
import XCTest

final class SafetyRequestParsingTests: XCTestCase {
    private let now: Int64 = 1_763_830_000_000

    private func parse(_ json: String) -> Result<Request, ProtocolError> {
        IncomingRequest.parse(Array(json.utf8), now: now).result
    }

    private func assertBadRequest(_ json: String, file: StaticString = #filePath, line: UInt = #line) {
        guard case .failure(let error) = parse(json) else { return XCTFail("accepted \(json)", file: file, line: line) }
        XCTAssertEqual(error.code, .badRequest, file: file, line: line)
    }

    func testSessionStartTakesCheckInDestinationAndTTL() throws {
        let json = #"{"type":"session.start","checkInBy":\#(now + 60_000),"destination":{"lat":57.7,"lon":11.9,"radius":100},"ttl":3600}"#
        guard case .success(.sessionStart(let options)) = parse(json) else { return XCTFail("not parsed") }
        XCTAssertEqual(options.checkInBy, now + 60_000)
        XCTAssertEqual(options.destination, Destination(lat: 57.7, lon: 11.9, radius: 100))
        XCTAssertEqual(options.ttl, 3600)
    }

    func testCheckInByMustLieInTheFutureAndWithinSevenDays() {
        assertBadRequest(#"{"type":"session.start","checkInBy":\#(now)}"#)
        assertBadRequest(#"{"type":"session.start","checkInBy":\#(now - 1)}"#)
        assertBadRequest(#"{"type":"session.start","checkInBy":\#(now + 7 * 86_400_000 + 1)}"#)
        assertBadRequest(#"{"type":"session.checkin","sessionId":"s","checkInBy":\#(now - 5)}"#)
        assertBadRequest(#"{"type":"session.start","checkInBy":"soon"}"#)
        guard case .success = parse(#"{"type":"session.start","checkInBy":\#(now + 7 * 86_400_000)}"#) else {
            return XCTFail("exactly seven days ahead is allowed")
        }
    }

    func testTTLIsAWholeNumberOfSecondsUpToSevenDays() {
        assertBadRequest(#"{"type":"session.start","ttl":0}"#)
        assertBadRequest(#"{"type":"session.start","ttl":1.5}"#)
        assertBadRequest(#"{"type":"session.start","ttl":604801}"#)
        guard case .success = parse(#"{"type":"session.start","ttl":604800}"#), case .success = parse(#"{"type":"session.start","ttl":1}"#) else {
            return XCTFail("1 s and 7 days are allowed")
        }
    }

    func testDestinationRadiusIsTenToFiveThousandMetres() {
        assertBadRequest(#"{"type":"session.start","destination":{"lat":1,"lon":2,"radius":9}}"#)
        assertBadRequest(#"{"type":"session.start","destination":{"lat":1,"lon":2,"radius":5001}}"#)
        assertBadRequest(#"{"type":"session.start","destination":{"lat":91,"lon":2,"radius":100}}"#)
        assertBadRequest(#"{"type":"session.start","destination":[1,2,100]}"#)
        assertBadRequest(#"{"type":"session.start","destination":{"lat":1,"lon":2}}"#)
    }

    func testCheckinWithoutDeadlineClearsIt() {
        guard case .success(.sessionCheckin(let id, let deadline)) = parse(#"{"type":"session.checkin","sessionId":"s_1"}"#) else {
            return XCTFail("not parsed")
        }
        XCTAssertEqual(id, "s_1")
        XCTAssertNil(deadline)
    }

    func testGreatCircleDistanceMatchesAKnownValue() {
        // Paris (48.8566, 2.3522) to London (51.5074, -0.1278): about 343.5 km.
        let metres = GreatCircle.distance(fromLat: 48.8566, fromLon: 2.3522, toLat: 51.5074, toLon: -0.1278)
        XCTAssertEqual(metres / 1000, 343.5, accuracy: 1.5)
    }
}
