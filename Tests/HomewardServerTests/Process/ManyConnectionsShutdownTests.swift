import Foundation
import HomewardBench
import HomewardCore
import HomewardProtocol
import HomewardStorage
import HomewardTestSupport
import XCTest

/// SIGTERM to a relay with many connections, on a store with many walks under way: it closes every connection
/// with 1001, stores the last-seen time of everyone who was connected, and exits within a bound that does not grow
/// with the connections times the walks (a look through every pending deadline per closed connection would take
/// about a minute here).
final class ManyConnectionsShutdownTests: XCTestCase {
    /// Connected users, each the owner of a walk (their going offline starts its lost-contact deadline).
    static let connected = 600
    /// Walks of users not connected, so that a look through every pending deadline costs what it does on a large store.
    static let otherWalks = 20_000
    /// From SIGTERM to the exit: the close frames (at most `ConnectionListenerService.closeGrace`), one batch of
    /// writes, the clients closing; a debug build on a machine busy with other builds.
    static let stopBound: Duration = .seconds(15)

    func testSIGTERMWithManyConnectionsExitsPromptlyAndStoresTheirLastSeenTimes() async throws {
        try await stopWithManyConnections(cache: "whole")
    }

    private func stopWithManyConnections(cache: String) async throws {
        _ = SystemInfo.raiseOpenFileLimit(to: 8192)
        let relay = try await RelayProcess.start([
            "--cache", cache, "--max-unauthenticated-per-address", "100000", "--hello-failures-per-address", "0",
            "--auth-timeout", "60",
        ], prepare: { directory in try await Self.fill(directory + "/homeward.sqlite") })
        addTeardownBlock { relay.stop() }
        let port = try relay.port

        // A few clients that see the close frame, and many that are just connections.
        var watched: [TestClient] = []
        for index in 0..<3 {
            let client = try await relay.connect(label: Self.walker(index))
            try await client.ok("hello", ["token": .string(Self.token(index))])
            watched.append(client)
        }
        let env = try BenchEnvironment(threads: 1, sources: [])
        let first = watched.count
        let sockets = try await mapConcurrently(Self.connected - first, width: 32) { offset in
            try await HomewardSignIn.connect(env, port: port, source: nil, .hello(token: Self.token(first + offset)))
        }
        XCTAssertEqual(sockets.count + watched.count, Self.connected)

        let beforeStop = Int64(Date().timeIntervalSince1970 * 1000)
        let clock = ContinuousClock()
        let stopped = clock.now
        let status = try await relay.stop(with: SIGTERM, within: 120)
        let took = clock.now - stopped
        XCTAssertEqual(status, 0)
        print("\(cache) cache: stopped \(took) after SIGTERM with \(Self.connected) connections")
        XCTAssertLessThan(took, Self.stopBound, "the relay stopped \(took) after SIGTERM with \(Self.connected) connections")
        for client in watched {
            let code = try await client.closeCode()
            XCTAssertEqual(code, 1001, "\(client): closed with 1001")
        }
        for socket in sockets { socket.close() }
        try await env.group.shutdownGracefully()

        let store = try SQLiteStore(path: relay.dataDirectory + "/homeward.sqlite")
        let stored = try await store.load()
        try store.close()
        let notStored = (0..<Self.connected).map(Self.walker).filter { (stored.lastSeen[$0] ?? 0) < beforeStop }
        XCTAssertEqual(notStored.count, 0, "every connected user's last-seen time is the time they were disconnected: "
            + "\(notStored.prefix(5)) and others are not")
        let problems = try await relay.log.lines(atLeast: .error)
        XCTAssertEqual(problems, [], "the stop logs no error")
    }

    /// A client that answers nothing while the relay stops (a load generator too busy to read, or a peer gone without
    /// a FIN) keeps its connection waiting for the TLS close_notify until the TLS handler gives up, after the relay has
    /// closed and while the other event loop, whose client left at once, has already stopped. Nothing that connection's
    /// loop does then may reach the stopped loop.
    func testAConnectionThatOutlivesTheOtherEventLoopSchedulesNothingOnIt() async throws {
        _ = SystemInfo.raiseOpenFileLimit(to: 8192)
        for round in 0..<3 {
            let relay = try await RelayProcess.start([
                "--tls-backend", "openssl", "--threads", "2", "--max-unauthenticated-per-address", "100000",
                "--hello-failures-per-address", "0",
            ], prepare: { directory in try await Self.fill(directory + "/homeward.sqlite", otherWalks: 0) })
            addTeardownBlock { relay.stop() }
            let port = try relay.port
            // Accepted one after the other, they land on the relay's two event loops.
            let frozenClients = try BenchEnvironment(threads: 1, sources: [])
            let frozen = try await HomewardSignIn.connect(frozenClients, port: port, source: nil, .hello(token: Self.token(0)))
            let answering = try await relay.connect(label: "answering")
            try await answering.ok("hello", ["token": .string(Self.token(1))])
            // The first client's event loop stops until the relay has exited: no read, no close_notify, no FIN.
            let held = DispatchSemaphore(value: 0)
            frozenClients.group.next().execute { held.wait() }
            let status: Int32
            do { status = try await relay.stop(with: SIGTERM, within: 60) } catch {
                held.signal()
                throw error
            }
            held.signal()
            frozen.close()
            await answering.close()
            try await frozenClients.group.shutdownGracefully()
            XCTAssertEqual(status, 0, "round \(round)")
            let problems = try await relay.log.lines(atLeast: .error)
            XCTAssertEqual(problems, [], "round \(round): the stop logs no error and schedules nothing on a stopped event loop")
        }
    }

    static func walker(_ index: Int) -> String { "walker\(index)" }
    static func token(_ index: Int) -> String { "shutdown-token-\(index)" }

    /// The connected users with their tokens and walks, and the other walks with their owners.
    private static func fill(_ path: String, otherWalks: Int = otherWalks) async throws {
        let store = try SQLiteStore(path: path)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        // One hash for everyone: nobody signs in with the password.
        let hash = PasswordHasher(iterations: PasswordHasher.minimumIterations).hash("correct horse battery")
        var changes: [StoreChange] = []
        func walk(of owner: String, _ index: Int) {
            changes.append(.createUser(UserProfile(username: owner, name: owner), passwordHash: hash, at: now))
            var session = FollowSession(id: "se_shutdown_\(index)", owner: owner, note: nil, startedAt: now)
            // Contact already lost: no deadline of theirs falls due while the test runs (every owner is offline at
            // the start, and all 20,000 losing contact at once would keep the relay busy for a while). A walker's
            // comes back when they sign in, and counts again from when the relay closes their connection.
            session.lostSince = now
            changes.append(.saveSession(session))
        }
        for index in 0..<connected {
            walk(of: walker(index), index)
            changes.append(.createToken(hash: Token.hash(token(index)), username: walker(index), at: now))
        }
        for index in 0..<otherWalks { walk(of: "away\(index)", connected + index) }
        for batch in stride(from: 0, to: changes.count, by: 2000) {
            try await store.apply(Array(changes[batch..<min(batch + 2000, changes.count)]))
        }
        try store.close()
    }
}
