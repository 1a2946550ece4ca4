import Foundation
import HomewardCore
import HomewardNATS
import HomewardPostgres
import HomewardPostgresTestSupport
import HomewardServer
import HomewardTestSupport
import Synchronization
import XCTest

/// Several relays in this test process on one PostgreSQL database and one nats-server (`--bus nats://`),
/// each on its own loopback port, as behind a load balancer. PostgreSQL is started once per class
/// (each test has its own database); nats-server once per test.
class ClusterTestCase: EndToEndTestCase {
    private static let shared = Mutex<[ObjectIdentifier: PostgresServer.Availability]>([:])

    /// The class's PostgreSQL; fails when it is missing, skips only with HOMEWARD_SKIP_POSTGRES=1.
    func postgres() async throws -> PostgresServer {
        let key = ObjectIdentifier(type(of: self))
        var availability = Self.shared.withLock { $0[key] }
        if availability == nil {
            let started = await PostgresServer.startIfAvailable()
            Self.shared.withLock { $0[key] = started }
            availability = started
        }
        guard let server = try availability?.server() else {
            throw XCTSkip("\(PostgresServer.skipVariable)=1: PostgreSQL tests skipped")
        }
        return server
    }

    override class func tearDown() {
        let key = ObjectIdentifier(self)
        if case .running(let server)? = shared.withLock({ $0.removeValue(forKey: key) }) { server.remove() }
        super.tearDown()
    }

    /// A nats-server stopped when the test ends.
    func startNATS() async throws -> NATSServerProcess {
        let nats = try await NATSServerProcess.start()
        addTeardownBlock { nats.stop() }
        return nats
    }

    /// The store and bus settings of one cluster: a fresh database and a nats-server.
    struct Cluster {
        let location: PostgresLocation
        let nats: NATSServerProcess

        func configure(_ config: inout RelayConfiguration, node: String) throws {
            config.store = .postgres(location)
            config.bus = try BusSetting(parsing: nats.url)
            config.nodeID = node
        }

        /// The same settings as flags of the real executable.
        func arguments(node: String) -> [String] {
            ["--store", "postgres://\(location.username)@\(location.host):\(location.port)/\(location.database)?sslmode=disable",
             "--bus", nats.url, "--node-id", node]
        }
    }

    func startCluster() async throws -> Cluster {
        let server = try await postgres()
        return Cluster(location: try server.createDatabase(), nats: try await startNATS())
    }

    /// One relay of `cluster`, named `node`; `configure` may change anything but the store, bus and name;
    /// `wrapStore` puts something between the relay and PostgreSQL (`StoreCallCounter`).
    func startNode(_ node: String, of cluster: Cluster,
                   _ configure: @escaping (inout RelayConfiguration) -> Void = { _ in },
                   wrapStore: @escaping @Sendable (any RelayStore) -> any RelayStore = { $0 }) async throws -> TestRelay {
        var failure: (any Error)?
        let relay = try await startRelay({ config in
            configure(&config)
            do { try cluster.configure(&config, node: node) } catch { failure = error }
        }, wrapStore: wrapStore)
        if let failure { throw failure }
        return relay
    }

    /// Waits until `relay` fires every timer (it holds every shard's PostgreSQL lock, as a relay alone does).
    func waitUntilFiringTimers(_ relay: TestRelay, within seconds: Double = 10) async throws {
        try await eventually(within: seconds, "\(relay.configuration.nodeID) to take every timer shard") {
            try await relay.running.relay.firedTimerShards == .all
        }
    }

    /// Waits until the in-process `relays` (all of the cluster's) have split the timer shards: together they fire
    /// every shard, each shard on one of them only, none above its fair share.
    func waitUntilTimerShardsSplit(_ relays: [TestRelay], within seconds: Double = 10) async throws {
        let share = TimerShareDecision.fairShare(relays: relays.count)
        try await eventually(within: seconds, "the relays to split the timer shards") {
            var shards: [TimerShards] = []
            for relay in relays { shards.append(try await relay.running.relay.firedTimerShards) }
            return shards.reduce(TimerShards.none) { $0.union($1) } == .all && shards.map(\.size).reduce(0, +) == TimerShards.count
                && shards.allSatisfy { $0.size <= share }
        }
    }

    /// A new username whose timers `relay` fires now.
    func uniqueUsername(_ base: String, firedBy relay: TestRelay) async throws -> String {
        let shards = try await relay.running.relay.firedTimerShards
        XCTAssertFalse(shards.isEmpty, "\(relay.configuration.nodeID) fires no timers")
        while true {
            let name = TestRelay.uniqueUsername(base)
            if shards.owns(name) { return name }
        }
    }

    /// How many timer shards the relays of `cluster` hold (`PostgresTimerLease`), as PostgreSQL sees it.
    func timerShardLocksHeld(in cluster: Cluster) async throws -> Int {
        let held = try await postgres().psqlValue("""
            SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
            WHERE l.locktype = 'advisory' AND l.granted AND l.classid = \(PostgresTimerLease.shardLockClass) AND l.objsubid = 2
              AND a.datname = '\(cluster.location.database)'
            """)
        return Int(held) ?? -1
    }

    /// Polls `condition` every 50 ms until it holds or `seconds` pass; returns how long it took.
    @discardableResult
    func eventually(within seconds: Double, _ what: String, _ condition: () async throws -> Bool) async throws -> Duration {
        let clock = ContinuousClock()
        let start = clock.now
        while clock.now - start < .seconds(seconds) {
            if try await condition() { return clock.now - start }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("\(what) did not happen within \(seconds) s")
    }
}

extension ClusterTestCase {
    /// Starts a session of `walker` with `observers`, each accepting on their own relay.
    func follow(_ walker: TestUser, by observers: [TestUser]) async throws -> String {
        let start = try await walker.client.ok("session.start", ["invite": .strings(observers.map(\.username))])
        let id = try XCTUnwrap(start["session"]?["sessionId"]?.stringValue)
        for observer in observers {
            try await observer.client.event("session.invite", where: { $0["session"]?["sessionId"] == .string(id) })
            try await observer.client.ok("session.accept", ["sessionId": .string(id)])
            try await walker.client.event("session.accepted", where: { $0["by"] == .string(observer.username) })
        }
        return id
    }
}
