import Foundation
import HomewardBench
import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardServer
import NIOPosix
import Synchronization
import XCTest

/// A read on one relay right after a write acknowledged on another: the reading relay knows the write, and
/// learned it from the bus (the writer's notice, behind a barrier), not from PostgreSQL.
final class ClusterReadsTests: ClusterTestCase {
    /// A relay whose store calls are counted.
    /// `configure` runs after the cluster's settings (it may change the bus).
    private func countedNode(_ node: String, of cluster: Cluster,
                             _ configure: @escaping (inout RelayConfiguration) -> Void = { _ in }) async throws -> (TestRelay, StoreCallCounter) {
        let counter = Mutex<StoreCallCounter?>(nil)
        var failure: (any Error)?
        let relay = try await startRelay({ config in
            do { try cluster.configure(&config, node: node) } catch { failure = error }
            configure(&config)
        }, wrapStore: { store in
            let counting = StoreCallCounter(store)
            counter.withLock { $0 = counting }
            return counting
        })
        if let failure { throw failure }
        return (relay, try XCTUnwrap(counter.withLock { $0 }))
    }

    private func blocked(_ reply: JSONValue) -> [String] {
        reply["users"]?.arrayValue?.compactMap { $0["username"]?.stringValue } ?? []
    }

    /// Node b hears nats-server through a link that holds everything 20 ms each way, so a write's notice
    /// reaches it well after the client's next request: only the barrier (its PONG comes behind the notice on
    /// that link) makes node b wait for it.
    func testAReadOnAnotherRelayRightAfterAnAcknowledgedWriteSeesIt() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster)
        let slowBus = try await DelayProxy.start(group: MultiThreadedEventLoopGroup.singleton, port: 0, target: cluster.nats.port,
                                                 delay: .milliseconds(20))
        addTeardownBlock { await slowBus.stop() }
        let slowBusSetting = try BusSetting(parsing: "nats://127.0.0.1:\(slowBus.port)")
        let (b, store) = try await countedNode("node-b", of: cluster) { $0.bus = slowBusSetting }
        // Taking its timer shards, node b reads the store once; that is done before counting.
        try await waitUntilTimerShardsSplit([a, b])
        let alice = try await a.user("alice")
        let bob = try await b.user("bob")
        let aliceOnB = try await b.device(of: alice)
        // The first request after start checks the store once (the bus's connection was not checked yet).
        _ = try await aliceOnB.ok("user.blocks")
        let calls = store.calls
        for round in 0..<10 {
            try await alice.client.ok("user.block", ["username": .string(bob.username)])
            let after = try await aliceOnB.ok("user.blocks")
            XCTAssertEqual(blocked(after), [bob.username], "round \(round): the block acknowledged on node a")
            try await alice.client.ok("user.unblock", ["username": .string(bob.username)])
            let undone = try await aliceOnB.ok("user.blocks")
            XCTAssertEqual(blocked(undone), [], "round \(round): the unblock acknowledged on node a")
        }
        XCTAssertEqual(store.calls - calls, 0, "node b learned every write from the bus")
    }

    func testCachedReadsSendNothingToPostgreSQL() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster)
        let (b, store) = try await countedNode("node-b", of: cluster)
        try await waitUntilTimerShardsSplit([a, b])
        let alice = try await a.user("alice")
        let bob = try await b.user("bob")
        try await befriend(alice, bob)
        _ = try await bob.client.ok("friend.list")
        let calls = store.calls
        for _ in 0..<100 {
            let list = try await bob.client.ok("friend.list")
            XCTAssertEqual(list["friends"]?.arrayValue?.count, 1)
        }
        XCTAssertEqual(store.calls - calls, 0, "100 friend.list on node b: no statement for PostgreSQL")
    }

    /// Without the bus the barrier cannot confirm anything: a relay then asks PostgreSQL for its change count
    /// before a request, and a write acknowledged on another relay is still seen at once.
    func testWithTheBusDownAReadAsksPostgreSQLAndSeesTheWrite() async throws {
        let cluster = try await startCluster()
        let a = try await startNode("node-a", of: cluster)
        let (b, store) = try await countedNode("node-b", of: cluster)
        let alice = try await a.user("alice")
        let bob = try await b.user("bob")
        let aliceOnB = try await b.device(of: alice)
        cluster.nats.stop()
        try await alice.client.ok("user.block", ["username": .string(bob.username)])
        let calls = store.calls
        let after = try await aliceOnB.ok("user.blocks")
        XCTAssertEqual(blocked(after), [bob.username], "the block acknowledged on node a while the bus was down")
        XCTAssertGreaterThan(store.calls, calls, "asked PostgreSQL")
    }
}
