/// The outbox's rows and the statements both stores run on them (`SQLiteStore+Outbox`,
/// `PostgresStore+Outbox`). What differs stays in each store: claiming (PostgreSQL's `FOR UPDATE SKIP
/// LOCKED` for relays sharing the database, SQLite's select then update in one write transaction) and the
/// next attempt's time (`MAX` of two values is SQLite's `MAX`, PostgreSQL's `GREATEST`).
extension OutboxEntry {
    /// The columns `init(stored:)` reads, in its order; `table` qualifies each (a join's alias).
    public static func storedColumns(of table: String? = nil) -> String {
        let prefix = table.map { $0 + "." } ?? ""
        return ["id", "kind", "subscription_id", "endpoint", "p256dh", "auth", "payload", "urgency", "topic", "ttl", "alarm_id",
                "created_at", "next_attempt_at", "attempts"].map { prefix + $0 }.joined(separator: ", ")
    }

    /// The order entries come due in (and are listed in).
    public static let dueOrder = "next_attempt_at, created_at, id"

    /// The entry a row of `storedColumns` holds, nil for a kind this relay does not know (left in the outbox).
    public init?<Row: StoredRow>(stored row: Row) throws {
        guard let kind = Kind(rawValue: try row.text(1)) else { return nil }
        self.init(id: try row.text(0), kind: kind, subscriptionId: try row.optionalText(2), endpoint: try row.text(3),
                  p256dh: try row.text(4), auth: try row.text(5), payload: try row.bytes(6), urgency: try row.text(7),
                  topic: try row.optionalText(8), ttl: Int(try row.int(9)), alarmId: try row.optionalText(10),
                  createdAt: try row.int(11), nextAttemptAt: try row.int(12), attempts: Int(try row.int(13)))
    }

    /// Up to `limit` entries in the order they come due, claimed or not.
    public static func pending(limit: Int) -> StoredStatement {
        StoredStatement("SELECT \(storedColumns()) FROM push_outbox ORDER BY \(dueOrder) LIMIT ?", [.int(Int64(limit))])
    }

    public static func removal(id: String) -> StoredStatement {
        StoredStatement("DELETE FROM push_outbox WHERE id = ?", [.text(id)])
    }

    /// The next attempt at `at`, after `attempts` attempts, with the claim released.
    public static func rescheduling(id: String, at: Int64, attempts: Int) -> StoredStatement {
        StoredStatement("UPDATE push_outbox SET next_attempt_at = ?, attempts = ?, claimed_until = NULL WHERE id = ?",
                        [.int(at), .int(Int64(attempts)), .text(id)])
    }

    public static let depthSQL = "SELECT COUNT(*) FROM push_outbox"
}
