@testable import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import Synchronization
import XCTest

/// A relay alone decides the next request while the previous one's write is with the store, commits the
/// writes decided meanwhile together (one transaction), and sends nothing of a decision before its commit.
/// Driven directly: SQLite behind an `InstrumentedStore` that holds commits open and fails chosen ones.
final class GroupCommitTests: XCTestCase {
    private struct Users {
        let harness: SafetyHarness
        let store: InstrumentedStore
        let sinks: [String: (RecordingSink, Authentication)]

        func sink(_ user: String) -> RecordingSink { sinks[user]!.0 }

        /// Serves `request` as `user` without waiting; its answer goes to `log` under `label`.
        func send(_ request: Request, as user: String, label: String, to log: ReplyLog) {
            let (sink, auth) = sinks[user]!
            harness.relay.serve(request, auth: auth, peer: "test", sink: sink) { log.record(label, $0) }
        }
    }

    private func connected(_ users: [String], friends: [(String, String)] = []) async throws -> Users {
        let (harness, store) = try await SafetyHarness.instrumented(users: users, friends: friends)
        var sinks: [String: (RecordingSink, Authentication)] = [:]
        for user in users { sinks[user] = try await harness.connect(user) }
        await harness.relay.drain()
        return Users(harness: harness, store: store, sinks: sinks)
    }

    /// The friend requests a batch stored, in order.
    private static func requests(in batch: [StoreChange]?) -> [String] {
        (batch ?? []).compactMap { change in
            guard case .addFriendRequest(let from, let to, _) = change else { return nil }
            return "\(from)>\(to)"
        }
    }

    func testARequestIsDecidedWhileTheOneBeforeIsStoredAndItsWriteJoinsTheNextBatch() async throws {
        let users = try await connected(["alice", "bob", "carol", "dave"])
        let committedBefore = users.store.commits
        let log = ReplyLog()
        users.store.holdWrites()
        users.send(.friendRequest(username: "bob"), as: "alice", label: "alice", to: log)
        await users.store.writeIsHeld()  // alice's request is decided; its write is with the store

        users.send(.friendRequest(username: "dave"), as: "carol", label: "carol", to: log)
        users.send(.friendRequest(username: "alice"), as: "dave", label: "dave", to: log)
        await assertDecided(users.harness.relay, "carol's and dave's requests are decided while alice's write is held")
        XCTAssertEqual(users.store.commits, committedBefore, "nothing is committed while the write is held")
        XCTAssertEqual(log.labels, [], "no reply before its write is stored")

        users.store.releaseWrites()
        await users.harness.relay.drain()
        XCTAssertEqual(log.labels, ["alice", "carol", "dave"])
        XCTAssertEqual(log.failures, [])
        let batches = Array(users.store.committedBatches.dropFirst(committedBefore))
        XCTAssertEqual(batches.count, 2, "alice's write, then one transaction for both requests decided meanwhile")
        XCTAssertEqual(Self.requests(in: batches.first), ["alice>bob"])
        XCTAssertEqual(Self.requests(in: batches.last), ["carol>dave", "dave>alice"])
    }

    func testNoReplyEventOrPositionOfABatchGoesOutBeforeItsCommit() async throws {
        let users = try await connected(["alice", "bob", "carol"], friends: [("alice", "bob")])
        let relay = users.harness.relay
        let log = ReplyLog()
        let started = try await users.harness.ok(.sessionStart(SessionOptions(invite: ["bob"])), as: users.sinks["alice"]!.1,
                                                 sink: users.sink("alice"))
        let sessionId = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)

        users.store.holdWrites()
        users.send(.friendRequest(username: "bob"), as: "carol", label: "carol's request", to: log)
        await users.store.writeIsHeld()
        users.send(.sessionAccept(sessionId: sessionId), as: "bob", label: "bob's accept", to: log)
        users.send(.friendList, as: "bob", label: "bob's list", to: log)
        await assertDecided(relay)

        relay.publish(Position(lat: 1, lon: 2, ts: users.harness.clock.now), from: "alice")
        XCTAssertEqual(log.labels, [], "no reply, also to a read, before what it shows is stored")
        XCTAssertTrue(users.sink("bob").events("friend.request").isEmpty, "no event before its commit")
        XCTAssertTrue(users.sink("alice").events("session.accepted").isEmpty, "no event before its commit")
        XCTAssertTrue(users.sink("bob").events("pos").isEmpty, "an observer whose accept is not stored gets no positions")

        users.store.releaseWrites()
        await relay.drain()
        XCTAssertEqual(log.labels, ["carol's request", "bob's accept", "bob's list"])
        XCTAssertEqual(users.sink("bob").events("friend.request").count, 1)
        XCTAssertEqual(users.sink("alice").events("session.accepted").count, 1)
        let list = try XCTUnwrap(log.reply("bob's list"))
        XCTAssertEqual(list.field("incoming")?.arrayCount, 1, "the read shows carol's request, stored before it was answered")
        relay.publish(Position(lat: 3, lon: 4, ts: users.harness.clock.now), from: "alice")
        XCTAssertEqual(users.sink("bob").events("pos").last?["lat"]?.numberValue, 3, "once stored, bob observes")
    }

    func testAFailedBatchFailsItsRequestsAndThoseDecidedAfterItAndTheStateMatchesTheStore() async throws {
        let users = try await connected(["alice", "bob", "carol", "dave"])
        let relay = users.harness.relay
        let log = ReplyLog()
        users.store.holdWrites()
        users.store.failWrite(1)
        users.send(.friendRequest(username: "bob"), as: "alice", label: "alice", to: log)
        await users.store.writeIsHeld()
        users.send(.friendRequest(username: "dave"), as: "carol", label: "carol", to: log)
        users.send(.friendList, as: "dave", label: "dave's list", to: log)
        await assertDecided(relay)

        users.store.releaseWrites()
        await relay.drain()
        XCTAssertEqual(log.labels, ["alice", "carol", "dave's list"], "each is answered once, in order")
        XCTAssertEqual(log.failures, ["alice", "carol", "dave's list"],
                       "the failed batch's request, and those decided on top of it, fail")
        XCTAssertTrue(log.results.allSatisfy { $0.1.failureCase == "storage" })
        XCTAssertTrue(users.sink("bob").events("friend.request").isEmpty, "nobody hears of what was not stored")
        XCTAssertTrue(users.sink("dave").events("friend.request").isEmpty, "nobody hears of what was not stored")

        let stored = try await users.store.load()
        XCTAssertTrue(stored.friendRequests.isEmpty, "nothing of the failed batch, nor of the one after it, is stored")
        for user in ["bob", "dave"] {
            let list = try await users.harness.ok(.friendList, as: users.sinks[user]!.1, sink: users.sink(user))
            XCTAssertEqual(list.field("incoming"), .array([]), "\(user)'s relay state matches the store")
        }
        let carol = try await users.harness.ok(.friendList, as: users.sinks["carol"]!.1, sink: users.sink("carol"))
        XCTAssertEqual(carol.field("outgoing"), .array([]), "carol's request is not half there")

        // The relay goes on: the same requests now go through and are stored.
        _ = try await users.harness.ok(.friendRequest(username: "dave"), as: users.sinks["carol"]!.1, sink: users.sink("carol"))
        XCTAssertEqual(users.sink("dave").events("friend.request").count, 1)
        let after = try await users.store.load()
        XCTAssertTrue(after.friendRequests.contains { $0 == ("carol", "dave") })
    }

    func testRepliesOnOneConnectionKeepTheirRequestsOrder() async throws {
        let users = try await connected(["alice", "bob", "carol"])
        let log = ReplyLog()
        users.store.holdWrites()
        users.send(.friendRequest(username: "bob"), as: "alice", label: "1 write", to: log)
        await users.store.writeIsHeld()
        users.send(.friendList, as: "alice", label: "2 read", to: log)
        users.send(.friendRequest(username: "carol"), as: "alice", label: "3 write", to: log)
        users.send(.userBlocks, as: "alice", label: "4 read", to: log)
        users.send(.friendRequest(username: "nobody"), as: "alice", label: "5 refused", to: log)
        users.send(.friendList, as: "alice", label: "6 read", to: log)
        await assertDecided(users.harness.relay)
        XCTAssertEqual(log.labels, [], "everything waits behind the held write")

        users.store.releaseWrites()
        await users.harness.relay.drain()
        XCTAssertEqual(log.labels, ["1 write", "2 read", "3 write", "4 read", "5 refused", "6 read"])
        XCTAssertEqual(log.failures, ["5 refused"])
        XCTAssertEqual(log.reply("2 read")?.field("outgoing")?.arrayCount, 1, "the read shows the write before it")
        XCTAssertEqual(log.reply("6 read")?.field("outgoing")?.arrayCount, 2)
    }
}

/// Group commit and the alarm spool: an alarm operation whose batch fails is spooled and heard unstored, while
/// the other requests of that batch fail.
final class GroupCommitSpoolTests: XCTestCase {
    func testAnAlarmInAFailedBatchIsSpooledAndHeardUnstoredWhileTheOtherRequestsOfTheBatchFail() async throws {
        let harness = try await AlarmSpoolTests.Harness(users: ["alice", "bob", "carol", "dave"])
        let relay = harness.relay
        let alice = try await harness.connect("alice")
        let bob = try await harness.connect("bob")
        let dave = try await harness.connect("dave")
        let log = ReplyLog()
        func send(_ request: Request, as user: (RecordingSink, Authentication), label: String) {
            relay.serve(request, auth: user.1, peer: "test", sink: user.0) { log.record(label, $0) }
        }
        harness.store.holdWrites()
        harness.store.failWrite(2)
        send(.friendRequest(username: "bob"), as: dave, label: "dave")
        await harness.store.writeIsHeld()
        send(.friendRequest(username: "carol"), as: bob, label: "bob")
        send(.alarmRaise(Request.AlarmRaise(text: "help")), as: alice, label: "alice")
        await assertDecided(relay, "bob's request and alice's alarm are decided while dave's write is held")
        XCTAssertTrue(bob.0.events("alarm").isEmpty, "nobody hears of the alarm before its batch ends")

        harness.store.releaseWrites()
        await relay.drain()
        await relay.drain()  // the read-back the failed batch asked for
        XCTAssertEqual(log.labels, ["dave", "bob", "alice"], "answered in the order decided")
        XCTAssertEqual(log.failures, ["bob"], "the failed batch's other request fails")
        let reply = try XCTUnwrap(log.reply("alice"))
        XCTAssertEqual(reply.field("stored"), false, "the alarm goes through, marked as not stored")
        let id = try XCTUnwrap(reply.field("alarm")?["alarmId"]?.stringValue)
        XCTAssertEqual(bob.0.events("alarm").map { $0["stored"] }, [false], "its recipient hears of it, once")
        XCTAssertEqual(harness.pushes.unstored.filter { $0.kind == .webPush }.map(\.subscriptionId), ["p_carol"],
                       "the offline recipient's device is pushed from memory")
        XCTAssertEqual(harness.pushes.outboxWakes, 0, "the pushes staged with the failed batch are not sent")

        let disk = try await harness.onDisk()
        XCTAssertEqual(disk.alarms.map(\.id), [id], "the read-back stored the spooled alarm")
        XCTAssertEqual(disk.friendRequests.map { "\($0.0)>\($0.1)" }, ["dave>bob"], "bob's request, in the failed batch, is not stored")
        XCTAssertEqual(try harness.spoolLines(), [], "the spool is empty once stored")
    }
}

/// The journal as a value: batches, their limit, and the order waiters are released in.
final class WriteJournalTests: XCTestCase {
    private let change = StoreChange.lastSeen(username: "a", at: 1)

    func testAWaiterWithNothingOutstandingIsReleasedAtOnce() {
        var journal = WriteJournal<Int>()
        XCTAssertEqual(journal.whenStored(1), 1)
        XCTAssertTrue(journal.isIdle)
    }

    func testWhatIsStagedWhileABatchCommitsIsTheNextBatchAndWaitersFollowTheirWrites() {
        var journal = WriteJournal<Int>()
        journal.stage([change])
        XCTAssertNil(journal.whenStored(1))
        XCTAssertEqual(journal.nextBatch()?.count, 1)
        XCTAssertNil(journal.nextBatch(), "one batch with the store at a time")
        XCTAssertNil(journal.whenStored(2), "a read behind the batch waits for it")
        journal.stage([change, change])
        XCTAssertNil(journal.whenStored(3))
        journal.stage([change])
        XCTAssertNil(journal.whenStored(4))
        XCTAssertEqual(journal.committed(), [1, 2])
        XCTAssertEqual(journal.nextBatch()?.count, 3, "both decisions staged meanwhile, one batch")
        XCTAssertEqual(journal.committed(), [3, 4])
        XCTAssertTrue(journal.isIdle)
    }

    func testABatchStopsAtItsLimitWithoutSplittingADecision() {
        var journal = WriteJournal<Int>(maxChanges: 3)
        journal.stage([change, change])
        journal.stage([change, change])
        XCTAssertNil(journal.whenStored(1))
        XCTAssertEqual(journal.nextBatch()?.count, 2)
        XCTAssertEqual(journal.committed(), [])
        XCTAssertEqual(journal.nextBatch()?.count, 2)
        XCTAssertEqual(journal.committed(), [1])
        journal.stage(Array(repeating: change, count: 5))
        XCTAssertEqual(journal.nextBatch()?.count, 5, "a decision bigger than the limit goes alone, whole")
    }

    func testAFailedBatchFailsEverythingDecidedAfterIt() {
        var journal = WriteJournal<Int>()
        journal.stage([change])
        XCTAssertNil(journal.whenStored(1))
        _ = journal.nextBatch()
        journal.stage([change, change])
        XCTAssertNil(journal.whenStored(2))
        XCTAssertNil(journal.whenStored(3))
        let failed = journal.failed()
        XCTAssertEqual(failed.waiters, [1, 2, 3])
        XCTAssertEqual(failed.lost.count, 3)
        XCTAssertTrue(journal.isIdle)
        XCTAssertNil(journal.nextBatch())
    }

    /// On a shared store: a batch is checked with, for each user, the oldest version a decision in it saw plus
    /// this relay's own commits since, so a decision staged while its relay's own write about the same user was
    /// with the store counts that write, and one that missed another relay's write fails the check.
    func testABatchIsCheckedWithTheOldestVersionItsDecisionsSawPlusOwnCommitsSince() {
        var journal = WriteJournal<Int>()
        journal.stage([change], bases: ["ann": journal.base(4, of: "ann")])
        XCTAssertEqual(journal.nextBatch()?.count, 1)
        XCTAssertEqual(journal.committingScope, ["ann": 4])
        // Decided while the first batch is with the store: the cache still holds ann at 4.
        journal.stage([change], bases: ["ann": journal.base(4, of: "ann"), "bob": journal.base(2, of: "bob")])
        _ = journal.committed(moving: ["ann": 5])
        XCTAssertEqual(journal.ownCommits, ["ann": 1])
        // Decided after it: the cache holds ann at 5 (its own commit), and sees another relay's write about bob (3).
        journal.stage([change], bases: ["ann": journal.base(5, of: "ann"), "bob": journal.base(3, of: "bob")])
        XCTAssertEqual(journal.nextBatch()?.count, 2)
        XCTAssertEqual(journal.committingScope, ["ann": 5, "bob": 2],
                       "ann counts the own commit; bob is checked at 2, which the first decision saw: it missed bob's 3")
        _ = journal.committed(moving: ["ann": 6, "bob": 3])
        XCTAssertTrue(journal.isIdle)
        XCTAssertEqual(journal.ownCommits, [:], "idle: nothing staged counts them any more")
    }
}

/// Asserts that every request submitted so far is decided while a write is held (within 5 s: without group
/// commit they would wait for the write, and the test goes on to release it rather than hang).
func assertDecided(_ relay: Relay, _ message: String = "requests are decided while the write before them is held",
                   file: StaticString = #filePath, line: UInt = #line) async {
    let decided = await finishes(within: .seconds(5)) { await relay.decided() }
    XCTAssertTrue(decided, message, file: file, line: line)
}

/// Answers in the order the relay gives them.
final class ReplyLog: Sendable {
    private let entries = Mutex<[(String, Result<RelayReply, RelayError>)]>([])

    func record(_ label: String, _ result: Result<RelayReply, RelayError>) {
        entries.withLock { $0.append((label, result)) }
    }

    var results: [(String, Result<RelayReply, RelayError>)] { entries.withLock { $0 } }
    var labels: [String] { results.map(\.0) }
    var failures: [String] { results.filter { $0.1.failureCase != nil }.map(\.0) }

    func reply(_ label: String) -> RelayReply? {
        guard case .success(let reply)? = results.first(where: { $0.0 == label })?.1 else { return nil }
        return reply
    }
}

/// Whether `body` returns within `limit`; it may go on after that (the test then fails rather than hangs).
func finishes(within limit: Duration, _ body: @escaping @Sendable () async -> Void) async -> Bool {
    let answer = FirstAnswer()
    return await withCheckedContinuation { continuation in
        answer.set(continuation)
        Task {
            await body()
            answer.resume(true)
        }
        Task {
            try? await Task.sleep(for: limit)
            answer.resume(false)
        }
    }
}

/// A continuation resumed by whichever answer comes first.
private final class FirstAnswer: Sendable {
    private let continuation = Mutex<CheckedContinuation<Bool, Never>?>(nil)

    func set(_ continuation: CheckedContinuation<Bool, Never>) { self.continuation.withLock { $0 = continuation } }

    func resume(_ value: Bool) { continuation.withLock { $0.take() }?.resume(returning: value) }
}
