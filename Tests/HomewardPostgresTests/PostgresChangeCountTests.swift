import HomewardCore
@testable import HomewardPostgres
import HomewardPostgresTestSupport
import PostgresNIO
import Testing

/// The change count relays compare to know whether their cache is behind the store (`catchUpWithStore`), and
/// the check every counted write makes with it. A relay that takes a stale cache for current writes sessions
/// and alarms back from it whole: an accept another relay committed a moment before is then overwritten, and
/// its observer never gets a position. So a load never names a count its data lacks, and a write from a
/// cache that is behind is refused (`StoreCacheBehind`) with nothing applied.
@Suite(.postgresServer)
struct PostgresChangeCountTests {
    /// Relay A's write is held at its commit (a deferred trigger waits for a lock this test holds), with its
    /// count already drawn, while relay B loads: the load waits for that commit and then shows the write with
    /// its count; it never returns the count without the write (relay B would take its cache for current).
    @Test func aLoadDuringACommitWaitsForItAndShowsTheWriteItCounts() async throws {
        let server = try PostgresServer.requireCurrent()
        let location = try server.createDatabase()
        let subject = PostgresSubject(location: location, server: server)
        defer { Task { await subject.remove() } }
        let relayA = try await open(subject)
        let relayB = try await open(subject)
        let control = try await open(subject)
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
        let write = Task { try await relayA.applyCounting([ann], expecting: 0) }
        try await waitUntilLocksAreAwaited(1, control)

        let load = Task { try await relayB.load() }
        try await waitUntilLocksAreAwaited(2, control)
        let before = try await relayB.changeCount()
        #expect(before == 0 || before == 1, "drawn or not yet: never more than the writes under way")

        releasing.yield()
        try await lock.value
        #expect(try await write.value == 1)
        let during = try await load.value
        #expect(during.users.contains { $0.username == "ann" }, "the load waited for the commit of the write it counts")
        #expect(during.changeCount == 1)
        #expect(try await relayB.changeCount() == 1)
        for store in [relayA, relayB, control] { await store.close() }
    }

    /// A relay whose cache was loaded before another relay's write writes from it: refused, nothing applied;
    /// loaded again, its write goes through and takes the next count.
    @Test func aWriteExpectingAStaleCountIsRefusedAndChangesNothing() async throws {
        let server = try PostgresServer.requireCurrent()
        let subject = PostgresSubject(location: try server.createDatabase(), server: server)
        defer { Task { await subject.remove() } }
        let relayA = try await open(subject)
        let relayB = try await open(subject)
        let cacheB = try await relayB.load()
        #expect(try await relayA.applyCounting([ann], expecting: 0) == 1)

        await #expect(throws: StoreCacheBehind(expected: cacheB.changeCount, current: 1)) {
            try await relayB.applyCounting([bob], expecting: cacheB.changeCount)
        }
        let reloaded = try await relayB.load()
        #expect(reloaded.users.map(\.username) == ["ann"], "the refused write stored nothing")
        #expect(reloaded.changeCount == 1, "and took no count")

        #expect(try await relayB.applyCounting([bob], expecting: reloaded.changeCount) == 2)
        #expect(try await relayB.load().users.map(\.username) == ["ann", "bob"])
        for store in [relayA, relayB] { await store.close() }
    }

    /// Last-seen times and token uses concern no other relay: they take no lock, no count and no check.
    @Test func anUncountedWriteIsNotChecked() async throws {
        let server = try PostgresServer.requireCurrent()
        let subject = PostgresSubject(location: try server.createDatabase(), server: server)
        defer { Task { await subject.remove() } }
        let store = try await open(subject)
        #expect(try await store.applyCounting([ann], expecting: 0) == 1)
        #expect(try await store.applyCounting([.lastSeen(username: "ann", at: 5)], expecting: 0) == nil)
        let loaded = try await store.load()
        #expect(loaded.lastSeen["ann"] == 5)
        #expect(loaded.changeCount == 1)
        await store.close()
    }

    /// Relays whose caches all have the same count write at once, each its own row: exactly one write goes
    /// through, every other is refused, and the store holds the winner's row only.
    @Test func ofConcurrentWritersExpectingTheSameCountExactlyOneWins() async throws {
        let server = try PostgresServer.requireCurrent()
        let subject = PostgresSubject(location: try server.createDatabase(), server: server)
        defer { Task { await subject.remove() } }
        var relays: [PostgresStore] = []
        for _ in 0..<6 { relays.append(try await open(subject)) }
        for round in 0..<5 {
            let expected = try await relays[0].load().changeCount
            let results = await withTaskGroup(of: (Int, Result<Int64?, any Error>).self) { group in
                for (i, relay) in relays.enumerated() {
                    let user = StoreChange.createUser(UserProfile(username: "r\(round)w\(i)", name: "W"), passwordHash: "x", at: 1)
                    group.addTask {
                        do { return (i, .success(try await relay.applyCounting([user], expecting: expected))) } catch {
                            return (i, .failure(error))
                        }
                    }
                }
                return await group.reduce(into: [(Int, Result<Int64?, any Error>)]()) { $0.append($1) }
            }
            let winners = results.filter { if case .success = $0.1 { true } else { false } }
            #expect(winners.count == 1, "round \(round): \(results)")
            for (_, result) in results {
                if case .failure(let error) = result { #expect(error is StoreCacheBehind, "round \(round): \(error)") }
            }
            let stored = try await relays[0].load()
            let written = stored.users.map(\.username).filter { $0.hasPrefix("r\(round)w") }
            #expect(written == winners.map { "r\(round)w\($0.0)" }, "round \(round): only the winner's row")
            #expect(stored.changeCount == expected.map { $0 + 1 })
        }
        for relay in relays { await relay.close() }
    }

    private let ann = StoreChange.createUser(UserProfile(username: "ann", name: "Ann"), passwordHash: "x", at: 1)
    private let bob = StoreChange.createUser(UserProfile(username: "bob", name: "Bob"), passwordHash: "x", at: 2)

    private func open(_ subject: PostgresSubject) async throws -> PostgresStore {
        try #require(try await subject.open() as? PostgresStore)
    }

    /// Polls (the waiting is not an event this test can await) until `count` sessions wait for advisory locks.
    private func waitUntilLocksAreAwaited(_ count: Int64, _ store: PostgresStore) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(5)
        while clock.now < deadline {
            let waiting = try await store.withConnection("test") { db, logger in
                var waiting: Int64 = 0
                for try await value in try await db.query(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted", logger: logger
                ).decode(Int64.self) { waiting = value }
                return waiting
            }
            if waiting >= count { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("fewer than \(count) sessions ever waited for an advisory lock")
    }
}
