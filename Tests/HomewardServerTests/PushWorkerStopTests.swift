import Foundation
import HomewardCore
import HomewardCoreTestSupport
@testable import HomewardServer
import HomewardTestSupport
import HomewardWebPush
import CoreMetrics
import XCTest

/// The outbox worker stopped (its task cancelled: the relay's graceful shutdown) while it reads the store: the
/// read ends with the cancellation, which is no store failure and is not reported as one.
final class PushWorkerStopTests: XCTestCase {
    /// An outbox whose claim waits until its task is cancelled (SQLite's reads and PostgreSQL's calls end so).
    final class ClaimUntilCancelled: PushOutboxStore {
        let gate = LoadGate()
        func claimDueOutboxEntries(now: Int64, limit: Int, lease: Int64) async throws -> [OutboxEntry] {
            try await gate.hold()
            return []
        }
        func releaseClaimsAfterRestart() async throws {}
        func pendingOutboxEntries(limit: Int) async throws -> [OutboxEntry] { [] }
        func nextOutboxAttempt() async throws -> Int64? { nil }
        func removeOutboxEntry(id: String) async throws {}
        func rescheduleOutboxEntry(id: String, at: Int64, attempts: Int) async throws {}
        func outboxDepth() async throws -> Int { 0 }
    }

    func testAWorkerStoppedDuringAReadStopsWithoutReportingAStoreFailure() async throws {
        let log = LogRecorder()
        let store = ClaimUntilCancelled()
        let worker = PushDeliveryWorker(
            store: store, sender: PushDeliveryWorkerTests.ScriptedTransport(),
            credentials: .init(vapidKey: .generate(), subject: try VAPIDSubject("mailto:ops@example.org"), webhookSecret: "s3cret"),
            maxAge: 3_600_000, metrics: PushMetrics(factory: NOOPMetricsHandler.instance), logger: log.logger)
        let running = Task { await worker.run(forgetSubscription: { _ in }) }
        await store.gate.loadIsHeld()
        running.cancel()
        try await withTimeout(30, "the worker to stop") { await running.value }
        XCTAssertEqual(log.lines(at: .warning), [], "a stop is not a store that cannot be read")
    }
}
