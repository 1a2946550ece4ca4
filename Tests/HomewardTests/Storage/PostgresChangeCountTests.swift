import HomewardCore
@testable import HomewardPostgres
import PostgresNIO
import Testing

/// The change count relays compare to know whether their cache is behind the store (`catchUpWithStore`).
/// A relay that takes a stale cache for current writes sessions and alarms back from it whole: an accept
/// another relay committed a moment before is then overwritten, and its observer never gets a position.
@Suite(.postgresServer)
struct PostgresChangeCountTests {
    /// Relay A's write is held at its commit (a deferred trigger waits for a lock this test holds) while
    /// relay B reads the count and loads: neither may count the write its snapshot does not show.
    @Test func aWriteStillCommittingIsNotCountedByAnyLoad() async throws {
        let server = try PostgresServer.requireCurrent()
        let location = try server.createDatabase()
        let subject = PostgresSubject(location: location, server: server)
        defer { Task { await subject.remove() } }
        let relayA = try #require(try await subject.open() as? PostgresStore)
        let relayB = try #require(try await subject.open() as? PostgresStore)
        let control = try #require(try await subject.open() as? PostgresStore)
        try server.psql("""
            CREATE FUNCTION wait_at_commit() RETURNS trigger LANGUAGE plpgsql AS
            'BEGIN PERFORM pg_advisory_xact_lock_shared(7); RETURN NULL; END';
            CREATE CONSTRAINT TRIGGER wait_at_commit AFTER INSERT ON users DEFERRABLE INITIALLY DEFERRED
            FOR EACH ROW EXECUTE FUNCTION wait_at_commit();
            """, database: location.database)
        #expect(try await relayB.changeCount() == 0)

        let (held, holding) = AsyncStream<Void>.makeStream()
        let (release, releasing) = AsyncStream<Void>.makeStream()
        let lock = Task {
            try await control.withConnection("hold the commit") { db, logger in
                _ = try await db.query("SELECT pg_advisory_lock(7)::text", logger: logger).collect()
                holding.yield()
                for await _ in release { break }
                _ = try await db.query("SELECT pg_advisory_unlock(7)::text", logger: logger).collect()
            }
        }
        for await _ in held { break }
        let write = Task {
            try await relayA.applyCounting([.createUser(UserProfile(username: "ann", name: "Ann"), passwordHash: "x", at: 1)])
        }
        try await waitUntilALockIsAwaited(control)

        #expect(try await relayB.changeCount() == 0, "the write has not committed: not counted yet")
        let during = try await relayB.load()
        #expect(!during.users.contains { $0.username == "ann" })
        #expect(during.changeCount == 0, "a count the snapshot does not show would make relay B take its cache for current")

        releasing.yield()
        try await lock.value
        #expect(try await write.value == 1)
        #expect(try await relayB.changeCount() == 1)
        let after = try await relayB.load()
        #expect(after.users.contains { $0.username == "ann" })
        #expect(after.changeCount == 1)
        for store in [relayA, relayB, control] { await store.close() }
    }

    /// Polls (the waiting is not an event this test can await) until a session waits for an advisory lock.
    private func waitUntilALockIsAwaited(_ store: PostgresStore) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(5)
        while clock.now < deadline {
            let waiting = try await store.withConnection("test") { db, logger in
                var count: Int64 = 0
                for try await value in try await db.query(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted", logger: logger
                ).decode(Int64.self) { count = value }
                return count
            }
            if waiting > 0 { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("the write never reached its commit")
    }
}
