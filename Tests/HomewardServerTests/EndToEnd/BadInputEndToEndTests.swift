import HomewardCoreTestSupport
import HomewardProtocol
import NIOCore
import NIOWebSocket
import XCTest

/// Malformed messages and frames: the right error or close code, no harm to others, no lost data.
final class BadInputEndToEndTests: EndToEndTestCase {
    private func textFrame(_ bytes: [UInt8], fin: Bool = true, opcode: WebSocketOpcode = .text,
                           rsv1: Bool = false, masked: Bool = true) -> WebSocketFrame {
        WebSocketFrame(fin: fin, rsv1: rsv1, opcode: opcode, maskKey: masked ? .random() : nil,
                       data: ByteBuffer(bytes: bytes))
    }

    /// An error event without `re` (the relay could not read an id).
    private func anonymousError(_ client: TestClient, _ code: String) async throws -> JSONValue {
        try await client.waitFor("an error \(code)") { $0["type"] == "error" && $0["code"] == .string(code) }
    }

    func testMalformedJSONIsBadRequestAndTheConnectionStaysUsable() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        for garbage in ["{not json", "", "{\"type\":\"ping\",}", "nul", "{\"type\":\"ping\"} trailing", "\u{0}"] {
            try await alice.client.send(garbage)
            let error = try await anonymousError(alice.client, "bad_request")
            XCTAssertNil(error["re"], "no id could be read from \(garbage.debugDescription)")
            XCTAssertNotNil(error["message"]?.stringValue)
        }
        // Still signed in and working.
        try await alice.client.ok("friend.list")
        XCTAssertTrue(alice.client.isActive)
    }

    func testMalformedJSONBeforeSignInKeepsTheConnection() async throws {
        let relay = try await startRelay()
        let client = try await relay.connect()
        try await client.send("][")
        _ = try await anonymousError(client, "bad_request")
        try await client.ok("ping")
        let username = TestRelay.uniqueUsername("late")
        try await client.ok("register", ["username": .string(username), "password": "long enough pw"])
    }

    func testNonObjectsAreBadRequests() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        for value in ["[1,2,3]", "\"pos\"", "42", "null", "true", "[{\"type\":\"ping\",\"id\":1}]"] {
            try await alice.client.send(value)
            _ = try await anonymousError(alice.client, "bad_request")
        }
        try await alice.client.ok("ping")
    }

    func testEnvelopeErrors() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        // Unknown type: unsupported, echoing the id.
        let unknown = try await alice.client.request("teleport", ["where": "home"])
        XCTAssertEqual(unknown["type"], "error")
        XCTAssertEqual(unknown["code"], "unsupported")
        // String ids are echoed as strings.
        try await alice.client.send(#"{"type":"ping","id":"abc-1"}"#)
        let reply = try await alice.client.waitFor("the reply to abc-1") { $0["re"] == "abc-1" }
        XCTAssertEqual(reply["type"], "ok")
        try await alice.client.send(#"{"type":"no.such.thing","id":"abc-2"}"#)
        let unsupported = try await alice.client.waitFor("the reply to abc-2") { $0["re"] == "abc-2" }
        XCTAssertEqual(unsupported["code"], "unsupported")
        // Missing or ill-typed type.
        try await alice.client.send(#"{"id":"abc-3"}"#)
        let missingType = try await alice.client.waitFor("the reply to abc-3") { $0["re"] == "abc-3" }
        XCTAssertEqual(missingType["code"], "bad_request")
        try await alice.client.send(#"{"type":7,"id":"abc-4"}"#)
        let numericType = try await alice.client.waitFor("the reply to abc-4") { $0["re"] == "abc-4" }
        XCTAssertEqual(numericType["code"], "bad_request")
        // An id that is neither string nor integer.
        try await alice.client.send(#"{"type":"ping","id":{"x":1}}"#)
        _ = try await anonymousError(alice.client, "bad_request")
        // Unknown fields are ignored.
        let extra = try await alice.client.request("friend.list", ["color": "blue", "nested": ["a": [1, 2]]])
        XCTAssertEqual(extra["type"], "ok")
        // An unknown type without an id still gets its error.
        try await alice.client.send(#"{"type":"teleport"}"#)
        _ = try await anonymousError(alice.client, "unsupported")
    }

    func testRequestWithoutIDGetsNoReplyWhenItSucceeds() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        // Contract: "A request without an id gets a reply only if it fails".
        for request in [#"{"type":"ping"}"#, #"{"type":"friend.list"}"#, #"{"type":"session.list"}"#,
                        #"{"type":"pos","lat":1,"lon":2}"#, #"{"type":"alarm.contacts","id":null}"#] {
            try await alice.client.send(request)
        }
        let replies = try await alice.client.messagesAfterRoundTrip { $0["re"] == nil && $0["type"] == "ok" }
        XCTAssertEqual(replies, [], "ok replies to requests that carried no id")
        // A failing id-less request does get its error.
        try await alice.client.send(#"{"type":"friend.request","username":"x"}"#)
        _ = try await anonymousError(alice.client, "bad_request")
    }

    func testInvalidPositionsAreRejectedAndNotRelayed() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)
        let start = try await alice.client.ok("session.start")
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.ok("session.accept", ["sessionId": .string(id)])
        try await alice.client.event("session.accepted")

        let invalid: [(String, [(String, JSONValue)])] = [
            ("lat too big", [("lat", 90.0001), ("lon", 0)]),
            ("lat too small", [("lat", -91), ("lon", 0)]),
            ("lon too big", [("lat", 0), ("lon", 180.5)]),
            ("lon too small", [("lat", 0), ("lon", -181)]),
            ("lat missing", [("lon", 0)]),
            ("lon missing", [("lat", 0)]),
            ("lat as a string", [("lat", "57.7"), ("lon", 0)]),
            ("lon as null", [("lat", 1), ("lon", .null)]),
            ("negative acc", [("lat", 0), ("lon", 0), ("acc", -1)]),
            ("negative spd", [("lat", 0), ("lon", 0), ("spd", -0.5)]),
            ("hdg 360", [("lat", 0), ("lon", 0), ("hdg", 360)]),
            ("negative hdg", [("lat", 0), ("lon", 0), ("hdg", -1)]),
            ("batt over 100", [("lat", 0), ("lon", 0), ("batt", 101)]),
            ("acc as a string", [("lat", 0), ("lon", 0), ("acc", "8")]),
            ("ts as a string", [("lat", 0), ("lon", 0), ("ts", "now")]),
            ("ts negative", [("lat", 0), ("lon", 0), ("ts", -5)]),
        ]
        for (what, fields) in invalid {
            let code = try await alice.client.failure("pos", fields)
            XCTAssertEqual(code, "bad_request", what)
        }
        // Without an id the error still comes back.
        try await alice.client.send(#"{"type":"pos","lat":100,"lon":0}"#)
        _ = try await anonymousError(alice.client, "bad_request")
        try await alice.client.send(#"{"type":"pos","lat":1e999,"lon":0}"#)
        _ = try await anonymousError(alice.client, "bad_request")

        let leaked = try await bob.client.eventsAfterRoundTrip("pos")
        XCTAssertEqual(leaked, [], "an invalid pos is not relayed")
        // Boundary values are fine.
        try await alice.client.ok("pos", ["lat": 90, "lon": -180, "acc": 0, "spd": 0, "hdg": 359.9, "batt": 100])
        let boundary = try await bob.client.event("pos")
        XCTAssertEqual(boundary["lat"], 90)
        XCTAssertEqual(boundary["lon"], -180)
    }

    func testBinaryFrameIsUnsupportedAndTheConnectionStays() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        try await alice.client.sendFrame(textFrame(Array(#"{"type":"ping","id":1}"#.utf8), opcode: .binary))
        _ = try await anonymousError(alice.client, "unsupported")
        try await alice.client.ok("friend.list")
        XCTAssertTrue(alice.client.isActive)
    }

    func testFragmentedTextMessageIsReassembled() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let text = Array(#"{"type":"ping","id":"fragmented"}"#.utf8)
        try await alice.client.sendFrame(textFrame(Array(text[0..<5]), fin: false))
        try await alice.client.sendFrame(textFrame(Array(text[5..<12]), fin: false, opcode: .continuation))
        try await alice.client.sendFrame(textFrame(Array(text[12...]), fin: true, opcode: .continuation))
        let reply = try await alice.client.waitFor("the reply to the fragmented ping") { $0["re"] == "fragmented" }
        XCTAssertEqual(reply["type"], "ok")
    }

    func testOversizedMessageGetsTooLargeThenClose1009() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)
        let padding = String(repeating: "x", count: 70 * 1024)
        // The relay rejects the frame from its header and may close before the body is written: ignore write errors.
        try? await alice.client.send(#"{"type":"ping","id":99,"pad":"\#(padding)"}"#)
        let error = try await anonymousError(alice.client, "too_large")
        XCTAssertNotNil(error["message"])
        let code = try await alice.client.closeCode()
        XCTAssertEqual(code, 1009)
        try await alice.client.waitUntilClosed()
        // Others are not disturbed, and nothing stored is lost.
        try await bob.client.ok("ping")
        try await assertFriendshipSurvivesRestart(relay, alice, bob)
    }

    func testOversizedFragmentedMessageGetsClose1009() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 16 * 1024)
        try await alice.client.sendFrame(textFrame(Array(#"{"type":"ping","pad":""#.utf8), fin: false))
        // The relay may close the connection as soon as the total passes the limit, so later writes may fail.
        for _ in 0..<5 {
            try? await alice.client.sendFrame(textFrame(chunk, fin: false, opcode: .continuation))
        }
        try? await alice.client.sendFrame(textFrame(Array(#""}"#.utf8), fin: true, opcode: .continuation))
        let code = try await alice.client.closeCode()
        XCTAssertEqual(code, 1009)
    }

    func testMessageJustUnderTheLimitIsServed() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let padding = String(repeating: "y", count: 60 * 1024)
        try await alice.client.send(#"{"type":"ping","id":"big","pad":"\#(padding)"}"#)
        let reply = try await alice.client.waitFor("the reply to the big ping") { $0["re"] == "big" }
        XCTAssertEqual(reply["type"], "ok")
    }

    func testInvalidUTF8ClosesWith1007() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)
        try await alice.client.sendFrame(textFrame([0x7B, 0x22, 0x74, 0xFF, 0xFE, 0x22, 0x7D]))
        let code = try await alice.client.closeCode()
        XCTAssertEqual(code, 1007)
        try await alice.client.waitUntilClosed()
        try await assertFriendshipSurvivesRestart(relay, alice, bob)
    }

    func testReservedBitClosesWith1002() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        try await alice.client.sendFrame(textFrame(Array(#"{"type":"ping","id":1}"#.utf8), rsv1: true))
        let code = try await alice.client.closeCode()
        XCTAssertEqual(code, 1002)
        let replies = await alice.client.buffered.filter { $0["re"] != nil }
        XCTAssertEqual(replies, [], "the frame was not served")
    }

    func testUnmaskedClientFrameClosesWith1002() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        try await alice.client.sendFrame(textFrame(Array(#"{"type":"ping","id":1}"#.utf8), masked: false))
        let code = try await alice.client.closeCode()
        XCTAssertEqual(code, 1002)
        let replies = await alice.client.buffered.filter { $0["re"] != nil }
        XCTAssertEqual(replies, [], "the frame was not served")
    }

    func testReservedOpcodeClosesWith1002() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let opcode = try XCTUnwrap(WebSocketOpcode(encodedWebSocketOpcode: 0x3))
        try await alice.client.sendFrame(textFrame([1, 2, 3], opcode: opcode))
        let code = try await alice.client.closeCode()
        XCTAssertEqual(code, 1002)
    }

    func testClientCloseIsAnsweredWith1000() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        var data = ByteBuffer()
        data.writeInteger(UInt16(1000))
        try await alice.client.sendFrame(WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: data))
        let code = try await alice.client.closeCode()
        XCTAssertEqual(code, 1000)
        try await alice.client.waitUntilClosed()
    }

    func testRateLimit() async throws {
        let relay = try await startRelay { $0.limits.requestsPerSecond = 5 }
        let alice = try await relay.user("alice")
        // A burst of 10 tokens at most: 30 requests at once must hit the limit.
        for index in 0..<30 {
            try await alice.client.send(#"{"type":"ping","id":"burst-\#(index)"}"#)
        }
        var codes: [String] = []
        for index in 0..<30 {
            let reply = try await alice.client.waitFor("the reply to burst-\(index)") { $0["re"] == .string("burst-\(index)") }
            codes.append(reply["type"] == "ok" ? "ok" : reply["code"]?.stringValue ?? "?")
        }
        XCTAssertTrue(codes.contains("rate_limited"), "\(codes)")
        XCTAssertTrue(codes.contains("ok"), "\(codes)")
        XCTAssertEqual(Set(codes), ["ok", "rate_limited"])
        XCTAssertTrue(alice.client.isActive, "rate limiting does not close the connection")
    }

    func testGarbageFromOneClientDoesNotDisturbAnother() async throws {
        let relay = try await startRelay()
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")
        try await befriend(alice, bob)
        let start = try await alice.client.ok("session.start")
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        try await bob.client.ok("session.accept", ["sessionId": .string(id)])
        try await alice.client.event("session.accepted")
        for garbage in ["{", "[]", #"{"type":"pos","lat":"x"}"#, #"{"type":"session.end"}"#, #"{"type":"??"}"#] {
            try await bob.client.send(garbage)
        }
        try await alice.client.ok("pos", ["lat": 1, "lon": 2])
        let pos = try await bob.client.event("pos")
        XCTAssertEqual(pos["lat"], 1)
        let list = try await alice.client.ok("session.list")
        XCTAssertEqual(list["own"]?["observers"], [.string(bob.username)], "bob's garbage changed nothing")
        let aliceErrors = try await alice.client.messagesAfterRoundTrip { $0["type"] == "error" }
        XCTAssertEqual(aliceErrors, [], "errors go only to the sender")
        try await assertFriendshipSurvivesRestart(relay, alice, bob)
    }

    // MARK: Helpers

    private func assertFriendshipSurvivesRestart(_ relay: TestRelay, _ alice: TestUser, _ bob: TestUser,
                                                 file: StaticString = #filePath, line: UInt = #line) async throws {
        try await relay.restart()
        let client = try await relay.connect(label: "after-restart")
        try await client.ok("login", ["username": .string(alice.username), "password": .string(alice.password)])
        let list = try await client.ok("friend.list")
        XCTAssertEqual(list["friends"]?.arrayValue?.map { $0["username"] }, [.string(bob.username)],
                       "the friendship is still stored", file: file, line: line)
    }
}
