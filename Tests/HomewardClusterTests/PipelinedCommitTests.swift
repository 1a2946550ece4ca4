@testable import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardTestSupport
import Synchronization
import XCTest

/// On a shared bus a committed batch's notice is confirmed by nats-server before anything of the batch is heard.
/// The next batch does not wait for that confirmation: it goes to the store meanwhile, and nothing of either batch
/// is heard before its own notice was confirmed.
final class PipelinedCommitTests: XCTestCase {
    func testTheNextBatchGoesToTheStoreWhileTheNoticeOfTheOneBeforeIsConfirmed() async throws {
        let bus = RecordingBus()
        let instrumented = Mutex<InstrumentedStore?>(nil)
        let harness = try await SafetyHarness(users: ["alice", "bob", "carol"], friends: [("alice", "bob"), ("alice", "carol")],
                                              wrapStore: { sqlite in
                                                  let store = InstrumentedStore(sqlite)
                                                  instrumented.withLock { $0 = store }
                                                  return store
                                              }, bus: bus)
        let store = try XCTUnwrap(instrumented.withLock { $0 })
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let (carol, _) = try await harness.connect("carol")
        bus.clear()

        // alice's alarm is with the store; bob's is decided meanwhile and waits for the next batch.
        store.holdWrites()
        let relay = harness.relay
        let replies = Replies()
        relay.serve(.alarmRaise(Request.AlarmRaise(text: "first")), auth: aliceAuth, peer: "test", sink: alice, done: replies.record(0))
        try await withTimeout(10, "alice's batch at the store") { await store.writeIsHeld() }
        let submitted = relay.mailbox.withLock { $0.submitted }
        relay.serve(.alarmRaise(Request.AlarmRaise(text: "second")), auth: bobAuth, peer: "test", sink: bob, done: replies.record(1))
        // Nothing to await: the mailbox goes idle once bob's request is decided and staged behind alice's batch.
        try await withTimeout(10, "bob's alarm decided") {
            while relay.mailbox.withLock({ $0.submitted == submitted || $0.running || $0.taken < $0.submitted }) {
                try Task.checkCancellation()
                await Task.yield()
            }
        }

        // alice's batch commits; its notice's confirmation is held, and the gate holds whatever write comes next.
        bus.holdFlushes()
        store.releaseWrites()
        store.holdWrites()
        do {
            try await withTimeout(10, "bob's batch at the store while alice's notice is unconfirmed") { await store.writeIsHeld() }
        } catch {
            // A relay that sends the next batch only once the notice is confirmed: it waits for the bus forever.
            bus.releaseFlushes()
            store.releaseWrites()
            XCTFail("bob's batch did not go to the store while alice's notice waited for its confirmation")
            throw error
        }
        // alice's notice is published in the same turn of the mailbox, just after bob's batch was handed over: this
        // task may look before it is out. (Nothing to await on the recording bus: its log is polled, yielding.)
        try await withTimeout(10, "alice's notice published") {
            while bus.notices.isEmpty {
                try Task.checkCancellation()
                await Task.yield()
            }
        }
        XCTAssertEqual(bus.notices.count, 1, "alice's commit is told, bob's is not stored yet: \(bus.notices)")
        XCTAssertEqual(carol.events("alarm"), [], "nothing of alice's batch is heard before its notice is confirmed")
        XCTAssertEqual(alice.events("alarm"), [])

        bus.releaseFlushes()
        store.releaseWrites()
        let results = try await withTimeout(10, "both replies") { await replies.both() }
        guard case .success = results[0], case .success = results[1] else { return XCTFail("\(results)") }
        await relay.drain()
        let texts = bus.notices.flatMap(\.events).compactMap { $0.message["alarm"]?["text"]?.stringValue }
        XCTAssertEqual(texts, ["first", "second"], "the notices keep the commits' order")
        XCTAssertEqual(carol.events("alarm").compactMap { $0["alarm"]?["text"]?.stringValue }, ["first"])
        XCTAssertEqual(alice.events("alarm").compactMap { $0["alarm"]?["text"]?.stringValue }, ["second"])
    }
}

/// The replies to two requests, by index; `both` waits for them.
private final class Replies: Sendable {
    private let state = Mutex<(replies: [Int: Result<RelayReply, RelayError>], waiting: CheckedContinuation<[Result<RelayReply, RelayError>], Never>?)>(([:], nil))

    func record(_ index: Int) -> @Sendable (Result<RelayReply, RelayError>) -> Void {
        { reply in
            let done = self.state.withLock { state -> (CheckedContinuation<[Result<RelayReply, RelayError>], Never>, [Result<RelayReply, RelayError>])? in
                state.replies[index] = reply
                guard state.replies.count == 2, let waiting = state.waiting else { return nil }
                state.waiting = nil
                return (waiting, [state.replies[0]!, state.replies[1]!])
            }
            if let (waiting, replies) = done { waiting.resume(returning: replies) }
        }
    }

    func both() async -> [Result<RelayReply, RelayError>] {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [Result<RelayReply, RelayError>]? in
                if state.replies.count == 2 { return [state.replies[0]!, state.replies[1]!] }
                state.waiting = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
