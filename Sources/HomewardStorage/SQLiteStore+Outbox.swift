import Foundation
import GRDB
import HomewardCore

/// The outbox as the delivery worker uses it; entries are added by `StoreChange.enqueueOutbox`, read and
/// changed by the statements both stores share (`OutboxEntry+Stored.swift`).
extension SQLiteStore: PushOutboxStore {
    /// One store, one relay: the due entries are selected and claimed in one write transaction.
    public func claimDueOutboxEntries(now: Int64, limit: Int, lease: Int64) async throws -> [OutboxEntry] {
        try await writer.write { db in
            let due = try Self.entries(db, StoredStatement("""
                SELECT \(OutboxEntry.storedColumns()) FROM push_outbox
                WHERE next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until <= ?)
                ORDER BY \(OutboxEntry.dueOrder) LIMIT ?
                """, [.int(now), .int(now), .int(Int64(limit))]))
            for entry in due {
                try db.execute(sql: "UPDATE push_outbox SET claimed_until = ? WHERE id = ?", arguments: [now + lease, entry.id])
            }
            return due
        }
    }

    public func pendingOutboxEntries(limit: Int) async throws -> [OutboxEntry] {
        try await writer.read { db in try Self.entries(db, OutboxEntry.pending(limit: limit)) }
    }

    private static func entries(_ db: Database, _ query: StoredStatement) throws -> [OutboxEntry] {
        try Row.fetchAll(db, sql: query.sql, arguments: StatementArguments(query.arguments.map(\.databaseValue)))
            .compactMap { try OutboxEntry(stored: $0) }
    }

    public func nextOutboxAttempt() async throws -> Int64? {
        try await writer.read { db in
            try Int64.fetchOne(db, sql: "SELECT MIN(MAX(next_attempt_at, COALESCE(claimed_until, 0))) FROM push_outbox")
        }
    }

    public func releaseClaimsAfterRestart() async throws {
        try await writer.write { db in try db.execute(sql: "UPDATE push_outbox SET claimed_until = NULL WHERE claimed_until IS NOT NULL") }
    }

    public func removeOutboxEntry(id: String) async throws {
        try await writer.write { db in try OutboxEntry.removal(id: id).execute(in: db) }
    }

    public func rescheduleOutboxEntry(id: String, at: Int64, attempts: Int) async throws {
        try await writer.write { db in try OutboxEntry.rescheduling(id: id, at: at, attempts: attempts).execute(in: db) }
    }

    public func outboxDepth() async throws -> Int {
        try await writer.read { db in try Int.fetchOne(db, sql: OutboxEntry.depthSQL) ?? 0 }
    }
}
