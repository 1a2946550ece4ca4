@testable import HomewardCluster
@testable import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardStorage
import NIOCore
import Testing

/// Where a change notice goes (`RelayState.noticeUsers`, `timerOwners`): a relay that follows some users hears only
/// their subjects and those of its timer shards, so every user whose part of a cache a commit changes, and every
/// shard whose deadlines it moves, must be named, for every kind of change of the shared script.
struct NoticeAddressTests {
    /// Each commit decided into the state before it, as the writing relay does: what it removes recorded, and the
    /// address taken from the state after.
    private static func decided(_ commit: [StoreChange], into before: StoredState) -> (NoticeAddress, RelayState) {
        var state = RelayState(before)
        state.removedOwners = RemovedOwners()
        state.apply(commit)
        return (NoticeAddress(users: state.noticeUsers(of: commit), timerOwners: state.timerOwners(of: commit)), state)
    }

    @Test func everyUserWhoseSliceACommitChangesIsAmongItsSubjects() async throws {
        let store = try SQLiteStore.inMemory()
        var before = try await store.load()
        var addressedBeyondTheCheck = 0
        for (step, commit) in StoreChangeScript.commits.enumerated() {
            try await store.apply(commit)
            let after = try await store.load()
            let (address, state) = Self.decided(commit, into: before)
            let everyone = Set(before.users.map(\.username) + after.users.map(\.username))
            for user in everyone {
                let changed = CacheSnapshot(RelayState(before.slice(of: [user]))) != CacheSnapshot(RelayState(after.slice(of: [user])))
                #expect(!changed || address.users.contains(user), "commit \(step) changes \(user)'s slice: \(commit)")
            }
            addressedBeyondTheCheck += address.users.subtracting(state.sliceScope(of: commit)).count
            before = after
        }
        #expect(addressedBeyondTheCheck > 0, "the script names members the store's check does not")
    }

    @Test func everyTimerShardWhoseDeadlinesACommitMovesIsAmongItsSubjects() async throws {
        let store = try SQLiteStore.inMemory()
        var before = try await store.load()
        var moved = 0
        for (step, commit) in StoreChangeScript.commits.enumerated() {
            try await store.apply(commit)
            let after = try await store.load()
            let (address, _) = Self.decided(commit, into: before)
            let shards = Set(address.timerOwners.map(TimerShards.shard(of:)))
            for shard in 0..<TimerShards.count {
                var only = TimerShards.none
                only.insert(shard)
                let was = RelayState(before).nextDeadline(in: only), now = RelayState(after).nextDeadline(in: only)
                guard was != now else { continue }
                moved += 1
                #expect(shards.contains(shard), "commit \(step) moves shard \(shard)'s next deadline (\(String(describing: was)) to \(String(describing: now))): \(commit)")
            }
            before = after
        }
        #expect(moved > 0, "the script moves deadlines")
    }

    @Test func aStampedNoticeSplitsBackAndABadStampIsRefused() throws {
        let notice = ClusterCodec.encode(ChangeNotice(node: "a", revokedTokens: ["t"]))
        let stamp = NoticeStamp(node: "a-1.x", epoch: "k3", number: 42)
        let split = try #require(try NoticeStamp.split(stamp.stamped(notice)))
        #expect(split.stamp == stamp)
        #expect(try ClusterCodec.decodeNotice(split.notice).revokedTokens == ["t"])
        #expect(try NoticeStamp.split(notice) == nil, "a notice on hw.changes has no stamp")
        var bad = ByteBuffer(string: "#a k3 x\n")
        bad.writeImmutableBuffer(notice)
        #expect(throws: (any Error).self) { try NoticeStamp.split(bad) }
        #expect(throws: (any Error).self) { try NoticeStamp.split(ByteBuffer(string: "#a k3 1")) }
    }

    @Test func aCopyOfANoticeIsDroppedAndARestartedRelayStartsAfresh() {
        var duplicates = NoticeDuplicates()
        func take(_ node: String, _ epoch: String, _ number: UInt64) -> Bool {
            duplicates.take(NoticeStamp(node: node, epoch: epoch, number: number))
        }
        let first = take("a", "1", 1), copy = take("a", "1", 1), other = take("b", "1", 1)
        let later = take("a", "1", 5), older = take("a", "1", 3), restarted = take("a", "2", 1)
        #expect(first)
        #expect(!copy, "the same notice on a second subject")
        #expect(other, "another relay's numbers are its own")
        #expect(later, "numbers skip the notices about others")
        #expect(!older)
        #expect(restarted, "a new epoch: the relay restarted")
    }
}
