@testable import HomewardNATS
import NIOCore
import XCTest

final class NATSClientCommandTests: XCTestCase {
    private func text(_ command: NATSClientCommand) -> String { String(buffer: command.encoded()) }

    func testCommandsAreWrittenAsTheProtocolSpellsThem() {
        XCTAssertEqual(text(.publish(subject: "a.b", replyTo: nil, payload: ByteBuffer(string: "hi\r\nthere"))), "PUB a.b 9\r\nhi\r\nthere\r\n")
        XCTAssertEqual(text(.publish(subject: "a", replyTo: "_INBOX.x.1", payload: ByteBuffer())), "PUB a _INBOX.x.1 0\r\n\r\n")
        XCTAssertEqual(text(.subscribe(subject: "a.*", queueGroup: nil, subscriptionID: 4)), "SUB a.* 4\r\n")
        XCTAssertEqual(text(.subscribe(subject: "jobs", queueGroup: "workers", subscriptionID: 5)), "SUB jobs workers 5\r\n")
        XCTAssertEqual(text(.unsubscribe(subscriptionID: 5, maxMessages: nil)), "UNSUB 5\r\n")
        XCTAssertEqual(text(.unsubscribe(subscriptionID: 5, maxMessages: 3)), "UNSUB 5 3\r\n")
        XCTAssertEqual(text(.ping), "PING\r\n")
        XCTAssertEqual(text(.pong), "PONG\r\n")
    }

    func testConnectSendsNonVerboseNonPedanticWithoutHeadersAndCredentialsOnlyWhenGiven() throws {
        let line = text(.connect(NATSConnectOptions(name: "node-1")))
        XCTAssertTrue(line.hasPrefix("CONNECT {") && line.hasSuffix("}\r\n"), line)
        let json = try JSONSerialization.jsonObject(with: Data(line.utf8.dropFirst(8).dropLast(2))) as? [String: Any]
        XCTAssertEqual(json?["verbose"] as? Bool, false)
        XCTAssertEqual(json?["pedantic"] as? Bool, false)
        XCTAssertEqual(json?["headers"] as? Bool, false)
        XCTAssertEqual(json?["name"] as? String, "node-1")
        XCTAssertNil(json?["user"])
        let withUser = text(.connect(NATSConnectOptions(user: "relay", pass: "s3cret")))
        XCTAssertTrue(withUser.contains("\"user\":\"relay\"") && withUser.contains("\"pass\":\"s3cret\""), withUser)
    }

    // MARK: Subjects and URLs: bad input is refused before anything is sent

    func testSubjectsWithWhitespaceEmptyTokensOrMisplacedWildcardsAreRefused() {
        for subject in ["", "a b", "a\tb", "a\r\nPUB x 1", "a..b", ".a", "a.", "a.>.b"] {
            XCTAssertThrowsError(try NATSSubject.validate(subject, wildcards: true), subject) { error in
                XCTAssertEqual(error as? NATSError, .invalidSubject(subject))
            }
        }
        XCTAssertThrowsError(try NATSSubject.validate("a.*", wildcards: false), "publish to a wildcard")
        XCTAssertThrowsError(try NATSSubject.validate("a.>", wildcards: false), "publish to a wildcard")
        XCTAssertNoThrow(try NATSSubject.validate("a.*.c.>", wildcards: true))
        XCTAssertNoThrow(try NATSSubject.validate("walker.ann-2_x", wildcards: false))
        XCTAssertThrowsError(try NATSSubject.validateQueueGroup("two words"))
        XCTAssertThrowsError(try NATSSubject.validateQueueGroup(""))
    }

    func testServerURLs() throws {
        XCTAssertEqual(try NATSServerAddress(url: "nats://127.0.0.1:4223"), NATSServerAddress(host: "127.0.0.1", port: 4223))
        XCTAssertEqual(try NATSServerAddress(url: "nats://bus.example"), NATSServerAddress(host: "bus.example", port: 4222))
        XCTAssertEqual(try NATSServerAddress(url: "nats://relay:p%40ss:w@h:1/"),
                       NATSServerAddress(host: "h", port: 1, user: "relay", password: "p%40ss:w"))
        XCTAssertEqual(try NATSServerAddress(url: "nats://[::1]:4222"), NATSServerAddress(host: "::1", port: 4222))
        XCTAssertEqual(NATSServerAddress(host: "h", user: "u", password: "secret").description, "nats://u@h:4222", "no password in logs")
        for bad in ["tcp://h:4222", "nats://", "nats://h:0", "nats://h:99999", "nats://h:port", "nats://user@h", "nats://h/x", "h:4222"] {
            XCTAssertThrowsError(try NATSServerAddress(url: bad), bad) { XCTAssertEqual($0 as? NATSError, .invalidURL(bad)) }
        }
    }

    func testBackoffDoublesUpToTheCapAndJitterOnlyShortensIt() {
        let backoff = NATSReconnectBackoff(firstDelay: .milliseconds(100), maximumDelay: .seconds(1), jitter: 0.5)
        XCTAssertEqual(backoff.delay(attempt: 0, random: 0), .milliseconds(100))
        XCTAssertEqual(backoff.delay(attempt: 1, random: 0), .milliseconds(200))
        XCTAssertEqual(backoff.delay(attempt: 3, random: 0), .milliseconds(800))
        XCTAssertEqual(backoff.delay(attempt: 4, random: 0), .seconds(1))
        XCTAssertEqual(backoff.delay(attempt: 1000, random: 0), .seconds(1))
        XCTAssertEqual(backoff.delay(attempt: 0, random: 1), .milliseconds(50))
    }
}
