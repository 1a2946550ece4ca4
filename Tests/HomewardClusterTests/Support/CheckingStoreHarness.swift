import HomewardCore
import HomewardCoreTestSupport
import Logging
import Metrics
import Synchronization
import XCTest

/// alice, bob and carol, alice friends with both, on one relay of several: its SQLite store behind a `CountingStore`
/// that checks writes (as PostgreSQL does), its notices recorded by `bus`.
func threeFriendsOnACheckingStore(bus: any RelayBus, logger: Logger = Logger(label: "homeward.relay"),
                                  metrics: any MetricsFactory = NOOPMetricsHandler.instance) async throws -> (SafetyHarness, CountingStore) {
    let counting = Mutex<CountingStore?>(nil)
    let harness = try await SafetyHarness(users: ["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")],
                                          wrapStore: { store in
                                              let wrapped = CountingStore(store, checksWrites: true)
                                              counting.withLock { $0 = wrapped }
                                              return wrapped
                                          }, bus: bus, logger: logger, metrics: metrics)
    return (harness, try XCTUnwrap(counting.withLock { $0 }))
}
