import HomewardCluster
import HomewardCore
import HomewardCoreTestSupport
import HomewardNATS
import HomewardProtocol
import HomewardTestSupport
import Logging
import NIOCore
import Synchronization
import XCTest

/// Two relays on a real nats-server; the presence deltas of one are lost on the way (`LossyBus`): the other
/// sees the gap at the next heartbeat, asks for the snapshot (`hw.presence.sync.<node>`) and is right again
/// within a heartbeat or two, long before the 3 s after which a silent relay counts as gone.
final class PresenceRepairTests: XCTestCase {
    func testLostDeltasAreRepairedThroughTheSnapshot() async throws {
        let server = try await NATSServerProcess.start()
        defer { server.stop() }
        let address = NATSServerAddress(host: "127.0.0.1", port: server.port)
        let lossy = LossyBus(try await NATSBus.connect(servers: [address], node: "node-a", logger: Logger(label: "test")))
        let a = try await SafetyHarness(users: ["alice", "carol"], friends: [], bus: lossy, node: "node-a")
        let asking = LossyBus(try await NATSBus.connect(servers: [address], node: "node-b", logger: Logger(label: "test")),
                              asksForSnapshots: true)
        let b = try await SafetyHarness(users: ["bob"], friends: [], bus: asking, node: "node-b")
        // Counts the snapshot requests (a listener that does not answer them).
        let listener = try await NATSClient.connect(urls: [server.url])
        let requests = Subjects()
        let asked = try await listener.subscribe(subject: "hw.presence.sync.>")
        let counting = Task { for await message in asked { requests.append(message.subject) } }
        try await listener.flush()
        try await a.relay.startBus()
        try await b.relay.startBus()

        let (_, aliceAuth) = try await a.connect("alice")
        try await until("node b hears of alice from her delta") { b.relay.presence.isOnline("alice") }
        XCTAssertEqual(requests.all, [], "deltas in order: no snapshot")

        lossy.dropDeltas(1)
        let (carol, carolAuth) = try await a.connect("carol")
        // Lost: only the heartbeat (each second) tells node b it missed a delta.
        try await until("node b learns of carol through node a's snapshot") { b.relay.presence.isOnline("carol") }
        XCTAssertEqual(requests.all, ["hw.presence.sync.node-a"])
        XCTAssertTrue(b.relay.presence.isOnline("alice"), "what node b knew stays")

        lossy.dropDeltas(1)
        await a.disconnect(carolAuth, carol)
        try await until("node b learns that carol left through node a's snapshot") { !b.relay.presence.isOnline("carol") }
        XCTAssertEqual(requests.all.count, 2)
        XCTAssertTrue(b.relay.presence.isOnline("alice"))
        _ = aliceAuth

        counting.cancel()
        await listener.close()
        await a.relay.stopBus()
        await b.relay.stopBus()
    }

    /// Polls `condition` until it holds, for at most 2.5 s: less than a relay's expiry, so only a repair can
    /// make it hold (the state it waits for comes with no event to await).
    private func until(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(2500)
        while !condition() {
            guard ContinuousClock.now < deadline else { return XCTFail("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// The subjects of the messages the listener heard.
private final class Subjects: Sendable {
    private let subjects = Mutex<[String]>([])
    func append(_ subject: String) { subjects.withLock { $0.append(subject) } }
    var all: [String] { subjects.withLock { $0 } }
}

/// A relay's NATS bus that loses the presence deltas it is told to (a message lost on the way), and
/// (`asksForSnapshots` false: to check that the test fails without the repair) never asks for a snapshot.
private final class LossyBus: RelayBus {
    private let bus: NATSBus
    private let toDrop = Mutex(0)
    private let asksForSnapshots: Bool

    init(_ bus: NATSBus, asksForSnapshots: Bool = true) {
        self.bus = bus
        self.asksForSnapshots = asksForSnapshots
    }

    /// The next `count` deltas are not sent.
    func dropDeltas(_ count: Int) { toDrop.withLock { $0 += count } }

    var isShared: Bool { true }
    func start(delivering receiver: any BusReceiver) async throws { try await bus.start(delivering: receiver) }
    func publishPosition(_ message: EncodedMessage, of walker: String, restriction: PositionRestriction?) {
        bus.publishPosition(message, of: walker, restriction: restriction)
    }
    func updateInterest(adding: Set<String>, removing: Set<String>) async { await bus.updateInterest(adding: adding, removing: removing) }
    func lastPosition(of walker: String, for askers: [String]) async -> LastPositionAnswer? { await bus.lastPosition(of: walker, for: askers) }
    func publishChanges(_ notice: ChangeNotice) { bus.publishChanges(notice) }
    func publishPresence(_ message: PresenceMessage) {
        if case .delta = message, toDrop.withLock({ count in
            guard count > 0 else { return false }
            count -= 1
            return true
        }) { return }
        bus.publishPresence(message)
    }
    func requestPresenceSnapshot(of node: String) {
        if asksForSnapshots { bus.requestPresenceSnapshot(of: node) }
    }
    func flush() async { await bus.flush() }
    func barrier() async -> Int? { await bus.barrier() }
    var generation: Int? { bus.generation }
    func stop() async { await bus.stop() }
}
