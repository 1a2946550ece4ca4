import HomewardCore
@testable import HomewardPostgres
import PostgresNIO
import Testing

/// A shared statement run as a query of its own (`PostgresQuery(stored:)`, the outbox's): each `?` becomes
/// the next numbered parameter, and every argument is bound, never written into the SQL.
struct PostgresStoredQueryTests {
    @Test func placeholdersAreNumberedInOrderAndEveryArgumentIsBound() {
        let hostile = "x' OR '1'='1"
        let query = PostgresQuery(stored: StoredStatement(
            "UPDATE push_outbox SET next_attempt_at = ?, attempts = ?, claimed_until = NULL WHERE id = ? AND topic = ?",
            [.int(7), .int(2), .text(hostile), .null]))
        #expect(query.sql == "UPDATE push_outbox SET next_attempt_at = $1, attempts = $2, claimed_until = NULL WHERE id = $3 AND topic = $4")
        #expect(query.binds.count == 4)
        #expect(!query.sql.contains(hostile))
    }

    @Test func aStatementWithoutArgumentsIsItsSQL() {
        let query = PostgresQuery(stored: StoredStatement("DELETE FROM push_outbox", []))
        #expect(query.sql == "DELETE FROM push_outbox")
        #expect(query.binds.count == 0)
    }
}
