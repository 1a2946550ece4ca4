import HomewardCore
@testable import HomewardPostgres
import HomewardPostgresTestSupport
import PostgresNIO
import Testing

/// The per-user versions relays sharing the store check their writes with (`PostgresStore.applyChecked`). A
/// relay that takes a stale cache for current writes sessions and alarms back from it whole: an accept another
/// relay committed a moment before is then overwritten, and its observer never gets a position. So a write
/// about a user from a cache that lacks another relay's write about them is refused (`StoreCacheBehind`) with
/// nothing applied, and a load's versions name exactly the writes its data shows. Writes about other users
/// neither wait for nor refuse each other, and loads wait for no write.
@Suite(.postgresServer)
struct PostgresUserVersionTests {
    /// Relay A's write about ann is held at its commit (a deferred trigger waits for a lock this test holds).
    /// Meanwhile relay B writes about bob, and loads: neither waits for A, and the load shows neither ann nor her
    /// version. Once A commits, a load shows both.
    @Test func writesAboutOtherUsersAndLoadsDoNotWaitForAWriteInProgress() async throws {
        let server = try PostgresServer.requireCurrent()
        let location = try server.createDatabase()
        let subject = PostgresSubject(location: location, server: server)
        defer { Task { await subject.remove() } }
        let relayA = try await open(subject)
        let relayB = try await open(subject)
        let control = try await open(subject)
        try server.psql("""
            CREATE FUNCTION wait_at_commit() RETURNS trigger LANGUAGE plpgsql AS
            'BEGIN IF NEW.username = ''ann'' THEN PERFORM pg_advisory_xact_lock_shared(7); END IF; RETURN NULL; END';
            CREATE CONSTRAINT TRIGGER wait_at_commit AFTER INSERT ON users DEFERRABLE INITIALLY DEFERRED
            FOR EACH ROW EXECUTE FUNCTION wait_at_commit();
            """, database: location.database)

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
        let write = Task { try await relayA.applyChecked([ann], scope: ["ann": 0]) }
        try await waitUntilLocksAreAwaited(1, control)

        #expect(try await relayB.applyChecked([bob], scope: ["bob": 0]) == ["bob": 1], "bob's write did not wait for ann's")
        let during = try await relayB.load()
        #expect(during.users.map(\.username) == ["bob"], "the load did not wait, and shows no write in progress")
        #expect(during.versions == ["bob": 1], "nor its version")
        #expect(try await relayB.versions(of: ["ann", "bob"]) == ["bob": 1])

        releasing.yield()
        try await lock.value
        #expect(try await write.value == ["ann": 1])
        let after = try await relayB.load()
        #expect(after.users.map(\.username) == ["ann", "bob"])
        #expect(after.versions == ["ann": 1, "bob": 1])
        for store in [relayA, relayB, control] { await store.close() }
    }

    /// A relay whose cache was loaded before another relay's write about ann writes about ann from it: refused,
    /// nothing applied, no version moved; loaded again, its write goes through and takes ann's next version.
    @Test func aWriteAboutAUserFromAStaleCacheIsRefusedAndChangesNothing() async throws {
        let server = try PostgresServer.requireCurrent()
        let subject = PostgresSubject(location: try server.createDatabase(), server: server)
        defer { Task { await subject.remove() } }
        let relayA = try await open(subject)
        let relayB = try await open(subject)
        let cacheB = try await relayB.load()
        #expect(try await relayA.applyChecked([ann], scope: ["ann": 0]) == ["ann": 1])

        let contacts = StoreChange.setAlarmContacts(owner: "ann", ["bob"])
        await #expect(throws: StoreCacheBehind(expected: ["ann": 0, "bob": 0], current: ["ann": 1, "bob": 0])) {
            try await relayB.applyChecked([bob, contacts], scope: ["ann": cacheB.versions?["ann"] ?? 0, "bob": 0])
        }
        let reloaded = try await relayB.load()
        #expect(reloaded.users.map(\.username) == ["ann"], "the refused write stored nothing")
        #expect(reloaded.versions == ["ann": 1], "and moved no version")

        #expect(try await relayB.applyChecked([bob, contacts], scope: ["ann": 1, "bob": 0]) == ["ann": 2, "bob": 1])
        #expect(try await relayB.load().users.map(\.username) == ["ann", "bob"])
        for store in [relayA, relayB] { await store.close() }
    }

    /// Last-seen times and token uses concern no other relay: written without a scope, they move no version.
    @Test func aWriteWithoutScopeIsNotChecked() async throws {
        let server = try PostgresServer.requireCurrent()
        let subject = PostgresSubject(location: try server.createDatabase(), server: server)
        defer { Task { await subject.remove() } }
        let store = try await open(subject)
        #expect(try await store.applyChecked([ann], scope: ["ann": 0]) == ["ann": 1])
        #expect(try await store.applyChecked([.lastSeen(username: "ann", at: 5)], scope: nil) == nil)
        let loaded = try await store.load()
        #expect(loaded.lastSeen["ann"] == 5)
        #expect(loaded.versions == ["ann": 1])
        await store.close()
    }

    /// Relays whose caches hold the same version of one user write about that user at once: exactly one write
    /// goes through, every other is refused, and the store holds the winner's row only. Writes about six
    /// different users at once all go through.
    @Test func ofConcurrentWritersAboutOneUserExactlyOneWinsAndAboutOthersAllDo() async throws {
        let server = try PostgresServer.requireCurrent()
        let subject = PostgresSubject(location: try server.createDatabase(), server: server)
        defer { Task { await subject.remove() } }
        var relays: [PostgresStore] = []
        for _ in 0..<6 { relays.append(try await open(subject)) }
        for round in 0..<5 {
            let expected = try await relays[0].load().versions?["owner"] ?? 0
            let results = await withTaskGroup(of: (Int, Result<UserVersions?, any Error>).self) { group in
                for (i, relay) in relays.enumerated() {
                    let user = StoreChange.createUser(UserProfile(username: "r\(round)w\(i)", name: "W"), passwordHash: "x", at: 1)
                    group.addTask {
                        do { return (i, .success(try await relay.applyChecked([user], scope: ["owner": expected]))) } catch {
                            return (i, .failure(error))
                        }
                    }
                }
                return await group.reduce(into: [(Int, Result<UserVersions?, any Error>)]()) { $0.append($1) }
            }
            let winners = results.filter { if case .success = $0.1 { true } else { false } }
            #expect(winners.count == 1, "round \(round): \(results)")
            for (_, result) in results {
                if case .failure(let error) = result { #expect(error is StoreCacheBehind, "round \(round): \(error)") }
            }
            let stored = try await relays[0].load()
            let written = stored.users.map(\.username).filter { $0.hasPrefix("r\(round)w") }
            #expect(written == winners.map { "r\(round)w\($0.0)" }, "round \(round): only the winner's row")
            #expect(stored.versions?["owner"] == expected + 1)
        }
        let disjoint = await withTaskGroup(of: Bool.self) { group in
            for (i, relay) in relays.enumerated() {
                let user = StoreChange.createUser(UserProfile(username: "solo\(i)", name: "S"), passwordHash: "x", at: 1)
                group.addTask { (try? await relay.applyChecked([user], scope: ["solo\(i)": 0])) == ["solo\(i)": 1] }
            }
            return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(disjoint == relays.count, "writes about different users refuse nothing")
        for relay in relays { await relay.close() }
    }

    /// A store no checked write has reached holds no versions: every user is at 0.
    @Test func aNewStoreHoldsNoVersions() async throws {
        let server = try PostgresServer.requireCurrent()
        let subject = PostgresSubject(location: try server.createDatabase(), server: server)
        defer { Task { await subject.remove() } }
        let store = try await open(subject)
        #expect(try await store.load().versions == [:])
        #expect(try await store.versions(of: ["ann"]) == [:])
        await store.close()
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
