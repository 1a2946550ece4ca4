import CoreMetrics
import Foundation
import HomewardCore
import HomewardProtocol
import HomewardStorage
import Logging
import Synchronization
import XCTest

/// A clock the test moves by hand, so schedules fire without waiting.
package final class ManualClock: Sendable {
    private let millis: Mutex<Int64>

    package init(_ start: Int64 = 1_763_830_000_000) { millis = Mutex(start) }

    package var now: Int64 { millis.withLock { $0 } }

    package func advance(by milliseconds: Int64) { millis.withLock { $0 += milliseconds } }

    package var function: @Sendable () -> Int64 { { self.now } }
}

/// A connection that records what the relay sends it.
package final class RecordingSink: ClientSink {
    private let received = Mutex<[JSONValue]>([])
    private let closedWith = Mutex<[CloseCode]>([])
    package let name: String

    package init(_ name: String) { self.name = name }

    package func send(_ message: EncodedMessage) {
        let value = try! JSONParser.parse(message.bytes.readableBytesView)
        received.withLock { $0.append(value) }
    }

    package func close(_ code: CloseCode, reason: String) { closedWith.withLock { $0.append(code) } }

    /// The close codes the relay asked for, in order.
    package var closes: [CloseCode] { closedWith.withLock { $0 } }

    package var messages: [JSONValue] { received.withLock { $0 } }

    package func events(_ type: String) -> [JSONValue] { messages.filter { $0["type"] == .string(type) } }

    package func clear() { received.withLock { $0.removeAll() } }
}

/// A relay over a real SQLite file with a manual clock; users are seeded straight into storage
/// so that tests need no password hashing.
package final class SafetyHarness {
    package let directory: URL
    package let clock: ManualClock
    package var safety: SafetySettings
    package private(set) var relay: Relay
    package private(set) var tokens: [String: String] = [:]
    private let wrapStore: (SQLiteStore) -> any RelayStore
    package let bus: any RelayBus
    package let ownsTimers: Bool
    package let cache: CacheMode

    package var databasePath: String { directory.appendingPathComponent("homeward.sqlite").path }

    /// `wrapStore` puts something between the relay and its database, such as an `InstrumentedStore`;
    /// `bus` and `ownsTimers` make it one relay of several.
    package init(users: [String], friends: [(String, String)], safety: SafetySettings = SafetySettings(),
         clock: ManualClock = ManualClock(), wrapStore: @escaping (SQLiteStore) -> any RelayStore = { $0 },
         bus: any RelayBus = LocalBus(), node: String = "here", ownsTimers: Bool = true, logger: Logger = Logger(label: "homeward.relay"),
         metrics: any MetricsFactory = NOOPMetricsHandler.instance, cache: CacheMode = .whole,
         seed: [StoreChange] = []) async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-safety-\(UUID().uuidString)")
        self.clock = clock
        self.safety = safety
        self.wrapStore = wrapStore
        self.bus = bus
        self.ownsTimers = ownsTimers
        self.cache = cache
        let store = try SQLiteStore(path: directory.appendingPathComponent("homeward.sqlite").path)
        var changes: [StoreChange] = []
        for user in users {
            let token = Token.mint()
            tokens[user] = token
            changes.append(.createUser(UserProfile(username: user, name: user.capitalized), passwordHash: "x", at: clock.now))
            changes.append(.createToken(hash: Token.hash(token), username: user, at: clock.now))
        }
        for (a, b) in friends { changes.append(.addFriendship(min(a, b), max(a, b), at: clock.now)) }
        try await store.apply(changes + seed)
        relay = try await Relay(store: wrapStore(store), hasher: .forTests, safety: safety, node: node, bus: bus,
                                ownsTimers: ownsTimers, cache: cache, clock: clock.function, logger: logger, metrics: metrics)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// A new relay on the same database, as after `kill -9` and a restart.
    package func restart() async throws {
        await relay.drain()
        let store = try SQLiteStore(path: directory.appendingPathComponent("homeward.sqlite").path)
        relay = try await Relay(store: wrapStore(store), hasher: .forTests, safety: safety, cache: cache, clock: clock.function)
        await relay.drain()
    }

    /// Signs `user` in on a new connection.
    package func connect(_ user: String) async throws -> (RecordingSink, Authentication) {
        let sink = RecordingSink(user)
        let reply = try await serve(.hello(token: tokens[user]!), as: nil, sink: sink).get()
        guard case .authenticated(let auth) = reply.auth else { throw RelayError.unauthenticated("no auth") }
        return (sink, auth)
    }

    package func disconnect(_ auth: Authentication, _ sink: RecordingSink) async {
        relay.disconnect(auth.username, sink: sink)
        await relay.drain()
    }

    /// Serves a request and waits until its events have been delivered.
    package func serve(_ request: Request, as auth: Authentication?, sink: RecordingSink) async -> Result<RelayReply, RelayError> {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<RelayReply, RelayError>, Never>) in
            relay.serve(request, auth: auth, peer: "test", sink: sink) { continuation.resume(returning: $0) }
        }
        await relay.drain()
        return result
    }

    package func ok(_ request: Request, as auth: Authentication, sink: RecordingSink,
            file: StaticString = #filePath, line: UInt = #line) async throws -> RelayReply {
        let result = await serve(request, as: auth, sink: sink)
        if case .failure(let error) = result { XCTFail("\(request) failed: \(error)", file: file, line: line) }
        return try result.get()
    }

    /// Moves the clock and runs whatever became due.
    package func advance(by milliseconds: Int64) async {
        clock.advance(by: milliseconds)
        await relay.runDueWork()
        await relay.drain()
    }
}

extension RelayReply {
    package func field(_ key: String) -> JSONValue? { fields.last(where: { $0.0 == key })?.1 }
}

extension SafetyHarness {
    /// A harness whose relay reaches its database through an `InstrumentedStore`, and that store.
    package static func instrumented(users: [String], friends: [(String, String)], safety: SafetySettings = SafetySettings())
        async throws -> (SafetyHarness, InstrumentedStore)
    {
        let instrumented = Mutex<InstrumentedStore?>(nil)
        let harness = try await SafetyHarness(users: users, friends: friends, safety: safety, wrapStore: { store in
            let wrapped = InstrumentedStore(store)
            instrumented.withLock { $0 = wrapped }
            return wrapped
        })
        return (harness, try XCTUnwrap(instrumented.withLock { $0 }))
    }
}
