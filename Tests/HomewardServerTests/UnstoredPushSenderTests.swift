import CoreMetrics
import Crypto
import Foundation
import HomewardCore
@testable import HomewardServer
import HomewardStorage
import HomewardWebPush
import Logging
import XCTest

/// The pushes and webhook calls of an alarm delivered while storage fails: sent from memory, retried,
/// never through the outbox.
final class UnstoredPushSenderTests: XCTestCase {
    private let transport = PushDeliveryWorkerTests.ScriptedTransport()
    private let receiverKey = P256.KeyAgreement.PrivateKey()

    private func sender(maxAge: Int64 = 3_600_000) throws -> (UnstoredPushSender, SQLiteStore) {
        let store = try SQLiteStore.inMemory()
        let metrics = PushMetrics(factory: NOOPMetricsHandler.instance)
        let worker = PushDeliveryWorker(
            store: store, sender: transport,
            credentials: .init(vapidKey: .generate(), subject: try VAPIDSubject("mailto:ops@example.org"), webhookSecret: "s3cret"),
            maxAge: maxAge, metrics: metrics, logger: Logger(label: "test"))
        return (UnstoredPushSender(worker: worker, sender: transport, maxAge: maxAge, metrics: metrics, logger: Logger(label: "test"),
                                   clock: Relay.systemMillis), store)
    }

    private func entry(_ id: String, kind: OutboxEntry.Kind = .webPush) -> OutboxEntry {
        OutboxEntry(id: id, kind: kind, subscriptionId: kind == .webPush ? "p_1" : nil, endpoint: "https://push.example.net/\(id)",
                    p256dh: Base64URL.encode(receiverKey.publicKey.x963Representation), auth: Base64URL.encode([UInt8](repeating: 7, count: 16)),
                    payload: Array(#"{"type":"alarm","stored":false}"#.utf8), urgency: "high", topic: "t1", ttl: 3600, alarmId: "a_1",
                    createdAt: Relay.systemMillis())
    }

    func testAPushIsRetriedFromMemoryUntilDeliveredAndNothingGoesIntoTheOutbox() async throws {
        let (sender, store) = try sender()
        transport.state.withLock { $0.script = [.retry(status: 503, after: 0.02), .retry(status: nil, after: 0.02)] }
        await sender.deliver([entry("o_push")])
        XCTAssertEqual(transport.sent.map(\.url.lastPathComponent), ["o_push", "o_push", "o_push"], "tried until delivered")
        XCTAssertEqual(transport.sent.last?.header("Urgency"), "high")
        let outbox = try await store.pendingOutboxEntries(limit: 10)
        XCTAssertTrue(outbox.isEmpty)
    }

    func testWebhookCallsGoInOrderSignedAndARefusalIsNotRetried() async throws {
        let (sender, _) = try sender()
        transport.state.withLock { $0.script = [.failed(status: 400)] }
        await sender.deliver([entry("o_1", kind: .webhook), entry("o_2", kind: .webhook)])
        XCTAssertEqual(transport.sent.map(\.url.lastPathComponent), ["o_1", "o_2"], "a refused call is not tried again")
        let first = try XCTUnwrap(transport.sent.first)
        XCTAssertEqual(first.header(WebhookSignature.deliveryHeaderName), "o_1")
        // Signed with the time of the attempt (read back from the header) and the delivery id.
        let signature = try XCTUnwrap(first.header(WebhookSignature.headerName))
        let time = try XCTUnwrap(signature.split(separator: ",").first { $0.hasPrefix("t=") }.flatMap { Int64($0.dropFirst(2)) })
        XCTAssertEqual(signature, WebhookSignature.value(body: first.body, secret: "s3cret", timestamp: time, deliveryId: "o_1"))
    }

    func testAPushStillFailingPastItsMaxAgeIsDropped() async throws {
        let (sender, _) = try sender(maxAge: 1_000)
        transport.state.withLock { $0.script = [.retry(status: 503, after: 5)] }
        await sender.deliver([entry("o_old")])
        XCTAssertEqual(transport.sent.count, 1, "a retry that would land past the max age is not waited for")
    }
}
