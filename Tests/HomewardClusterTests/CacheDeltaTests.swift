@testable import HomewardCluster
@testable import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardStorage
import NIOCore
import Testing

/// Issue 13: another relay's commits applied to this relay's cache give the cache a reload from the store
/// would have given, for every kind of change.
struct CacheDeltaTests {
    /// One relay's commits, each as the others receive it (through the bus's encoding).
    static func overTheBus(_ changes: [StoreChange], versions: UserVersions) throws -> ChangeNotice.Commit {
        let notice = ChangeNotice(node: "a", commits: [ChangeNotice.Commit(versions: versions, changes: changes.filter(\.isCached))])
        let received = try ClusterCodec.decodeNotice(ClusterCodec.encode(notice))
        return try #require(received.commits?.first)
    }

    @Test func applyingEachCommitGivesWhatAReloadGives() async throws {
        let store = try SQLiteStore.inMemory()
        var cache = RelayState(try await store.load())
        var seen = Set<String>()
        for (step, commit) in StoreChangeScript.commits.enumerated() {
            try await store.apply(commit)
            seen.formUnion(commit.map(StoreChangeScript.caseName))
            let before = cache
            cache.apply(try Self.overTheBus(commit, versions: ["alice": Int64(step + 1)]).changes)
            let reloaded = before.reloaded(from: try await store.load(), afterRemoteChange: true)
            #expect(CacheSnapshot(cache) == CacheSnapshot(reloaded), "after commit \(step): \(commit)")
            // What derives from the cache for the presence table too: each audience and whom a pause restricts.
            for owner in reloaded.owners.union(cache.owners) {
                #expect(cache.audience(of: owner) == reloaded.audience(of: owner), "audience of \(owner) after commit \(step)")
                #expect(cache.mayBeReceived(owner) == reloaded.mayBeReceived(owner))
                #expect(cache.hasPauses(owner) == reloaded.hasPauses(owner))
            }
            #expect(cache.nextDeadline() == reloaded.nextDeadline(), "the timer's next deadline after commit \(step)")
            if step == 9 { cache.ownerWentOffline("ann", at: 9_000) } // so that ending ann's session must forget it
        }
        #expect(seen == StoreChangeScript.allCases, "cases never applied: \(StoreChangeScript.allCases.subtracting(seen))")
    }

    @Test func aSaveThatCrossedThisRelaysOwnEndIsIgnoredAsTheStoreIgnoresIt() async throws {
        let store = try SQLiteStore.inMemory()
        try await store.apply(Array(StoreChangeScript.commits.prefix(13).joined()))
        var cache = RelayState(try await store.load())
        // This relay ended the session and the alarm itself (its rules changed its cache; it stored the ends).
        let ends: [StoreChange] = [.endSession(id: "se_1", reason: "ended", at: 8_000), .removeShare(id: "sh_1"),
                                   .endAlarm(id: "al_1", reason: "cancelled", at: 8_000)]
        try await store.apply(ends)
        cache.unindex(session: "se_1")
        cache.unindex(share: "sh_1")
        cache.unindex(alarm: "al_1")
        cache.noteOwnWrite(changes: ends)
        // Another relay, not knowing yet, saved both again.
        let stale = StoreChangeScript.commits[10].filter { if case .saveSession = $0 { true } else { false } } + StoreChangeScript.commits[12].filter(\.isCached)
        try await store.apply(stale)
        cache.apply(stale)
        #expect(CacheSnapshot(cache) == CacheSnapshot(cache.reloaded(from: try await store.load(), afterRemoteChange: true)))
        #expect(cache.sessions["se_1"] == nil && cache.alarms["al_1"] == nil)
    }

    // MARK: The bus's encoding

    @Test func everyCachedChangeCrossesTheBusUnchanged() throws {
        let cached = StoreChangeScript.commits.joined().filter(\.isCached)
        let commit = try Self.overTheBus(cached, versions: ["alice": 42, "bob": 7])
        #expect(commit.versions == ["alice": 42, "bob": 7])
        // No password hash goes on the bus: no cache holds one.
        let expected = cached.map { change -> StoreChange in
            if case let .createUser(profile, _, at) = change { return .createUser(profile, passwordHash: "", at: at) }
            return change
        }
        #expect(commit.changes == expected)
        let text = String(buffer: ClusterCodec.encode(ChangeNotice(node: "a", commits: [commit])))
        #expect(!text.contains("\"h\""), "no password hash in \(text)")
    }

    @Test func aNoticeTooLargeForTheBusGoesWithoutItsCommits() throws {
        let many = (0..<20_000).map { StoreChange.removeMessage(id: "mg_\($0)") }
        let event = ChangeNotice.Event(recipients: ["bob"], message: ["type": "session.ended"])
        let notice = ChangeNotice(node: "a", events: [event], commits: [ChangeNotice.Commit(versions: ["bob": 7], changes: many)])
        let payload = ClusterCodec.encode(notice)
        #expect(payload.readableBytes <= ClusterCodec.maxPayloadWithCommits)
        let received = try ClusterCodec.decodeNotice(payload)
        #expect(received.commits == nil, "the other relays reload instead")
        #expect(received.events == [event])
    }

    @Test func aNoticeWithoutReadableCommitsStillCarriesItsEventsButNoCommits() throws {
        let event = #"{"to": ["bob"], "event": {"type": "friend.request"}}"#
        for members in [
            "", // a relay of a version without commits at all
            #", "changesVersion": 3, "commits": []"#,
            #", "changesVersion": 1, "commits": [{"count": 3, "changes": []}]"#, // one cluster-wide count: the version before
            #", "changesVersion": 2"#,
            #", "changesVersion": 2, "commits": [{"versions": {"ann": 3}, "changes": [{"op": "teleport"}]}]"#,
            #", "changesVersion": 2, "commits": [{"versions": {"ann": 3}, "changes": [{"op": "addBlock", "blocker": "ann"}]}]"#,
            #", "changesVersion": 2, "commits": [{"versions": {"ann": "3"}, "changes": []}]"#,
            #", "changesVersion": 2, "commits": [{"versions": {"ann": -1}, "changes": []}]"#,
            #", "changesVersion": 2, "commits": [{"versions": [3], "changes": []}]"#,
            #", "changesVersion": 2, "commits": [{"versions": {"ann": 3}, "changes": [{"op": "enqueueOutbox"}]}]"#,
        ] {
            let notice = try ClusterCodec.decodeNotice(ByteBuffer(string: #"{"node": "b", "events": [\#(event)]\#(members)}"#))
            #expect(notice.commits == nil, "\(members)")
            #expect(notice.events.map(\.recipients) == [["bob"]])
        }
        let plain = try ClusterCodec.decodeNotice(ClusterCodec.encode(ChangeNotice(node: "b")))
        #expect(plain.commits == [], "a notice of events only has no commits to apply, and needs no reload")
    }
}
