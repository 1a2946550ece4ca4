import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import Testing

/// `RelayState.replaceSlice` on values: what the cache held about a user and the store no longer has goes from
/// every side of every relation and index, also where the other side's user is not among those replaced.
/// (`StoreContractTests` checks slices read from both stores against whole loads for every kind of change.)
struct SliceRulesTests {
    private static func stored(_ names: [String]) -> StoredState {
        var state = StoredState()
        state.users = names.map { UserProfile(username: $0, name: $0.capitalized) }
        return state
    }

    @Test func replacingOneUsersSliceUndoesTheirRelationsOnBothSides() {
        var before = Self.stored(["ann", "bob", "cat", "dan"])
        before.friendships = [("ann", "cat"), ("bob", "cat")]
        before.friendRequests = [(from: "dan", to: "ann"), (from: "ann", to: "dan"), (from: "ann", to: "bob")]
        before.blocks = [(blocker: "bob", blocked: "ann")]
        before.standingShares = ["cat": ["ann", "bob"]]
        before.pauses = [LocationPause(owner: "cat", from: "ann", until: nil), LocationPause(owner: "ann", from: nil, until: nil)]
        before.messages = [MessageInfo(id: "m1", from: "ann", to: "dan", text: "hi", queuedAt: 1),
                           MessageInfo(id: "m2", from: "bob", to: "cat", text: "yo", queuedAt: 2)]
        before.tokens = [IssuedToken(hash: "t1", username: "ann", createdAt: 1, lastUsed: 1)]
        // The store: ann's relations and her own rows gone; what only the others own (cat's list and pause) kept.
        var after = Self.stored(["ann", "bob", "cat", "dan"])
        after.friendships = [("bob", "cat")]
        after.standingShares = before.standingShares
        after.pauses = [before.pauses[0]]
        after.messages = [before.messages[1]]

        var cache = RelayState(before)
        cache.replaceSlice(of: ["ann"], with: after.slice(of: ["ann"]), afterRemoteChange: true)
        #expect(CacheSnapshot(cache) == CacheSnapshot(RelayState(after)))
        #expect(cache.friends(of: "cat") == ["bob"])
    }

    @Test func replacingASliceBringsWhatTheStoreGainedAboutTheUser() {
        let before = Self.stored(["ann", "bob", "cat"])
        var after = before
        var session = FollowSession(id: "s1", owner: "bob", note: nil, startedAt: 1)
        session.set(.invited, for: "ann")
        after.sessions = [session]
        after.friendships = [("ann", "cat")]
        after.alarms = [Alarm(id: "a1", owner: "cat", text: "help", position: nil, createdAt: 1, recipients: ["ann"])]
        after.meetings = [MeetingPoint(id: "mt", owner: "cat", name: "here", lat: 1, lon: 2, time: 3, createdAt: 1,
                                       invitees: [MeetingInvitee(username: "ann", queuedAt: 1)])]
        var cache = RelayState(before)
        cache.replaceSlice(of: ["ann"], with: after.slice(of: ["ann"]), afterRemoteChange: true)
        #expect(CacheSnapshot(cache) == CacheSnapshot(RelayState(after)))
    }

    @Test func aSliceOfSomeoneTheStoreDoesNotKnowRemovesThem() {
        var before = Self.stored(["ann", "bob"])
        before.friendships = [("ann", "bob")]
        var cache = RelayState(before)
        cache.replaceSlice(of: ["ann"], with: Self.stored(["bob"]).slice(of: ["ann"]), afterRemoteChange: true)
        #expect(CacheSnapshot(cache) == CacheSnapshot(RelayState(Self.stored(["bob"]))))
    }
}
