import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import Synchronization
import XCTest

/// A cache of connected users admits in batches: the sign-ins queued in the mailbox together (one read of their tokens'
/// users, one slice read for them and one for what their backlogs name), and a storm of due work a bounded number of
/// owners at a time, each batch's users with one read, everything fired once.
final class ConnectedCacheBatchTests: XCTestCase {
    private func makeHarness(users: [String], seed: [StoreChange] = []) async throws -> (SafetyHarness, InstrumentedStore) {
        let instrumented = Mutex<InstrumentedStore?>(nil)
        let harness = try await SafetyHarness(users: users, friends: [], wrapStore: { store in
            let wrapped = InstrumentedStore(store)
            instrumented.withLock { $0 = wrapped }
            return wrapped
        }, cache: .connected, seed: seed)
        return (harness, try XCTUnwrap(instrumented.withLock { $0 }))
    }

    func testQueuedSignInsAreAdmittedTogetherAndEachIsAnsweredInItsTurn() async throws {
        let users = (0..<40).map { String(format: "user%02d", $0) }
        // Each has a friend request waiting from the next: the backlog names a user the sign-in must admit too.
        let seed = users.indices.map { StoreChange.addFriendRequest(from: users[($0 + 1) % users.count], to: users[$0], at: 1) }
        let (harness, store) = try await makeHarness(users: users, seed: seed)
        // The first sign-in's read is held until every other sign-in waits in the mailbox behind it.
        store.holdReads()
        let answers = Mutex<[String: Result<RelayReply, RelayError>]>([:])
        let allAnswered = AsyncStream<Void>.makeStream()
        let sinks = users.map { RecordingSink($0) }
        func signIn(_ index: Int) {
            harness.relay.serve(.hello(token: harness.tokens[users[index]]!), auth: nil, peer: "test", sink: sinks[index]) { result in
                let count = answers.withLock { answers in
                    answers[users[index]] = result
                    return answers.count
                }
                if count == users.count { allAnswered.continuation.finish() }
            }
        }
        signIn(0)
        await store.readIsHeld()
        // Queued as they are submitted (`serve` appends to the mailbox before it returns).
        for index in users.indices.dropFirst() { signIn(index) }
        store.releaseReads()
        for await _ in allAnswered.stream {}
        // The last backlog goes out after its reply.
        await harness.relay.drain()

        for user in users {
            let answer = try XCTUnwrap(answers.withLock { $0[user] })
            let reply = try answer.get()
            XCTAssertEqual(reply.field("user")?["username"]?.stringValue, user)
        }
        for sink in sinks {
            XCTAssertEqual(sink.events("friend.request").count, 1, "the backlog is shown, its sender admitted: \(sink.messages)")
        }
        let residents = await harness.relay.residents
        XCTAssertEqual(residents, Set(users))
        // The first sign-in alone (its token's user, their slice, their requester's), then the 39 queued behind it
        // together: not a read or three for each.
        XCTAssertLessThanOrEqual(store.sliceReads.count, 4, "\(store.sliceReads.map(\.count))")
        XCTAssertLessThanOrEqual(store.tokenReads, 2)
    }

    func testADueStormIsFiredInBoundedBatchesEachOnceWithOneReadPerBatch() async throws {
        let owners = (0..<(Relay.dueOwnersPerBatch * 2 + 50)).map { String(format: "owner%04d", $0) }
        let observers = owners.map { "obs-\($0)" }
        var seed: [StoreChange] = []
        for (index, owner) in owners.enumerated() {
            var session = FollowSession(id: "se_\(owner)", owner: owner, note: nil, startedAt: 1)
            session.set(FollowSession.InviteState.accepted, for: observers[index])
            seed.append(.saveSession(session))
        }
        // Every owner is offline from the start: their sessions' lost contact falls due at once, a grace later.
        let (harness, store) = try await makeHarness(users: owners + observers, seed: seed)
        let before = store.sliceReads.count
        await harness.advance(by: harness.safety.lostContactGrace + 1)

        let reads = Array(store.sliceReads.dropFirst(before))
        XCTAssertGreaterThanOrEqual(reads.count, 3, "a storm of \(owners.count) owners goes in batches: \(reads.map(\.count))")
        for read in reads {
            // A batch's owners and their sessions' invitees.
            XCTAssertLessThanOrEqual(read.count, Relay.dueOwnersPerBatch * 2, "one batch's users per read")
        }
        var lost: [String: Int] = [:]
        for batch in store.committedBatches {
            for case .saveSession(let session) in batch where session.lostSince != nil { lost[session.id, default: 0] += 1 }
        }
        XCTAssertEqual(Set<String>(Array(lost.keys)), Set<String>(owners.map { "se_\($0)" }), "every session's lost contact fired")
        XCTAssertEqual(lost.values.filter { $0 != 1 }.count, 0, "each exactly once")
        let needed = await harness.relay.usersNeededForDueWork(at: harness.clock.now)
        XCTAssertTrue(needed.isEmpty, "nothing is due any more: \(needed.count)")
    }
}
