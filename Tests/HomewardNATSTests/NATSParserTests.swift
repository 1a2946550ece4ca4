import HomewardNATS
import NIOCore
import XCTest

final class NATSParserTests: XCTestCase {
    /// A stream with every kind of server message, payloads with CRLF and an empty one.
    static let stream = "INFO {\"server_id\":\"S1\",\"version\":\"2.9.10\",\"max_payload\":1048576,\"headers\":true}\r\n"
        + "+OK\r\n"
        + "MSG walker.ann 1 11\r\nhello world\r\n"
        + "MSG walker.ann 1 _INBOX.x.7 14\r\nline1\r\nline2\r\n\r\n"
        + "MSG empty 2 0\r\n\r\n"
        + "PING\r\n"
        + "HMSG svc 3 reply.1 12 17\r\nNATS/1.0\r\n\r\nhello\r\n"
        + "PONG\r\n"
        + "-ERR 'Permissions Violation for Publish to \"x\"'\r\n"

    static let expected: [NATSServerOp] = [
        .info(NATSServerInfo(serverID: "S1", version: "2.9.10", maxPayload: 1_048_576, headers: true)),
        .ok,
        .message(NATSMessage(subject: "walker.ann", subscriptionID: 1, payload: ByteBuffer(string: "hello world"))),
        .message(NATSMessage(subject: "walker.ann", subscriptionID: 1, replyTo: "_INBOX.x.7", payload: ByteBuffer(string: "line1\r\nline2\r\n"))),
        .message(NATSMessage(subject: "empty", subscriptionID: 2, payload: ByteBuffer())),
        .ping,
        .message(NATSMessage(subject: "svc", subscriptionID: 3, replyTo: "reply.1", headers: ByteBuffer(string: "NATS/1.0\r\n\r\n"),
                             payload: ByteBuffer(string: "hello"))),
        .pong,
        .error("Permissions Violation for Publish to \"x\""),
    ]

    /// Feeds `chunks` one after another, collecting everything complete after each.
    private func parse(_ chunks: [ByteBuffer], parser: inout NATSParser) throws -> [NATSServerOp] {
        var ops: [NATSServerOp] = []
        for chunk in chunks {
            parser.append(chunk)
            while let op = try parser.next() { ops.append(op) }
        }
        return ops
    }

    private func parse(_ chunks: [String]) throws -> [NATSServerOp] {
        var parser = NATSParser()
        return try parse(chunks.map { ByteBuffer(string: $0) }, parser: &parser)
    }

    func testWholeStreamInOneChunkGivesEveryMessageInOrder() throws {
        XCTAssertEqual(try parse([Self.stream]), Self.expected)
    }

    func testEverySplitIntoTwoChunksGivesTheSameMessages() throws {
        let bytes = Array(Self.stream.utf8)
        for split in 0...bytes.count {
            var parser = NATSParser()
            let ops = try parse([ByteBuffer(bytes: bytes[..<split]), ByteBuffer(bytes: bytes[split...])], parser: &parser)
            XCTAssertEqual(ops, Self.expected, "split at \(split)")
            XCTAssertEqual(parser.bufferedBytes, 0)
        }
    }

    func testOneByteAtATimeGivesTheSameMessages() throws {
        let bytes = Array(Self.stream.utf8)
        var parser = NATSParser()
        XCTAssertEqual(try parse(bytes.map { ByteBuffer(bytes: [$0]) }, parser: &parser), Self.expected)
    }

    func testMessageIsNotReturnedUntilItsWholePayloadArrived() throws {
        var parser = NATSParser()
        parser.append(ByteBuffer(string: "MSG a 1 10\r\n0123\r\n"))
        XCTAssertNil(try parser.next())
        parser.append(ByteBuffer(string: "6789"))
        XCTAssertNil(try parser.next(), "payload complete but its CRLF is not")
        parser.append(ByteBuffer(string: "\r\nPI"))
        XCTAssertEqual(try parser.next(), .message(NATSMessage(subject: "a", subscriptionID: 1, payload: ByteBuffer(string: "0123\r\n6789"))))
        XCTAssertNil(try parser.next())
        parser.append(ByteBuffer(string: "NG\r\n"))
        XCTAssertEqual(try parser.next(), .ping)
    }

    func testOperationsAreCaseInsensitiveAndFieldsMaySeparateByTabsAndRuns() throws {
        XCTAssertEqual(try parse(["ping\r\nmsg  a.b\t7   3\r\nabc\r\npong\n"]), [
            .ping, .message(NATSMessage(subject: "a.b", subscriptionID: 7, payload: ByteBuffer(string: "abc"))), .pong,
        ])
    }

    func testErrorWithoutQuotesKeepsItsText() throws {
        XCTAssertEqual(try parse(["-ERR Unknown Protocol Operation\r\n"]), [.error("Unknown Protocol Operation")])
    }

    // MARK: Bad input: each is a protocol error, never a crash or a wrong message

    private func assertProtocolError(_ stream: String, _ message: String, file: StaticString = #filePath, line: UInt = #line) {
        var parser = NATSParser(maxControlLine: 64, maxPayload: 1000)
        parser.append(ByteBuffer(string: stream))
        do {
            while try parser.next() != nil {}
            XCTFail("no error for \(message)", file: file, line: line)
        } catch {
            guard case .protocolError = error else { return XCTFail("\(error) for \(message)", file: file, line: line) }
        }
    }

    func testMalformedStreamsAreProtocolErrors() {
        assertProtocolError("HELLO\r\n", "an unknown operation")
        assertProtocolError("\r\n", "an empty line")
        assertProtocolError("MSG a 1 x\r\n", "a size that is not a number")
        assertProtocolError("MSG a 1 -3\r\n", "a negative size")
        assertProtocolError("MSG a x 3\r\nabc\r\n", "a subscription id that is not a number")
        assertProtocolError("MSG a 1\r\n", "too few fields")
        assertProtocolError("MSG a 1 b c 3\r\n", "too many fields")
        assertProtocolError("MSG a 1 3\r\nabcd\r\n", "a payload longer than announced")
        assertProtocolError("MSG a 1 99999999999999999999\r\n", "a size that would overflow")
        assertProtocolError("MSG a 1 1001\r\n", "a payload over the limit, before it is buffered")
        assertProtocolError("HMSG a 1 10 5\r\n", "headers larger than the whole message")
        assertProtocolError("INFO {not json\r\n", "INFO that is not JSON")
        assertProtocolError(String(repeating: "x", count: 65), "a control line over the limit without CRLF")
    }

    func testAPartialControlLineWithinTheLimitWaitsForMore() throws {
        var parser = NATSParser(maxControlLine: 64)
        parser.append(ByteBuffer(string: String(repeating: "M", count: 1)))
        XCTAssertNil(try parser.next())
        parser.append(ByteBuffer(string: "SG a 1 0\r\n\r\n"))
        XCTAssertEqual(try parser.next(), .message(NATSMessage(subject: "a", subscriptionID: 1, payload: ByteBuffer())))
    }
}
