import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import Testing

/// A cache of connected users on values: it starts from the active entities alone, admitting a user brings their
/// whole part without losing what was loaded at start, and a search reads the candidates it is given.
struct ResidencyRulesTests {
    private static func stored() -> StoredState {
        var state = StoredState()
        state.users = ["ann", "bob", "cat", "dan"].map { UserProfile(username: $0, name: $0.capitalized) }
        state.friendships = [("ann", "bob"), ("ann", "cat"), ("bob", "dan")]
        var session = FollowSession(id: "s1", owner: "bob", note: nil, startedAt: 1)
        session.set(.accepted, for: "ann")
        session.set(.invited, for: "dan")
        state.sessions = [session]
        state.shares = [ShareLink(id: "sh1", sessionId: "s1", owner: "bob", tokenHash: "h1", createdAt: 1, expiresAt: 9_000)]
        state.alarms = [Alarm(id: "a1", owner: "cat", text: "help", position: nil, createdAt: 1, recipients: ["ann", "bob"])]
        state.meetings = [MeetingPoint(id: "m1", owner: "dan", name: "here", lat: 1, lon: 2, time: 5_000, createdAt: 1,
                                       invitees: [MeetingInvitee(username: "bob", queuedAt: 1)])]
        state.pauses = [LocationPause(owner: "bob", from: nil, until: 4_000), LocationPause(owner: "ann", from: "cat", until: nil)]
        state.standingShares = ["ann": ["bob"]]
        return state
    }

    @Test func aConnectedCacheStartsFromTheActiveEntitiesWithNobodyResident() {
        let cache = RelayState(connected: Self.stored().active())
        #expect(cache.users.isEmpty)
        #expect(!cache.isResident("ann"))
        #expect(Set(cache.sessions.keys) == ["s1"] && Set(cache.alarms.keys) == ["a1"])
        #expect(cache.nextDeadline() == 4_000)
        // A whole cache has everyone resident.
        #expect(RelayState(Self.stored()).isResident("ann"))
    }

    @Test func admittingEveryoneOneByOneGivesTheWholeCache() {
        let stored = Self.stored()
        var cache = RelayState(connected: stored.active())
        for user in ["ann", "bob", "cat", "dan"] {
            cache.admit(stored.slice(of: [user]), of: [user])
            // What was loaded at start stays, whoever is admitted.
            #expect(Set(cache.sessions.keys) == ["s1"] && Set(cache.alarms.keys) == ["a1"] && Set(cache.meetings.keys) == ["m1"])
            #expect(cache.shares["sh1"] != nil)
            #expect(cache.isResident(user))
        }
        #expect(CacheSnapshot(cache) == CacheSnapshot(RelayState(stored)))
    }

    @Test func aSessionIdNamesItsParticipantsOnceTheActorIsResident() {
        let stored = Self.stored()
        var cache = RelayState(connected: stored.active())
        #expect(cache.usersNeeded(for: .sessionLeave(sessionId: "s1"), by: "ann") == ["ann"])
        cache.admit(stored.slice(of: ["ann"]), of: ["ann"])
        #expect(cache.usersNeeded(for: .sessionLeave(sessionId: "s1"), by: "ann") == ["ann", "bob", "dan"])
        #expect(cache.usersNeeded(for: .friendList, by: "ann") == ["ann", "bob", "cat"])
        #expect(cache.usersNeeded(forSignInOf: "ann") == ["ann", "bob", "cat"])
        #expect(cache.usersNeeded(forWatching: "h1") == ["bob"])
        #expect(cache.usersNeeded(forDueAt: 4_000) == ["bob"])
    }

    @Test func aSearchReadsTheCandidatesItIsGivenAndKeepsItsLimit() throws {
        var cache = RelayState(connected: StoredState())
        #expect(RelayState.searchPrefix(of: "ann") == "ann")
        #expect(RelayState.searchPrefix(of: "an") == nil)
        let candidates = [UserProfile(username: "anna", name: "Anna"), UserProfile(username: "annb", name: "B")]
        let outcome = try cache.searchUsers("zed", "ann", now: 0, among: candidates)
        #expect(UserSearchReply(json: .object(outcome.reply))?.users == candidates)
        for _ in 1..<RelayState.searchesPerWindow { _ = try cache.searchUsers("zed", "ann", now: 0, among: []) }
        #expect(throws: RelayError.self) { try cache.searchUsers("zed", "ann", now: 0, among: candidates) }
    }
}
