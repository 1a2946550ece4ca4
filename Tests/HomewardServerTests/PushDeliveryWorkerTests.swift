import Crypto
import Foundation
import HomewardCore
import HomewardCoreTestSupport
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
        // Signed with the time of the attempt (seconds) and the entry's id, which is also its delivery header.
        XCTAssertEqual(first.header(WebhookSignature.headerName),
                       WebhookSignature.value(body: first.body, secret: "s3cret", timestamp: clock.now / 1000, deliveryId: "o_1"))
        XCTAssertEqual(first.header(WebhookSignature.deliveryHeaderName), "o_1")
        XCTAssertEqual(Set(transport.sent.compactMap { $0.header(WebhookSignature.deliveryHeaderName) }).count, 5, "one id per delivery")
        XCTAssertNil(first.header("Authorization"), "the webhook gets no VAPID token")
    }

    func testARetriedWebhookCallKeepsItsDeliveryIdAndIsSignedAgainWithItsNewTime() async throws {
        transport.state.withLock { $0.script = [.retry(status: 503, after: 30)] }
        try await enqueue("o_1", kind: .webhook)
        _ = try await worker.deliverDue()
        clock.advance(by: 30_000)
        _ = try await worker.deliverDue()
        let (first, second) = (transport.sent[0], transport.sent[1])
        XCTAssertEqual(first.header(WebhookSignature.deliveryHeaderName), "o_1")
        XCTAssertEqual(second.header(WebhookSignature.deliveryHeaderName), "o_1")
        XCTAssertEqual(second.header(WebhookSignature.headerName),
                       WebhookSignature.value(body: second.body, secret: "s3cret", timestamp: clock.now / 1000, deliveryId: "o_1"))
        XCTAssertNotEqual(first.header(WebhookSignature.headerName), second.header(WebhookSignature.headerName))
    }

    /// The worker asks where to connect right before each push: a pinned address goes into the request, a
    /// host that now resolves to a special-purpose address drops the push unsent, one that resolves to
    /// nothing is tried again later. Webhook calls (the operator's own URL) are not asked about.
    func testEachPushIsVettedRightBeforeItIsSent() async throws {
        final class Answers: Sendable {
            let next = Mutex<[PushEndpointPolicy.SendTarget]>([.connect("93.184.215.14"), .refused("rebound to 10.0.0.1"), .unresolved])
            let asked = Mutex<[String]>([])
        }
        let answers = Answers()
        let clock = self.clock
        let worker = PushDeliveryWorker(
            store: store, sender: transport,
            credentials: .init(vapidKey: .generate(), subject: try VAPIDSubject("mailto:ops@example.org"), webhookSecret: "s3cret"),
            maxAge: 3_600_000, metrics: PushMetrics(factory: NOOPMetricsHandler.instance), logger: Logger(label: "test"),
            clock: { clock.now },
            target: { url in
                answers.asked.withLock { $0.append(url.lastPathComponent) }
                return answers.next.withLock { $0.removeFirst() }
            })
        try await enqueue("o_1")
        _ = try await worker.deliverDue()
        XCTAssertEqual(transport.sent.map(\.connectTo), ["93.184.215.14"])
        try await enqueue("o_2")
        _ = try await worker.deliverDue()
        XCTAssertEqual(transport.sent.count, 1, "a push to a host that rebound is not sent")
        var left = try await waiting
        XCTAssertTrue(left.isEmpty, "and dropped")
        try await enqueue("o_3")
        _ = try await worker.deliverDue()
        left = try await waiting
        XCTAssertEqual(left.map(\.id), ["o_3"])
        XCTAssertEqual(left.first?.attempts, 1, "a host that resolves to nothing now is tried again")
        try await enqueue("o_4", kind: .webhook)
        _ = try await worker.deliverDue()
        XCTAssertEqual(answers.asked.withLock { $0 }, ["o_1", "o_2", "o_3"])
    }
}
