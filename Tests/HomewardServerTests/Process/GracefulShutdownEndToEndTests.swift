import Foundation
import HomewardPostgres
import HomewardPostgresTestSupport
import HomewardProtocol
import HomewardTestSupport
import Synchronization
import XCTest

/// SIGTERM to the real process while clients are busy: the relay's service group stops in order (stop
/// accepting, 1001 to every connection, drain, the last writes, then the clients), so nothing it
/// acknowledged is lost and nothing fails on the way.
final class GracefulShutdownEndToEndTests: XCTestCase {
    func testSIGTERMUnderLoadLosesNoAcknowledgedWriteAndLogsNoError() async throws {
        // No per-connection rate limit: the writers send as fast as the relay answers.
        let relay = try await RelayProcess.start(["--rate-limit", "100000"])
        addTeardownBlock { relay.stop() }
        let bob = try await relay.register("bob")
        var raisers: [(username: String, token: String, client: TestClient)] = []
        for index in 0..<4 {
            let raiser = try await relay.register("raiser\(index)")
            try await raiser.client.ok("friend.request", ["username": .string(bob.username)])
            try await bob.client.ok("friend.accept", ["username": .string(raiser.username)])
            raisers.append(raiser)
        }
        await bob.client.close()

        // Each writer raises alarms to bob one after another until its connection closes; an alarm counts
        // as acknowledged once its `ok` arrived.
        let acknowledged = AcknowledgedWrites()
        let writers = raisers.map { raiser in
            Task {
                var attempt = 0
                while true {
                    attempt += 1
                    let fields: [(String, JSONValue)] = [("text", .string("\(raiser.username) #\(attempt)")),
                                                         ("to", .array([.string(bob.username)]))]
                    guard let reply = try? await raiser.client.request("alarm.raise", fields) else { return }
                    if reply["type"] == "ok", let id = reply["alarm"]?["alarmId"]?.stringValue { acknowledged.add(id) }
                }
            }
        }
        try await acknowledged.wait(forAtLeast: 40)
        let status = try await relay.stop(with: SIGTERM)
        for writer in writers { await writer.value }
        XCTAssertEqual(status, 0)
        let closeCodes = await raisers.asyncMap { try? await $0.client.closeCode() }
        XCTAssertEqual(closeCodes, Array(repeating: 1001, count: raisers.count), "every connection closed with 1001")
        let problems = try await relay.log.lines(atLeast: .error)
        XCTAssertEqual(problems, [], "the stop logs no error")

        try await relay.launch()
        let bobAgain = try await relay.connect(label: "bob-after-sigterm")
        try await bobAgain.ok("hello", ["token": .string(bob.token)])
        let stored = Set(try await bobAgain.eventsAfterRoundTrip("alarm").compactMap { $0["alarm"]?["alarmId"]?.stringValue })
        let written = acknowledged.all
        XCTAssertGreaterThanOrEqual(written.count, 40)
        XCTAssertEqual(written.subtracting(stored), [], "every acknowledged alarm is stored")
        await bobAgain.close()
    }

    func testAPostgresRelayStoppedRightAfterItsClientsLeftLogsNoPoolError() async throws {
        guard let server = try await PostgresServer.startIfAvailable().server() else {
            throw XCTSkip("\(PostgresServer.skipVariable)=1: PostgreSQL tests skipped")
        }
        addTeardownBlock { server.remove() }
        let location = try server.createDatabase()
        let relay = try await RelayProcess.start([
            "--store", "postgres://\(location.username)@\(location.host):\(location.port)/\(location.database)?sslmode=disable",
        ])
        addTeardownBlock { relay.stop() }
        var users: [(username: String, token: String, client: TestClient)] = []
        for index in 0..<6 { users.append(try await relay.register("gone\(index)")) }
        let beforeClosing = Int64(Date().timeIntervalSince1970 * 1000)
        // The disconnects are still being stored (their last-seen times) when SIGTERM arrives.
        for user in users { await user.client.close() }
        let status = try await relay.stop(with: SIGTERM)
        XCTAssertEqual(status, 0)

        let lines = try await relay.log.allLines
        XCTAssertEqual(lines.filter { $0.contains("poolShutdown") || $0.contains("clientClosedConnection") }, [],
                       "no store call meets a closed pool")
        let problems = try await relay.log.lines(atLeast: .warning)
        XCTAssertEqual(problems, [], "a clean stop")
        let store = try await PostgresStore.open(location)
        let stored = try await store.load()
        await store.close()
        for user in users {
            let seen = try XCTUnwrap(stored.lastSeen[user.username], "\(user.username)'s last-seen time is stored")
            XCTAssertGreaterThanOrEqual(seen, beforeClosing, "\(user.username): the time they left, not their sign-in")
        }
    }
}

/// The writes a relay acknowledged, and a wait for the first few.
private final class AcknowledgedWrites: Sendable {
    private let state = Mutex<(ids: Set<String>, waiter: (count: Int, continuation: CheckedContinuation<Void, Never>)?)>(([], nil))

    func add(_ id: String) {
        let ready = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.ids.insert(id)
            guard let waiter = state.waiter, state.ids.count >= waiter.count else { return nil }
            state.waiter = nil
            return waiter.continuation
        }
        ready?.resume()
    }

    var all: Set<String> { state.withLock { $0.ids } }

    func wait(forAtLeast count: Int) async throws {
        try await withTimeout(60, "\(count) acknowledged writes") {
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let reached = self.state.withLock { state in
                        if state.ids.count >= count || Task.isCancelled { return true }
                        state.waiter = (count, continuation)
                        return false
                    }
                    if reached { continuation.resume() }
                }
            } onCancel: {
                self.state.withLock { state in
                    defer { state.waiter = nil }
                    return state.waiter?.continuation
                }?.resume()
            }
        }
    }
}

private extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
