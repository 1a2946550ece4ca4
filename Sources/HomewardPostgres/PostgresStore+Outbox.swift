import Foundation
import HomewardCore
import NIOCore
import PostgresNIO

/// The outbox as the delivery worker uses it: the statements both stores share (`OutboxEntry+Stored.swift`),
/// and this store's claim.
extension PostgresStore: PushOutboxStore {
    public func claimDueOutboxEntries(now: Int64, limit: Int, lease: Int64) async throws -> [OutboxEntry] {
        try await withConnection("outbox claim") { db, logger in
            // SKIP LOCKED: relays sharing the database claim disjoint entries instead of waiting for each other.
            try await Self.entries(db.query("""
                WITH due AS (
                    SELECT id FROM push_outbox
                    WHERE next_attempt_at <= \(now) AND (claimed_until IS NULL OR claimed_until <= \(now))
                    ORDER BY \(unescaped: OutboxEntry.dueOrder) LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED
                ), claimed AS (
                    UPDATE push_outbox AS o SET claimed_until = \(now + lease) FROM due WHERE o.id = due.id
                    RETURNING o.id
                )
                SELECT \(unescaped: OutboxEntry.storedColumns(of: "o"))
                FROM push_outbox AS o JOIN claimed ON claimed.id = o.id
                ORDER BY o.next_attempt_at, o.created_at, o.id
                """, logger: logger))
        }
    }

    public func pendingOutboxEntries(limit: Int) async throws -> [OutboxEntry] {
        try await withConnection("outbox read") { db, logger in
            try await Self.entries(db.query(PostgresQuery(stored: OutboxEntry.pending(limit: limit)), logger: logger))
        }
    }

    private static func entries(_ rows: PostgresRowSequence) async throws -> [OutboxEntry] {
        var entries: [OutboxEntry] = []
        for try await row in rows {
            if let entry = try OutboxEntry(stored: PostgresRandomAccessRow(row)) { entries.append(entry) }
        }
        return entries
    }

    public func nextOutboxAttempt() async throws -> Int64? {
        try await withConnection("outbox next") { db, logger in
            var next: Int64?
            for try await value in try await db.query(
                "SELECT MIN(GREATEST(next_attempt_at, COALESCE(claimed_until, 0))) FROM push_outbox", logger: logger
            ).decode(Int64?.self) { next = value }
            return next
        }
    }

    /// Claims on a shared database may be another relay's: they end with their lease (see the protocol).
    public func releaseClaimsAfterRestart() async throws {}

    public func removeOutboxEntry(id: String) async throws {
        try await withConnection("outbox remove") { db, logger in
            _ = try await db.query(PostgresQuery(stored: OutboxEntry.removal(id: id)), logger: logger)
        }
    }

    public func rescheduleOutboxEntry(id: String, at: Int64, attempts: Int) async throws {
        try await withConnection("outbox reschedule") { db, logger in
            _ = try await db.query(PostgresQuery(stored: OutboxEntry.rescheduling(id: id, at: at, attempts: attempts)), logger: logger)
        }
    }

    public func outboxDepth() async throws -> Int {
        try await withConnection("outbox depth") { db, logger in
            var count: Int64 = 0
            for try await value in try await db.query(PostgresQuery(unsafeSQL: OutboxEntry.depthSQL), logger: logger).decode(Int64.self) {
                count = value
            }
            return Int(count)
        }
    }
}
