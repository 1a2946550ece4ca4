import Crypto
import Foundation
import HomewardCore
@testable import HomewardServer
import HomewardStorage
import HomewardWebPush
import Logging
import CoreMetrics
import Synchronization
import XCTest

/// The outbox worker's decisions, one pass at a time, on a real (in-memory) store with a scripted
/// push service and a clock the test moves.
final class PushDeliveryWorkerTests: XCTestCase {
    /// Answers each request with the next scripted outcome (201 when the script is empty) and keeps it.
    final class ScriptedTransport: PushTransport {
        let state = Mutex<(script: [DeliveryOutcome], sent: [PushRequest])>(([], []))
        func send(_ request: PushRequest) async -> DeliveryOutcome {
            state.withLock { state in
                state.sent.append(request)
                return state.script.isEmpty ? .delivered(status: 201) : state.script.removeFirst()
            }
        }
        func shutdown() async throws {}
        var sent: [PushRequest] { state.withLock { $0.sent } }
    }

    final class ManualClock: Sendable {
        let millis = Mutex<Int64>(1_000_000)
        func advance(by ms: Int64) { millis.withLock { $0 += ms } }
        var now: Int64 { millis.withLock { $0 } }
    }

    private let clock = ManualClock()
    private let transport = ScriptedTransport()
    final class Forgotten: Sendable {
        let ids = Mutex<[String]>([])
    }

    private let forgotten = Forgotten()
    private var store: SQLiteStore!
    private var worker: PushDeliveryWorker!
    private let receiverKey = P256.KeyAgreement.PrivateKey()

    override func setUp() async throws {
        store = try SQLiteStore.inMemory()
        let clock = self.clock
        worker = PushDeliveryWorker(
            store: store, sender: transport,
            credentials: .init(vapidKey: .generate(), subject: try VAPIDSubject("mailto:ops@example.org"), webhookSecret: "s3cret"),
            maxAge: 3_600_000, metrics: PushMetrics(factory: NOOPMetricsHandler.instance), logger: Logger(label: "test"),
            clock: { clock.now })
        let forgotten = self.forgotten
        await worker.setForget { id in forgotten.ids.withLock { $0.append(id) } }
    }

    private func enqueue(_ id: String, kind: OutboxEntry.Kind = .webPush, at: Int64? = nil) async throws {
        let entry = OutboxEntry(
            id: id, kind: kind, subscriptionId: kind == .webPush ? "p_1" : nil, endpoint: "https://push.example.net/\(id)",
            p256dh: Base64URL.encode(receiverKey.publicKey.x963Representation), auth: Base64URL.encode([UInt8](repeating: 7, count: 16)),
            payload: Array(#"{"type":"alarm"}"#.utf8), urgency: "high", topic: "t1", ttl: 3600, alarmId: "a_1", createdAt: at ?? clock.now)
        try await store.apply([.enqueueOutbox(entry)])
    }

    private var waiting: [OutboxEntry] {
        get async throws { try await store.pendingOutboxEntries(limit: 100) }
    }

    func testADeliveredPushIsRemovedAndCarriesTheHeadersOfItsEntry() async throws {
        try await enqueue("o_1")
        let attempted = try await worker.deliverDue()
        XCTAssertEqual(attempted, 1)
        let request = try XCTUnwrap(transport.sent.first)
        XCTAssertEqual(request.url.absoluteString, "https://push.example.net/o_1")
        XCTAssertEqual(request.header("TTL"), "3600")
        XCTAssertEqual(request.header("Urgency"), "high")
        XCTAssertEqual(request.header("Topic"), "t1")
        XCTAssertEqual(request.header("Content-Encoding"), "aes128gcm")
        let left = try await waiting
        XCTAssertTrue(left.isEmpty)
    }

    func testRetryAfterIsHonouredThenBackoffDoublesAndAnHourOldPushIsDropped() async throws {
        transport.state.withLock { $0.script = [.retry(status: 503, after: 7), .retry(status: 429, after: nil), .retry(status: 500, after: nil)] }
        try await enqueue("o_1")
        _ = try await worker.deliverDue()
        var left = try await waiting
        XCTAssertEqual(left.map(\.nextAttemptAt), [clock.now + 7_000], "Retry-After: 7")
        clock.advance(by: 6_999)
        let early = try await worker.deliverDue()
        XCTAssertEqual(early, 0, "not before Retry-After")
        clock.advance(by: 1)
        _ = try await worker.deliverDue()
        left = try await waiting
        XCTAssertEqual(left.first?.attempts, 2)
        XCTAssertEqual(left.first?.nextAttemptAt, clock.now + 2_000, "second attempt without Retry-After: 2 s")
        clock.advance(by: 2_000)
        _ = try await worker.deliverDue()
        left = try await waiting
        XCTAssertEqual(left.first?.nextAttemptAt, clock.now + 4_000)
        XCTAssertEqual(transport.sent.count, 3)

        clock.advance(by: 3_600_000)
        let late = try await worker.deliverDue()
        XCTAssertEqual(late, 1)
        XCTAssertEqual(transport.sent.count, 3, "an hour-old push is dropped, not sent")
        left = try await waiting
        XCTAssertTrue(left.isEmpty)
    }

    func testARetryThatWouldLandPastTheHourIsDroppedNow() async throws {
        transport.state.withLock { $0.script = [.retry(status: 503, after: 7_200)] }
        try await enqueue("o_1")
        _ = try await worker.deliverDue()
        let left = try await waiting
        XCTAssertTrue(left.isEmpty)
    }

    func testGoneForgetsTheSubscriptionAndRefusedIsDropped() async throws {
        transport.state.withLock { $0.script = [.gone(status: 410), .failed(status: 400)] }
        try await enqueue("o_1")
        _ = try await worker.deliverDue()
        XCTAssertEqual(forgotten.ids.withLock { $0 }, ["p_1"])
        try await enqueue("o_2")
        _ = try await worker.deliverDue()
        let left = try await waiting
        XCTAssertTrue(left.isEmpty)
        XCTAssertEqual(forgotten.ids.withLock { $0 }, ["p_1"], "a 400 does not forget the subscription")
    }

    func testWebhookCallsAreSignedAndSentInTheOrderTheyWereQueued() async throws {
        for n in 1...5 { try await enqueue("o_\(n)", kind: .webhook, at: clock.now + Int64(n) - 10) }
        _ = try await worker.deliverDue()
        XCTAssertEqual(transport.sent.map(\.url.lastPathComponent), (1...5).map { "o_\($0)" })
        let first = try XCTUnwrap(transport.sent.first)
        XCTAssertEqual(first.header(WebhookSignature.headerName), WebhookSignature.value(body: first.body, secret: "s3cret"))
        XCTAssertNil(first.header("Authorization"), "the webhook gets no VAPID token")
    }
}
