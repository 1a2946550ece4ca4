import HomewardCore
import PostgresNIO

/// Secrets shared by every relay on this database (the VAPID key), in `relay_secrets`.
extension PostgresStore {
    /// Relays starting together race here: each inserts its own candidate, `ON CONFLICT DO NOTHING`
    /// keeps the first committed one (a second insert waits for the first to commit, then does nothing),
    /// and the read that follows, a statement of its own, sees that one on every relay.
    public func sharedSecret(_ name: String, storingIfAbsent candidate: String?) async throws -> String? {
        try await withConnection("secret lookup") { db, logger in
            if let candidate {
                try await db.query("""
                    INSERT INTO relay_secrets (name, value, created_at)
                    VALUES (\(name), \(candidate), (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT)
                    ON CONFLICT (name) DO NOTHING
                    """, logger: logger)
            }
            return try await Self.single(db.query("SELECT value FROM relay_secrets WHERE name = \(name)", logger: logger))
        }
    }
}
