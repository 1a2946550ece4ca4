import HomewardCore
@testable import HomewardPostgres
import PostgresNIO
import Testing

/// A shared statement run as a query of its own (`PostgresQuery(stored:)`, the outbox's): its arguments are bound
/// as one JSON parameter that each `?`'s typed read takes its value from, as in a batch; never written into the SQL.
struct PostgresStoredQueryTests {
    @Test func placeholdersReadTheirArgumentsInOrderFromTheOneBoundParameter() {
        let hostile = "x' OR '1'='1"
        let query = PostgresQuery(stored: StoredStatement(
            "UPDATE push_outbox SET next_attempt_at = ?, attempts = ?, claimed_until = NULL WHERE id = ? AND topic = ?",
            [.int(7), .int(2), .text(hostile), .null]))
        #expect(query.sql == """
            UPDATE push_outbox SET next_attempt_at = ($1::jsonb->>0)::int8, attempts = ($1::jsonb->>1)::int8, \
            claimed_until = NULL WHERE id = ($1::jsonb->>2) AND topic = NULL
            """)
        #expect(query.binds.count == 1)
        #expect(!query.sql.contains(hostile))
    }

    @Test func aStatementWithoutArgumentsIsItsSQL() {
        let query = PostgresQuery(stored: StoredStatement("DELETE FROM push_outbox", []))
        #expect(query.sql == "DELETE FROM push_outbox")
        #expect(query.binds.count == 0)
    }
}
