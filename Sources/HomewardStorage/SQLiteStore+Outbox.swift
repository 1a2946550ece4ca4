import Foundation
import GRDB
import HomewardCore

/// The outbox as the delivery worker uses it; entries are added by `StoreChange.enqueueOutbox`.
extension SQLiteStore: PushOutboxStore {
    public func claimDueOutboxEntries(now: Int64, limit: Int, lease: Int64) async throws -> [OutboxEntry] {
        try await writer.write { db in
            let due = try Self.entries(
                db, where: "WHERE next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until <= ?)", [now, now], limit: limit)
            for entry in due {
                try db.execute(sql: "UPDATE push_outbox SET claimed_until = ? WHERE id = ?", arguments: [now + lease, entry.id])
            }
            return due
        }
    }

    public func pendingOutboxEntries(limit: Int) async throws -> [OutboxEntry] {
        try await writer.read { db in try Self.entries(db, where: "", [], limit: limit) }
    }

    private static func entries(_ db: Database, where condition: String, _ arguments: StatementArguments, limit: Int) throws -> [OutboxEntry] {
        try Row.fetchAll(
            db, sql: """
                SELECT id, kind, subscription_id, endpoint, p256dh, auth, payload, urgency, topic, ttl, alarm_id,
                       created_at, next_attempt_at, attempts
                FROM push_outbox \(condition) ORDER BY next_attempt_at, created_at, id LIMIT ?
                """, arguments: arguments + [limit]
        ).compactMap { row in
            guard let kind = OutboxEntry.Kind(rawValue: row["kind"]) else { return nil }
            let payload: Data = row["payload"]
            return OutboxEntry(
                id: row["id"], kind: kind, subscriptionId: row["subscription_id"], endpoint: row["endpoint"],
                p256dh: row["p256dh"], auth: row["auth"], payload: [UInt8](payload), urgency: row["urgency"],
                topic: row["topic"], ttl: row["ttl"], alarmId: row["alarm_id"], createdAt: row["created_at"],
                nextAttemptAt: row["next_attempt_at"], attempts: row["attempts"])
        }
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
        try await writer.write { db in try db.execute(sql: "DELETE FROM push_outbox WHERE id = ?", arguments: [id]) }
    }

    public func rescheduleOutboxEntry(id: String, at: Int64, attempts: Int) async throws {
        try await writer.write { db in
            try db.execute(sql: "UPDATE push_outbox SET next_attempt_at = ?, attempts = ?, claimed_until = NULL WHERE id = ?", arguments: [at, attempts, id])
        }
    }

    public func outboxDepth() async throws -> Int {
        try await writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM push_outbox") ?? 0 }
    }
}
