import HomewardCore
@testable import HomewardPostgres
import HomewardPostgresTestSupport
import Logging
import PostgresNIO
import Synchronization
import Testing

/// Relays sharing one database split the timer shards through advisory locks (`PostgresTimerLease`): each
/// holds its fair share, no shard is held twice, and the shards of a lease that stops are taken by the others.
@Suite(.postgresServer)
struct PostgresTimerLeaseTests {
    /// What one lease told its relay, as the relay holds it.
    final class Relay: Sendable {
        let shards = Mutex(TimerShards.none)
        func set(_ new: TimerShards) { shards.withLock { $0 = new } }
        var held: TimerShards { shards.withLock { $0 } }
    }

    /// `whenGivingUp` runs when the lease takes shards from the relay, before `run` goes on.
    private func start(_ location: PostgresLocation, node: String,
                       whenGivingUp: @escaping @Sendable () -> Void = {}) -> (Relay, Task<Void, Never>) {
        let relay = Relay()
        let lease = PostgresTimerLease(location, timeouts: PostgresStore.Timeouts(), node: node, logger: Logger(label: "test.lease"))
        let task = Task {
            await lease.run { shards in
                if !relay.held.subtracting(shards).isEmpty { whenGivingUp() }
                relay.set(shards)
            }
        }
        return (relay, task)
    }

    /// The shards PostgreSQL shows held by the leases of `location`'s database, one entry per lock.
    private func locksHeld(_ server: PostgresServer, _ location: PostgresLocation) throws -> Int {
        Int(try server.psqlValue("""
            SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
            WHERE l.locktype = 'advisory' AND l.granted AND l.classid = \(PostgresTimerLease.shardLockClass) AND l.objsubid = 2
              AND a.datname = '\(location.database)'
            """)) ?? -1
    }

    private func eventually(_ what: Comment, within seconds: Int = 15, _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if try condition() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("\(what) did not happen within \(seconds) s")
        throw CancellationError()
    }

    @Test func twoLeasesSplitTheShardsAndTheSurvivorTakesAllWhenOneStops() async throws {
        let server = try PostgresServer.requireCurrent()
        let location = try server.createDatabase()
        // How many shard locks PostgreSQL shows whenever lease a gives shards up: its relay must stop firing
        // them while a still holds them, so that no other relay can have taken them yet.
        let locksWhenGivingUp = Mutex<[Int]>([])
        let (a, leaseA) = start(location, node: "a") {
            let locks = (try? self.locksHeld(server, location)) ?? -1
            locksWhenGivingUp.withLock { $0.append(locks) }
        }
        defer { leaseA.cancel() }
        try await eventually("lease a to take every shard") { a.held == .all }

        let (b, leaseB) = start(location, node: "b")
        defer { leaseB.cancel() }
        try await eventually("the two leases to hold half each") { a.held.size == 16 && b.held.size == 16 }
        #expect(a.held.union(b.held) == .all)
        #expect(a.held.subtracting(b.held) == a.held, "no shard fired by both")
        #expect(try locksHeld(server, location) == TimerShards.count, "each shard locked once")
        #expect(locksWhenGivingUp.withLock { $0 } == [TimerShards.count], "a gave up 16 shards before unlocking them")

        leaseA.cancel()
        await leaseA.value
        #expect(a.held == .none, "a stopping lease gives its shards up before its connection closes")
        try await eventually("lease b to take every shard") { b.held == .all }
        #expect(try locksHeld(server, location) == TimerShards.count)
    }

    /// A relay of an older version holds the single lock that named one relay for all timers: a lease then
    /// holds no shard, so nothing fires twice during a rolling upgrade; once that relay is gone, it takes them.
    @Test func aLeaseHoldsNoShardWhileTheSingleOwnerLockIsHeld() async throws {
        let server = try PostgresServer.requireCurrent()
        let location = try server.createDatabase()
        let logger = Logger(label: "test.lease")
        let old = try await PostgresConnection.connect(
            configuration: try PostgresStore.connectionConfiguration(location, PostgresStore.Timeouts()), id: 9, logger: logger)
        _ = try await old.query("SELECT pg_advisory_lock(\(PostgresTimerLease.singleOwnerKey))", logger: logger).collect()

        let (relay, lease) = start(location, node: "new")
        defer { lease.cancel() }
        // The lease's member lock shows that it has joined and checked at least once.
        try await eventually("the lease to join") {
            try server.psqlValue("""
                SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = \(PostgresTimerLease.memberLockClass)
                  AND database = (SELECT oid FROM pg_database WHERE datname = '\(location.database)')
                """) == "1"
        }
        // Nothing to await for something that must not happen: two checks' time, in which a free shard is taken.
        try await Task.sleep(for: PostgresTimerLease.checkInterval * 2)
        #expect(relay.held == .none)
        #expect(try locksHeld(server, location) == 0)

        try await old.close()
        try await eventually("the lease to take every shard") { relay.held == .all }
    }
}
