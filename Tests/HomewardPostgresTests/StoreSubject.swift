import Foundation
import GRDB
import HomewardCore
import HomewardPostgresTestSupport
import PostgresNIO
@testable import HomewardPostgres
@testable import HomewardStorage
import Testing

/// One kind of `RelayStore` under the shared store suite, on a fresh database of its own, with the few
/// looks at raw storage the suite needs (each store answers them in its own SQL).
protocol StoreSubject: Sendable {
    /// A store on this subject's database: every store it opens sees what the earlier ones wrote.
    func open() async throws -> any RelayStore
    func close(_ store: any RelayStore) async throws
    /// The stored friendship rows as "user_a|user_b", sorted.
    func friendshipRows(_ store: any RelayStore) async throws -> [String]
    /// When `username` acknowledged `alarm`, as stored.
    func ackedAt(_ store: any RelayStore, alarm: String, username: String) async throws -> Int64?
    /// "id ended_at end_reason" of every ended session and alarm, sorted by id.
    func endedRows(_ store: any RelayStore) async throws -> [String]
    /// Runs raw SQL statements (the same text in both dialects), outside the store's rules.
    func execute(_ store: any RelayStore, _ statements: [String]) async throws
    /// Undoes the migration that bound push subscriptions to sign-ins, so the next open applies it to
    /// rows stored as an older relay stored them.
    var pushSignInsRewind: [String] { get }
    /// How the store would run `statement`, one line per step (SQLite's EXPLAIN QUERY PLAN details; PostgreSQL's
    /// EXPLAIN with sequential scans priced out, so that a table read whole is read so for want of a usable index).
    func plan(_ store: any RelayStore, _ statement: StoredStatement) async throws -> [String]
    /// Removes the database.
    func remove() async
}

/// The stores the shared suite runs against.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// A subject on a new, empty database. With HOMEWARD_SKIP_POSTGRES=1 the PostgreSQL case is cancelled
    /// (reported as skipped); without PostgreSQL installed it fails.
    func subject() async throws -> any StoreSubject {
        switch self {
        case .sqlite:
            return SQLiteSubject()
        case .postgres:
            let server = try PostgresServer.requireCurrent()
            return PostgresSubject(location: try server.createDatabase(), server: server)
        }
    }
}

/// A file in a directory that does not exist yet, to check the store creates it.
struct SQLiteSubject: StoreSubject {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-sqlite-\(UUID().uuidString)")
    var path: String { directory.appendingPathComponent("data/relay.sqlite").path }

    func open() async throws -> any RelayStore { try SQLiteStore(path: path) }

    func close(_ store: any RelayStore) async throws { try sqlite(store).close() }

    func friendshipRows(_ store: any RelayStore) async throws -> [String] {
        try sqlite(store).inspect { db in
            try String.fetchAll(db, sql: "SELECT user_a || '|' || user_b FROM friendships ORDER BY user_a, user_b")
        }
    }

    func ackedAt(_ store: any RelayStore, alarm: String, username: String) async throws -> Int64? {
        try sqlite(store).inspect { db in
            try Int64.fetchOne(db, sql: "SELECT acked_at FROM alarm_recipients WHERE alarm_id = ? AND username = ?",
                               arguments: [alarm, username])
        }
    }

    func endedRows(_ store: any RelayStore) async throws -> [String] {
        try sqlite(store).inspect { db in
            try Row.fetchAll(db, sql: """
                SELECT id, ended_at, end_reason FROM sessions WHERE ended_at IS NOT NULL
                UNION ALL SELECT id, ended_at, end_reason FROM alarms WHERE ended_at IS NOT NULL
                ORDER BY id
                """).map { "\($0["id"] as String) \($0["ended_at"] as Int64) \($0["end_reason"] as String)" }
        }
    }

    func execute(_ store: any RelayStore, _ statements: [String]) async throws {
        try sqlite(store).inspect { db in for sql in statements { try db.execute(sql: sql) } }
    }

    var pushSignInsRewind: [String] {
        ["DROP INDEX push_subscriptions_by_endpoint", "DROP INDEX push_subscriptions_by_token",
         "ALTER TABLE push_subscriptions DROP COLUMN token_hash", "DELETE FROM grdb_migrations WHERE identifier = 'v8-push-sign-ins'"]
    }

    func plan(_ store: any RelayStore, _ statement: StoredStatement) async throws -> [String] {
        try sqlite(store).inspect { db in
            try StoredStatement("EXPLAIN QUERY PLAN " + statement.sql, statement.arguments).fetchAll(in: db).map { $0[3] as String }
        }
    }

    func remove() async { try? FileManager.default.removeItem(at: directory) }

    private func sqlite(_ store: any RelayStore) throws -> SQLiteStore {
        try #require(store as? SQLiteStore)
    }
}

/// A database of its own on the suite's PostgreSQL server.
struct PostgresSubject: StoreSubject {
    let location: PostgresLocation
    let server: PostgresServer

    func open() async throws -> any RelayStore {
        try await PostgresStore.open(location, timeouts: .init(connect: .seconds(10), query: .seconds(10)),
                                     logger: .init(label: "homeward.test.postgres"))
    }

    func close(_ store: any RelayStore) async throws { try await postgres(store).close() }

    func friendshipRows(_ store: any RelayStore) async throws -> [String] {
        try await strings(store, "SELECT user_a || '|' || user_b FROM friendships ORDER BY user_a, user_b")
    }

    func ackedAt(_ store: any RelayStore, alarm: String, username: String) async throws -> Int64? {
        try await postgres(store).withConnection("test") { db, logger in
            var value: Int64?
            for try await at in try await db.query(
                "SELECT acked_at FROM alarm_recipients WHERE alarm_id = \(alarm) AND username = \(username)", logger: logger
            ).decode(Int64?.self) { value = at }
            return value
        }
    }

    func endedRows(_ store: any RelayStore) async throws -> [String] {
        try await strings(store, """
            SELECT id || ' ' || ended_at || ' ' || convert_from(end_reason, 'UTF8') FROM sessions WHERE ended_at IS NOT NULL
            UNION ALL
            SELECT id || ' ' || ended_at || ' ' || convert_from(end_reason, 'UTF8') FROM alarms WHERE ended_at IS NOT NULL
            ORDER BY 1
            """)
    }

    func execute(_ store: any RelayStore, _ statements: [String]) async throws {
        for sql in statements { try server.psql(sql, database: location.database) }
    }

    var pushSignInsRewind: [String] {
        ["DROP INDEX push_subscriptions_by_endpoint", "DROP INDEX push_subscriptions_by_token",
         "ALTER TABLE push_subscriptions DROP COLUMN token_hash", "DELETE FROM schema_migrations WHERE version = 'v6-push-sign-ins'"]
    }

    func plan(_ store: any RelayStore, _ statement: StoredStatement) async throws -> [String] {
        try await postgres(store).withConnection("test") { db, logger in
            try await db.withTransaction(logger: logger) { db in
                _ = try await db.query("SET LOCAL enable_seqscan = off", logger: logger).collect()
                var lines: [String] = []
                let explain = StoredStatement("EXPLAIN " + statement.sql, statement.arguments)
                for try await line in try await db.query(PostgresQuery(stored: explain), logger: logger).decode(String.self) {
                    lines.append(line)
                }
                return lines
            }
        }
    }

    func remove() async { try? server.psql("DROP DATABASE IF EXISTS \(location.database) WITH (FORCE)") }

    /// The first column of every row of `sql` as text.
    func strings(_ store: any RelayStore, _ sql: String) async throws -> [String] {
        try await postgres(store).withConnection("test") { db, logger in
            var values: [String] = []
            for try await text in try await db.query(PostgresQuery(unsafeSQL: sql), logger: logger).decode(String.self) {
                values.append(text)
            }
            return values
        }
    }

    private func postgres(_ store: any RelayStore) throws -> PostgresStore {
        try #require(store as? PostgresStore)
    }
}
