import Foundation
import HomewardCore
import PostgresNIO

/// The outbox as the delivery worker uses it (the same statements as `SQLiteStore+Outbox`).
extension PostgresStore: PushOutboxStore {
    public func claimDueOutboxEntries(now: Int64, limit: Int, lease: Int64) async throws -> [OutboxEntry] {
        try await withConnection("outbox claim") { db, logger in
            // SKIP LOCKED: relays sharing the database claim disjoint entries instead of waiting for each other.
            try await Self.entries(db.query("""
                WITH due AS (
                    SELECT id FROM push_outbox
                    WHERE next_attempt_at <= \(now) AND (claimed_until IS NULL OR claimed_until <= \(now))
                    ORDER BY next_attempt_at, created_at, id LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED
                ), claimed AS (
                    UPDATE push_outbox AS o SET claimed_until = \(now + lease) FROM due WHERE o.id = due.id
                    RETURNING o.id
                )
                SELECT o.id, o.kind, o.subscription_id, o.endpoint, o.p256dh, o.auth, o.payload, o.urgency, o.topic, o.ttl,
                       o.alarm_id, o.created_at, o.next_attempt_at, o.attempts
                FROM push_outbox AS o JOIN claimed ON claimed.id = o.id
                ORDER BY o.next_attempt_at, o.created_at, o.id
                """, logger: logger))
        }
    }

    public func pendingOutboxEntries(limit: Int) async throws -> [OutboxEntry] {
        try await withConnection("outbox read") { db, logger in
            try await Self.entries(db.query("""
                SELECT id, kind, subscription_id, endpoint, p256dh, auth, payload, urgency, topic, ttl, alarm_id,
                       created_at, next_attempt_at, attempts
                FROM push_outbox ORDER BY next_attempt_at, created_at, id LIMIT \(Int64(limit))
                """, logger: logger))
        }
    }

    private static func entries(_ rows: PostgresRowSequence) async throws -> [OutboxEntry] {
        var entries: [OutboxEntry] = []
        for try await (id, kind, subscription, endpoint, p256dh, auth, payload, urgency, topic, ttl, alarm, created, next, attempts)
            in rows.decode((String, String, String?, String, String, String, Data, String, String?, Int64, String?, Int64, Int64, Int64).self)
        {
            guard let kind = OutboxEntry.Kind(rawValue: kind) else { continue }
            entries.append(OutboxEntry(
                id: id, kind: kind, subscriptionId: subscription, endpoint: endpoint, p256dh: p256dh, auth: auth,
                payload: [UInt8](payload), urgency: urgency, topic: topic, ttl: Int(ttl), alarmId: alarm, createdAt: created,
                nextAttemptAt: next, attempts: Int(attempts)))
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
            _ = try await db.query("DELETE FROM push_outbox WHERE id = \(id)", logger: logger)
        }
    }

    public func rescheduleOutboxEntry(id: String, at: Int64, attempts: Int) async throws {
        try await withConnection("outbox reschedule") { db, logger in
            _ = try await db.query("UPDATE push_outbox SET next_attempt_at = \(at), attempts = \(Int64(attempts)), claimed_until = NULL WHERE id = \(id)",
                               logger: logger)
        }
    }

    public func outboxDepth() async throws -> Int {
        try await withConnection("outbox depth") { db, logger in
            var count: Int64 = 0
            for try await value in try await db.query("SELECT COUNT(*) FROM push_outbox", logger: logger).decode(Int64.self) {
                count = value
            }
            return Int(count)
        }
    }
}
