import Foundation
import HomewardCluster
import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardStorage
import Synchronization
import XCTest

/// An alarm gets through when storage fails: delivered at once (WebSocket, push, webhook) marked
/// `"stored": false`, spooled to a file, stored once when the store is back, also after a restart.
final class AlarmSpoolTests: XCTestCase {
    /// alice raises; bob is connected, carol is not (she has a push subscription); dave is alice's friend too.
    /// The relay reaches SQLite through an `InstrumentedStore`, which the tests make fail.
    final class Harness {
        let directory: URL
        let clock: ManualClock
        private(set) var relay: Relay
        private(set) var store: InstrumentedStore
        let tokens: [String: String]
        let pushes: PushRecorder
        let webhook: Bool

        var databasePath: String { directory.appendingPathComponent("homeward.sqlite").path }
        var spoolPath: String { directory.appendingPathComponent("alarm-spool.jsonl").path }

        init(users: [String] = ["alice", "bob", "carol"], webhook: Bool = true) async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-spool-\(UUID().uuidString)")
            let clock = ManualClock()
            let pushes = PushRecorder()
            let sqlite = try SQLiteStore(path: directory.appendingPathComponent("homeward.sqlite").path)
            var tokens: [String: String] = [:]
            var changes: [StoreChange] = []
            for user in users {
                let token = Token.mint()
                tokens[user] = token
                changes.append(.createUser(UserProfile(username: user, name: user.capitalized), passwordHash: "x", at: clock.now))
                changes.append(.createToken(hash: Token.hash(token), username: user, at: clock.now))
            }
            for friend in users.dropFirst() { changes.append(.addFriendship("alice", friend, at: clock.now)) }
            changes.append(.savePushSubscription(PushSubscription(id: "p_carol", username: "carol", endpoint: "https://push.example/carol",
                                                                  p256dh: "key", auth: "auth", createdAt: clock.now,
                                                                  tokenHash: Token.hash(tokens["carol"] ?? ""))))
            try await sqlite.apply(changes)
            let store = InstrumentedStore(sqlite)
            let relay = try await Self.makeRelay(store: store, spoolPath: directory.appendingPathComponent("alarm-spool.jsonl").path,
                                                 clock: clock, pushes: pushes, webhook: webhook)
            self.directory = directory
            self.clock = clock
            self.pushes = pushes
            self.tokens = tokens
            self.store = store
            self.relay = relay
            self.webhook = webhook
            await relay.drain()
        }

        deinit { try? FileManager.default.removeItem(at: directory) }

        private static func makeRelay(store: any RelayStore, spoolPath: String, clock: ManualClock,
                                      pushes: PushRecorder, webhook: Bool) async throws -> Relay {
            var push = PushSettings(outboxChanged: { pushes.outboxChanged() })
            if webhook { push.webhookURL = "https://desk.example/hook" }
            push.sendUnstored = { entries in pushes.sent(entries) }
            return try await Relay(store: store, clock: clock.function, push: push,
                                   spool: FileAlarmSpool(path: spoolPath, codec: ClusterCodec.spoolCodec))
        }

        /// A new relay on the same database and spool file, as after `kill -9` and a restart.
        func restart() async throws {
            let sqlite = try SQLiteStore(path: databasePath)
            store = InstrumentedStore(sqlite)
            relay = try await Self.makeRelay(store: store, spoolPath: spoolPath, clock: clock, pushes: pushes, webhook: webhook)
            await relay.drain()
        }

        func connect(_ user: String) async throws -> (RecordingSink, Authentication) {
            let sink = RecordingSink(user)
            let reply = try await serve(.hello(token: tokens[user]!), as: nil, sink: sink).get()
            guard case .authenticated(let auth) = reply.auth else { throw RelayError.unauthenticated("no auth") }
            return (sink, auth)
        }

        func serve(_ request: Request, as auth: Authentication?, sink: RecordingSink) async -> Result<RelayReply, RelayError> {
            let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<RelayReply, RelayError>, Never>) in
                relay.serve(request, auth: auth, peer: "test", sink: sink) { continuation.resume(returning: $0) }
            }
            await relay.drain()
            return result
        }

        func ok(_ request: Request, as user: (RecordingSink, Authentication), file: StaticString = #filePath,
                line: UInt = #line) async throws -> RelayReply {
            let result = await serve(request, as: user.1, sink: user.0)
            if case .failure(let error) = result { XCTFail("\(request) failed: \(error)", file: file, line: line) }
            return try result.get()
        }

        /// Past the read-back interval: the next operation reads the store back (and replays the spool).
        func readBack() async {
            clock.advance(by: 1_000)
            await relay.runDueWork()
            await relay.drain()
        }

        func onDisk() async throws -> StoredState {
            let store = try SQLiteStore(path: databasePath)
            defer { try? store.close() }
            return try await store.load()
        }

        func spoolLines() throws -> [String] {
            guard let data = FileManager.default.contents(atPath: spoolPath) else { return [] }
            return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        }
    }

    /// The push worker is woken for what it has to send, not for an ack or a cancel that only drops an alarm's
    /// pushes: that wake cost a claim transaction on the store's writer and two reads, for nothing.
    func testAnAckOrCancelThatQueuesNothingLeavesThePushWorkerAsleepAndAQueuedPushWakesIt() async throws {
        let harness = try await Harness(webhook: false)
        let alice = try await harness.connect("alice")
        let bob = try await harness.connect("bob")
        // bob has no push subscription and there is no webhook: nothing of an alarm to bob alone is queued.
        for _ in 0..<2 {
            let raised = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "help", to: ["bob"])), as: alice)
            let id = try XCTUnwrap(raised.field("alarm")?["alarmId"]?.stringValue)
            _ = try await harness.ok(.alarmAck(alarmId: id), as: bob)
            _ = try await harness.ok(.alarmCancel(alarmId: id, reason: nil), as: alice)
        }
        XCTAssertEqual(harness.pushes.outboxWakes, 0)
        // carol has a subscription: her alarm's push is queued, and the worker is woken once it is stored.
        _ = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "help", to: ["carol"])), as: alice)
        XCTAssertEqual(harness.pushes.outboxWakes, 1)
    }

    func testAnAlarmRaisedWhileStorageIsDownIsDeliveredMarkedAndSpooledThenStoredOnce() async throws {
        let harness = try await Harness()
        let alice = try await harness.connect("alice")
        let bob = try await harness.connect("bob")
        harness.store.setDown(true)

        let reply = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "help", lat: 57.7, lon: 11.9)), as: alice)
        XCTAssertEqual(reply.field("stored"), false, "the reply says the alarm is not stored yet")
        let id = try XCTUnwrap(reply.field("alarm")?["alarmId"]?.stringValue)
        let heard = bob.0.events("alarm")
        XCTAssertEqual(heard.count, 1, "a connected recipient hears of it at once")
        XCTAssertEqual(heard.first?["stored"], false)
        XCTAssertEqual(heard.first?["alarm"]?["alarmId"], .string(id))

        let pushed = harness.pushes.unstored
        XCTAssertEqual(pushed.filter { $0.kind == .webPush }.map(\.subscriptionId), ["p_carol"], "carol's device is pushed at once")
        XCTAssertEqual(pushed.filter { $0.kind == .webhook }.count, 1, "the desk hears of it at once")
        let payload = try JSONParser.parse(try XCTUnwrap(pushed.first { $0.kind == .webPush }).payload)
        XCTAssertEqual(payload["stored"], false)

        XCTAssertEqual(try harness.spoolLines().count, 1, "spooled before the reply")
        let mode = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: harness.spoolPath)[.posixPermissions] as? Int)
        XCTAssertEqual(mode, 0o600)

        // bob acknowledges while the store is still down: alice hears of it, and it is spooled too.
        let ack = try await harness.ok(.alarmAck(alarmId: id), as: bob)
        XCTAssertEqual(ack.field("stored"), false)
        XCTAssertEqual(alice.0.events("alarm.acked").first?["stored"], false)
        XCTAssertEqual(try harness.spoolLines().count, 2)
        let stored1 = try await harness.onDisk().alarms
        XCTAssertTrue(stored1.isEmpty, "nothing stored while the store is down")

        harness.store.setDown(false)
        await harness.readBack()
        let disk = try await harness.onDisk()
        XCTAssertEqual(disk.alarms.map(\.id), [id], "stored once the store is back")
        XCTAssertEqual(disk.alarms.first?.acked, ["bob"], "with bob's acknowledgement")
        XCTAssertEqual(try harness.spoolLines(), [], "the spool is empty once stored")
        XCTAssertEqual(harness.pushes.outboxWakes, 0, "no push is queued again when it is stored")

        // carol was offline: she gets the alarm when she signs in, once; bob got it once.
        let carol = try await harness.connect("carol")
        XCTAssertEqual(carol.0.events("alarm").map { $0["alarm"]?["alarmId"] }, [.string(id)])
        XCTAssertEqual(bob.0.events("alarm").count, 1, "no second delivery when it is stored")
    }

    func testAnAlarmWhoseWriteFailsIsSpooledAndStoredByTheNextReadBack() async throws {
        let harness = try await Harness()
        let alice = try await harness.connect("alice")
        let bob = try await harness.connect("bob")
        harness.store.failWrite(1)

        let reply = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "help")), as: alice)
        XCTAssertEqual(reply.field("stored"), false)
        let id = try XCTUnwrap(reply.field("alarm")?["alarmId"]?.stringValue)
        XCTAssertEqual(bob.0.events("alarm").count, 1)
        // The failed write's read-back, right after the request, finds the store working: the spool goes in.
        await harness.relay.drain()
        let stored2 = try await harness.onDisk().alarms
        XCTAssertEqual(stored2.map(\.id), [id])
        XCTAssertEqual(try harness.spoolLines(), [])

        // The alarm is an ordinary stored one now: cancelling it is stored, not spooled.
        let cancel = try await harness.ok(.alarmCancel(alarmId: id, reason: nil), as: alice)
        XCTAssertNil(cancel.field("stored"))
        XCTAssertNil(bob.0.events("alarm.cancelled").first?["stored"])
        let stored3 = try await harness.onDisk().alarms
        XCTAssertTrue(stored3.isEmpty)
    }

    func testOtherRequestsStillFailWhileStorageIsDown() async throws {
        let harness = try await Harness()
        let alice = try await harness.connect("alice")
        harness.store.setDown(true)
        let result = await harness.serve(.alarmContacts(usernames: ["bob"]), as: alice.1, sink: alice.0)
        XCTAssertEqual(result.failureCase, "storage", "only alarm operations are spooled")
        XCTAssertEqual(try harness.spoolLines(), [])
    }

    func testACancelWhileStorageIsDownIsSpooledAndTheAlarmEndsOnceStored() async throws {
        let harness = try await Harness()
        let alice = try await harness.connect("alice")
        let bob = try await harness.connect("bob")
        harness.store.setDown(true)
        let raised = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "help")), as: alice)
        let id = try XCTUnwrap(raised.field("alarm")?["alarmId"]?.stringValue)
        let cancel = try await harness.ok(.alarmCancel(alarmId: id, reason: "false alarm"), as: alice)
        XCTAssertEqual(cancel.field("stored"), false)
        XCTAssertEqual(bob.0.events("alarm.cancelled").first?["stored"], false)

        harness.store.setDown(false)
        await harness.readBack()
        let stored4 = try await harness.onDisk().alarms
        XCTAssertTrue(stored4.isEmpty, "raised and ended: nothing active is stored")
        let carol = try await harness.connect("carol")
        XCTAssertTrue(carol.0.events("alarm").isEmpty, "an alarm cancelled while spooled is not shown later")
    }

    /// `kill -9` while the spool holds alarms: the next start stores them, once, and offline recipients get them.
    func testARestartWithAlarmsInTheSpoolStoresThemOnce() async throws {
        let harness = try await Harness()
        let alice = try await harness.connect("alice")
        _ = try await harness.connect("bob")
        harness.store.setDown(true)
        let first = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "first")), as: alice)
        let second = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "second")), as: alice)
        let ids = try [first, second].map { try XCTUnwrap($0.field("alarm")?["alarmId"]?.stringValue) }
        XCTAssertEqual(try harness.spoolLines().count, 2)
        let spooled = try XCTUnwrap(FileManager.default.contents(atPath: harness.spoolPath))

        try await harness.restart()
        let stored5 = try await harness.onDisk().alarms
        XCTAssertEqual(Set(stored5.map(\.id)), Set(ids), "stored at start")
        XCTAssertEqual(try harness.spoolLines(), [])
        let carol = try await harness.connect("carol")
        XCTAssertEqual(carol.0.events("alarm").compactMap { $0["alarm"]?["alarmId"]?.stringValue }.sorted(), ids.sorted())

        // The same records replayed again (a crash between the store's commit and emptying the spool): nothing
        // changes, no alarm twice.
        try spooled.write(to: URL(fileURLWithPath: harness.spoolPath))
        try await harness.restart()
        let stored6 = try await harness.onDisk().alarms
        XCTAssertEqual(stored6.map(\.id).sorted(), ids.sorted())
        let carolAgain = try await harness.connect("carol")
        XCTAssertEqual(carolAgain.0.events("alarm").compactMap { $0["alarm"]?["alarmId"]?.stringValue }.sorted(), ids.sorted())
    }

    /// A torn last record (kill -9 in the middle of an append) and a corrupt line are skipped; the good
    /// records are stored, and the relay starts.
    func testACorruptOrTornSpoolFileLosesOnlyTheBadRecords() async throws {
        let harness = try await Harness()
        let alice = try await harness.connect("alice")
        harness.store.setDown(true)
        let first = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "first")), as: alice)
        let second = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "second")), as: alice)
        let ids = try [first, second].map { try XCTUnwrap($0.field("alarm")?["alarmId"]?.stringValue) }
        let lines = try harness.spoolLines()
        XCTAssertEqual(lines.count, 2)
        // garbage between the good records, and the start of a third record cut short
        let torn = String(lines[1].prefix(lines[1].count / 2))
        let text = lines[0] + "\n" + "{\"v\":1,\"changes\":[{\"op\":\"nonsense\"}]}\n\u{0}\u{0}garbage\n" + lines[1] + "\n" + torn
        try Data(text.utf8).write(to: URL(fileURLWithPath: harness.spoolPath))

        try await harness.restart()
        let stored7 = try await harness.onDisk().alarms
        XCTAssertEqual(Set(stored7.map(\.id)), Set(ids), "both good records are stored")
        XCTAssertEqual(try harness.spoolLines(), [])
    }

    func testAnEmptyOrMissingSpoolChangesNothing() async throws {
        let harness = try await Harness()
        try Data().write(to: URL(fileURLWithPath: harness.spoolPath))
        try await harness.restart()
        let alice = try await harness.connect("alice")
        let reply = try await harness.ok(.alarmRaise(Request.AlarmRaise(text: "stored")), as: alice)
        XCTAssertNil(reply.field("stored"), "a stored alarm carries no mark")
        let stored8 = try await harness.onDisk().alarms
        XCTAssertEqual(stored8.count, 1)
    }
}

/// The file's own framing: a torn tail is skipped, and the next append starts a line of its own.
final class FileAlarmSpoolTests: XCTestCase {
    private func spool() throws -> (FileAlarmSpool, String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("homeward-spoolfile-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("alarm-spool.jsonl").path
        return (FileAlarmSpool(path: path, codec: ClusterCodec.spoolCodec), path)
    }

    private let end = StoreChange.endAlarm(id: "a_1", reason: "cancelled", at: 5)

    func testAnAppendAfterATornRecordStartsItsOwnLine() async throws {
        let (spool, path) = try spool()
        try await spool.append([end])
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("{\"v\":1,\"chan".utf8))
        try handle.close()
        try await spool.append([.cancelAlarmPushes(alarmId: "a_1")])

        let contents = try await spool.records()
        XCTAssertEqual(contents.records, [[end], [.cancelAlarmPushes(alarmId: "a_1")]])
        XCTAssertEqual(contents.skipped, 1)
    }

    func testAMissingFileIsEmptyAndRemoveAllEmptiesIt() async throws {
        let (spool, path) = try spool()
        let none = try await spool.records()
        XCTAssertEqual(none.records, [])
        try await spool.append([end])
        try await spool.removeAll()
        let after = try await spool.records()
        XCTAssertEqual(after.records, [])
        XCTAssertEqual(FileManager.default.contents(atPath: path)?.count, 0)
    }

    func testAnExistingFileWithAWideModeIsNarrowed() async throws {
        let (spool, path) = try spool()
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(), attributes: [.posixPermissions: 0o644]))
        try await spool.append([end])
        let mode = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        XCTAssertEqual(mode, 0o600)
    }
}

/// What the relay handed to the push side: entries sent without storing them, and outbox wake-ups.
final class PushRecorder: Sendable {
    private let state = Mutex((unstored: [OutboxEntry](), wakes: 0))

    func sent(_ entries: [OutboxEntry]) { state.withLock { $0.unstored += entries } }
    func outboxChanged() { state.withLock { $0.wakes += 1 } }
    var unstored: [OutboxEntry] { state.withLock { $0.unstored } }
    var outboxWakes: Int { state.withLock { $0.wakes } }
}
