import HomewardProtocol
import XCTest

final class RequestParsingTests: XCTestCase {
    private let now: Int64 = 1_763_830_000_000

    private func incoming(_ text: String) -> IncomingRequest {
        IncomingRequest.parse(Array(text.utf8), now: now)
    }

    private func request(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> Request? {
        switch incoming(text).result {
        case .success(let request): return request
        case .failure(let error):
            XCTFail("\(text) was refused: \(error)", file: file, line: line)
            return nil
        }
    }

    private func assertRefused(_ text: String, _ code: ErrorCode = .badRequest,
                               file: StaticString = #filePath, line: UInt = #line) {
        switch incoming(text).result {
        case .success(let request): XCTFail("\(text) was accepted as \(request)", file: file, line: line)
        case .failure(let error): XCTAssertEqual(error.code, code, "\(text): \(error)", file: file, line: line)
        }
    }

    private func position(_ members: String, file: StaticString = #filePath, line: UInt = #line) -> Position? {
        guard case .position(let position)? = request(#"{"type":"pos","# + members + "}", file: file, line: line) else {
            return nil
        }
        return position
    }

    private func assertPositionRefused(_ members: String, file: StaticString = #filePath, line: UInt = #line) {
        assertRefused(#"{"type":"pos","# + members + "}", file: file, line: line)
    }

    private func register(username: String = "alice", password: String = "correct horse", name: String? = nil) -> String {
        var members: [(String, JSONValue)] = [("type", "register"), ("username", .string(username)), ("password", .string(password))]
        if let name { members.append(("name", .string(name))) }
        return JSONWriter.string(.object(members))
    }

    // MARK: Envelope

    func testIntegerIDIsEchoed() {
        let parsed = incoming(#"{"type":"ping","id":7}"#)
        XCTAssertEqual(parsed.id, .int(7))
        XCTAssertEqual(parsed.id?.json, 7)
        XCTAssertEqual(parsed.type, "ping")
        XCTAssertEqual(try parsed.result.get(), .ping)
        XCTAssertEqual(incoming(#"{"type":"ping","id":-9223372036854775808}"#).id, .int(Int64.min))
    }

    func testStringIDIsEchoed() {
        let parsed = incoming(#"{"id":"req-1","type":"ping"}"#)
        XCTAssertEqual(parsed.id, .string("req-1"))
        XCTAssertEqual(parsed.id?.json, "req-1")
        XCTAssertEqual(try parsed.result.get(), .ping)
    }

    func testAbsentOrNullIDIsNoID() {
        XCTAssertNil(incoming(#"{"type":"ping"}"#).id)
        XCTAssertNil(incoming(#"{"type":"ping","id":null}"#).id)
        XCTAssertEqual(try incoming(#"{"type":"ping","id":null}"#).result.get(), .ping)
    }

    func testIdIsEchoedOnFailuresToo() {
        let parsed = incoming(#"{"type":"friend.request","id":12,"username":"x"}"#)
        XCTAssertEqual(parsed.id, .int(12))
        XCTAssertEqual(parsed.type, "friend.request")
        assertRefused(#"{"type":"friend.request","id":12,"username":"x"}"#)
    }

    func testIllTypedIDIsBadRequestWithoutID() {
        for id in ["1.5", "true", "[1]", #"{"n":1}"#, "1e2", "99999999999999999999"] {
            let text = #"{"type":"ping","id":"# + id + "}"
            let parsed = incoming(text)
            XCTAssertNil(parsed.id, text)
            assertRefused(text)
        }
    }

    func testStringIDsAreLimitedTo128BytesAndALongerOneIsNotEchoed() {
        let longest = String(repeating: "i", count: RequestID.maxStringBytes)
        XCTAssertEqual(incoming(#"{"type":"ping","id":""# + longest + #""}"#).id, .string(longest))
        // 43 three-byte characters: 129 bytes though only 43 characters. The limit is in bytes, what the relay holds.
        for tooLong in [longest + "i", String(repeating: "\u{20AC}", count: 43)] {
            let text = #"{"type":"ping","id":""# + tooLong + #""}"#
            let parsed = incoming(text)
            XCTAssertNil(parsed.id, "a too-long id is not echoed as re")
            assertRefused(text)
            guard case .failure(let error) = parsed.result else { continue }
            XCTAssertTrue(error.message.contains("128 bytes"), error.message)
        }
    }

    func testMissingTypeIsBadRequest() {
        let parsed = incoming(#"{"id":3,"username":"bob"}"#)
        XCTAssertEqual(parsed.id, .int(3), "the id is still echoed")
        assertRefused(#"{"id":3,"username":"bob"}"#)
        assertRefused(#"{"type":5}"#)
        assertRefused(#"{"type":null}"#)
        assertRefused(#"{"type":["ping"]}"#)
    }

    func testNonObjectOrNonJSONIsBadRequest() {
        assertRefused("[]")
        assertRefused(#""ping""#)
        assertRefused("42")
        assertRefused("null")
        assertRefused("not json")
        assertRefused(#"{"type":"ping",}"#)
        assertRefused("")
        XCTAssertNil(incoming("not json").id)
    }

    func testUnknownTypeIsUnsupportedKeepingID() {
        let parsed = incoming(#"{"type":"teleport","id":"t1"}"#)
        XCTAssertEqual(parsed.id, .string("t1"))
        XCTAssertEqual(parsed.type, "teleport")
        assertRefused(#"{"type":"teleport","id":"t1"}"#, .unsupported)
        assertRefused(#"{"type":"PING"}"#, .unsupported)
    }

    func testUnknownFieldsAreIgnored() {
        XCTAssertEqual(request(#"{"type":"ping","extra":{"deep":[1,2]},"x":null}"#), .ping)
        XCTAssertEqual(request(#"{"type":"friend.accept","username":"bob","why":"because"}"#), .friendAccept(username: "bob"))
    }

    // MARK: Positions

    func testMinimalPositionDefaultsTsToNow() {
        XCTAssertEqual(position(#""lat":57.7089,"lon":11.9746"#), Position(lat: 57.7089, lon: 11.9746, ts: now))
    }

    func testFullPositionIsRead() {
        let parsed = position(#""lat":-33.5,"lon":-70,"acc":8,"alt":-12.5,"spd":1.4,"hdg":359.9,"batt":100,"ts":1763830000123"#)
        XCTAssertEqual(parsed, Position(lat: -33.5, lon: -70, acc: 8, alt: -12.5, spd: 1.4, hdg: 359.9, batt: 100, ts: 1_763_830_000_123))
    }

    func testLatitudeRange() {
        XCTAssertEqual(position(#""lat":90,"lon":0"#)?.lat, 90)
        XCTAssertEqual(position(#""lat":-90,"lon":0"#)?.lat, -90)
        assertPositionRefused(#""lat":90.000001,"lon":0"#)
        assertPositionRefused(#""lat":-90.5,"lon":0"#)
        assertPositionRefused(#""lat":1000,"lon":0"#)
        assertPositionRefused(#""lon":0"#)
        assertPositionRefused(#""lat":null,"lon":0"#)
    }

    func testLongitudeRange() {
        XCTAssertEqual(position(#""lat":0,"lon":180"#)?.lon, 180)
        XCTAssertEqual(position(#""lat":0,"lon":-180"#)?.lon, -180)
        assertPositionRefused(#""lat":0,"lon":180.1"#)
        assertPositionRefused(#""lat":0,"lon":-181"#)
        assertPositionRefused(#""lat":0"#)
    }

    func testAccuracyMustNotBeNegative() {
        XCTAssertEqual(position(#""lat":0,"lon":0,"acc":0"#)?.acc, 0)
        XCTAssertEqual(position(#""lat":0,"lon":0,"acc":12000.5"#)?.acc, 12000.5)
        assertPositionRefused(#""lat":0,"lon":0,"acc":-0.1"#)
    }

    func testSpeedMustNotBeNegative() {
        XCTAssertEqual(position(#""lat":0,"lon":0,"spd":0"#)?.spd, 0)
        assertPositionRefused(#""lat":0,"lon":0,"spd":-1"#)
    }

    func testAltitudeMayBeNegative() {
        XCTAssertEqual(position(#""lat":0,"lon":0,"alt":-430"#)?.alt, -430)
    }

    func testHeadingIsHalfOpenZeroTo360() {
        XCTAssertEqual(position(#""lat":0,"lon":0,"hdg":0"#)?.hdg, 0)
        XCTAssertEqual(position(#""lat":0,"lon":0,"hdg":359.999"#)?.hdg, 359.999)
        assertPositionRefused(#""lat":0,"lon":0,"hdg":360"#)
        assertPositionRefused(#""lat":0,"lon":0,"hdg":360.0"#)
        assertPositionRefused(#""lat":0,"lon":0,"hdg":-0.5"#)
        assertPositionRefused(#""lat":0,"lon":0,"hdg":720"#)
    }

    func testBatteryIsZeroTo100() {
        XCTAssertEqual(position(#""lat":0,"lon":0,"batt":0"#)?.batt, 0)
        XCTAssertEqual(position(#""lat":0,"lon":0,"batt":100"#)?.batt, 100)
        assertPositionRefused(#""lat":0,"lon":0,"batt":100.5"#)
        assertPositionRefused(#""lat":0,"lon":0,"batt":-1"#)
    }

    func testTimestampIsAWholeNonNegativeNumber() {
        XCTAssertEqual(position(#""lat":0,"lon":0,"ts":1763830000000"#)?.ts, 1_763_830_000_000)
        XCTAssertEqual(position(#""lat":0,"lon":0,"ts":1.7e12"#)?.ts, 1_700_000_000_000, "a whole number written with an exponent")
        XCTAssertEqual(position(#""lat":0,"lon":0,"ts":null"#)?.ts, now)
        assertPositionRefused(#""lat":0,"lon":0,"ts":1763830000000.5"#)
        assertPositionRefused(#""lat":0,"lon":0,"ts":-1"#)
        assertPositionRefused(#""lat":0,"lon":0,"ts":"1763830000000""#)
    }

    func testStringWhereNumberExpectedIsBadRequest() {
        assertPositionRefused(#""lat":"57.7","lon":11.9"#)
        assertPositionRefused(#""lat":57.7,"lon":"11.9""#)
        assertPositionRefused(#""lat":0,"lon":0,"acc":"8""#)
        assertPositionRefused(#""lat":0,"lon":0,"batt":true"#)
        assertPositionRefused(#""lat":0,"lon":0,"hdg":[90]"#)
        assertRefused(#"{"type":"alarm.raise","lat":"1","lon":2}"#)
    }

    func testNumberWhereStringExpectedIsBadRequest() {
        assertRefused(#"{"type":"friend.request","username":42}"#)
        assertRefused(#"{"type":"session.accept","sessionId":7}"#)
        assertRefused(#"{"type":"session.start","invite":"bob"}"#)
        assertRefused(#"{"type":"session.start","invite":[1]}"#)
    }

    // MARK: Usernames, passwords, names

    func testUsernameIsLowercased() {
        XCTAssertEqual(request(register(username: "Alice.B_2-x")), .register(username: "alice.b_2-x", password: "correct horse", name: nil))
        XCTAssertEqual(request(#"{"type":"friend.request","username":"BOB"}"#), .friendRequest(username: "bob"))
    }

    func testUsernameLengthIs3To32() {
        XCTAssertNotNil(request(register(username: "abc")))
        XCTAssertNotNil(request(register(username: String(repeating: "a", count: 32))))
        assertRefused(register(username: "ab"))
        assertRefused(register(username: ""))
        assertRefused(register(username: String(repeating: "a", count: 33)))
    }

    func testUsernameCharactersAreLimited() {
        for allowed in ["a_b", "a.b", "a-b", "abc123", "___", "9.9"] {
            XCTAssertNotNil(request(register(username: allowed)), allowed)
        }
        for refused in ["al ice", "al!ce", "al@ice", "ålice", "alice😀", "al/ice", "al+ice", "alice\n", "al\"ice"] {
            assertRefused(register(username: refused))
        }
        assertRefused(#"{"type":"friend.request","username":"no way"}"#)
        assertRefused(#"{"type":"friend.request"}"#)
    }

    func testUsernameRulesDirectly() throws {
        XCTAssertEqual(try Username.normalize("MiXeD"), "mixed")
        XCTAssertThrowsError(try Username.normalize("x"))
        XCTAssertThrowsError(try Username.normalize("ÅSA"), "non-ASCII letters are not a-z even when lowercased")
    }

    func testUsernameRejectsNonASCIIThatLowercasesToASCII() {
        // U+212A KELVIN SIGN lowercases to ASCII "k"; the contract allows only a-z 0-9 _ . - (any case).
        assertRefused(register(username: "\u{212A}arl"))
    }

    func testPasswordIs8To256Characters() {
        assertRefused(register(password: "1234567"))
        assertRefused(register(password: ""))
        XCTAssertNotNil(request(register(password: "12345678")))
        XCTAssertNotNil(request(register(password: String(repeating: "p", count: 256))))
        assertRefused(register(password: String(repeating: "p", count: 257)))
        assertRefused(#"{"type":"register","username":"alice"}"#)
        assertRefused(#"{"type":"register","username":"alice","password":12345678}"#)
    }

    func testNameIsAtMost64Characters() {
        XCTAssertEqual(request(register(name: String(repeating: "n", count: 64))),
                       .register(username: "alice", password: "correct horse", name: String(repeating: "n", count: 64)))
        XCTAssertEqual(request(register(name: "Alice Å. 😀")), .register(username: "alice", password: "correct horse", name: "Alice Å. 😀"))
        assertRefused(register(name: String(repeating: "n", count: 65)))
        assertRefused(#"{"type":"register","username":"alice","password":"correct horse","name":5}"#)
    }

    func testLoginLowercasesButDoesNotValidateUsername() {
        // Malformed credentials are just wrong credentials (answered by the core, not here).
        XCTAssertEqual(request(#"{"type":"login","username":"ALICE","password":"x"}"#), .login(username: "alice", password: "x"))
        assertRefused(#"{"type":"login","password":"x"}"#)
    }

    // MARK: Alarms and sessions

    func testAlarmRaiseLatWithoutLonIsBadRequest() {
        assertRefused(#"{"type":"alarm.raise","lat":57.7}"#)
        assertRefused(#"{"type":"alarm.raise","lon":11.9}"#)
        assertRefused(#"{"type":"alarm.raise","lat":91,"lon":0}"#)
        assertRefused(#"{"type":"alarm.raise","lat":0,"lon":0,"acc":-1}"#)
    }

    func testAlarmRaiseFieldsAreRead() {
        XCTAssertEqual(request(#"{"type":"alarm.raise"}"#), .alarmRaise(Request.AlarmRaise()))
        XCTAssertEqual(request(#"{"type":"alarm.raise","text":"help","lat":57.7,"lon":11.9,"acc":5,"to":["Bob","bob","carol"]}"#),
                       .alarmRaise(Request.AlarmRaise(text: "help", lat: 57.7, lon: 11.9, acc: 5, to: ["bob", "carol"])))
    }

    func testSessionRequestsAreRead() {
        XCTAssertEqual(request(#"{"type":"session.start"}"#), .sessionStart(SessionOptions()))
        XCTAssertEqual(request(#"{"type":"session.start","invite":["Bob"],"note":"home"}"#), .sessionStart(SessionOptions(invite: ["bob"], note: "home")))
        XCTAssertEqual(request(#"{"type":"session.accept","sessionId":"s_1"}"#), .sessionAccept(sessionId: "s_1"))
        assertRefused(#"{"type":"session.invite","sessionId":"s_1"}"#)
        assertRefused(#"{"type":"session.accept"}"#)
        assertRefused(#"{"type":"session.start","note":""# + String(repeating: "n", count: 281) + #""}"#)
    }

    // MARK: push.subscribe

    func testPushSubscribeTakesABrowserSubscriptionAndRefusesOtherShapes() {
        let keys = #""keys":{"p256dh":"BCVx","auth":"BTBZ"}"#
        XCTAssertEqual(request(#"{"type":"push.subscribe","kind":"webpush","endpoint":"https://p.example/1","# + keys + "}"),
                       .pushSubscribe(Request.PushSubscribe(endpoint: "https://p.example/1", p256dh: "BCVx", auth: "BTBZ")))
        // toJSON() also carries expirationTime; members the relay does not use are ignored.
        XCTAssertNotNil(request(#"{"type":"push.subscribe","kind":"webpush","endpoint":"https://p.example/1","expirationTime":null,"# + keys + "}"))
        assertRefused(#"{"type":"push.subscribe","endpoint":"https://p.example/1","# + keys + "}")
        assertRefused(#"{"type":"push.subscribe","kind":"apns","endpoint":"https://p.example/1","# + keys + "}")
        assertRefused(#"{"type":"push.subscribe","kind":"webpush","# + keys + "}")
        assertRefused(#"{"type":"push.subscribe","kind":"webpush","endpoint":"https://p.example/1"}"#)
        assertRefused(#"{"type":"push.subscribe","kind":"webpush","endpoint":"https://p.example/1","keys":"BCVx"}"#)
        assertRefused(#"{"type":"push.subscribe","kind":"webpush","endpoint":"https://p.example/1","keys":{"p256dh":"BCVx"}}"#)
        assertRefused(#"{"type":"push.subscribe","kind":"webpush","endpoint":7,"# + keys + "}")
        let long = String(repeating: "a", count: Request.PushSubscribe.endpointLimit)
        assertRefused(#"{"type":"push.subscribe","kind":"webpush","endpoint":"https://\#(long)","# + keys + "}")
        assertRefused(#"{"type":"push.unsubscribe"}"#)
        XCTAssertEqual(request(#"{"type":"push.list"}"#), .pushList)
    }
}
