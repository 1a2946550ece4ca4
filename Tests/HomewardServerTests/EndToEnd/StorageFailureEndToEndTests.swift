import HomewardCore
import HomewardCoreTestSupport
import HomewardStorage
import Synchronization
import XCTest

/// A storage failure seen from a client: an `internal` error, and the connection goes on.
final class StorageFailureEndToEndTests: EndToEndTestCase {
    func testFailedWriteIsInternalAndTheConnectionStaysOpen() async throws {
        let instrumented = Mutex<InstrumentedStore?>(nil)
        let relay = try await startRelay(wrapStore: { store in
            let wrapped = InstrumentedStore(store)
            instrumented.withLock { $0 = wrapped }
            return wrapped
        })
        let store = try XCTUnwrap(instrumented.withLock { $0 })
        let alice = try await relay.user("alice")
        let bob = try await relay.user("bob")

        store.failWrite(1)
        let code = try await alice.client.failure("friend.request", ["username": .string(bob.username)])
        XCTAssertEqual(code, "internal")
        XCTAssertTrue(alice.client.isActive)
        let incoming = try await bob.client.ok("friend.list")["incoming"]
        XCTAssertEqual(incoming, .array([]), "bob was not told of a request that was not stored")

        try await alice.client.ok("friend.request", ["username": .string(bob.username)])
        _ = try await bob.client.event("friend.request")
    }
}
