import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import Testing

extension StoreContractTests {
    /// Both stores run the same statements (`StoreChange.statements(at:)`), each in its own dialect: after
    /// every commit of a script that uses every case of `StoreChange`, PostgreSQL loads what SQLite loads.
    /// (`CacheDeltaTests` checks that what SQLite loads is what a cache applying the same commits holds.)
    @Test func everyChangeLoadsTheSameFromBothStores() async throws {
        try await with(.sqlite) { sqliteSubject in
            try await with(.postgres) { postgresSubject in
                let sqlite = try await sqliteSubject.open()
                let postgres = try await postgresSubject.open()
                var seen = Set<String>()
                for (step, commit) in StoreChangeScript.commits.enumerated() {
                    try await sqlite.apply(commit)
                    try await postgres.apply(commit)
                    seen.formUnion(commit.map(StoreChangeScript.caseName))
                    let expected = LoadedRows(try await sqlite.load())
                    #expect(LoadedRows(try await postgres.load()) == expected, "after commit \(step): \(commit)")
                }
                #expect(seen == StoreChangeScript.allCases, "cases never stored: \(StoreChangeScript.allCases.subtracting(seen))")
                try await sqliteSubject.close(sqlite)
                try await postgresSubject.close(postgres)
            }
        }
    }
}

/// What a load returns, comparable: pairs as "a|b", every list sorted by its key (the stores' versions
/// are left out: SQLite keeps none).
struct LoadedRows: Equatable {
    let users: [UserProfile]
    let lastSeen: [String: Int64]
    let tokens: [IssuedToken]
    let friendships, friendRequests, blocks: [String]
    let alarmContacts, standingShares: [String: [String]]
    let sessions: [FollowSession]
    let alarms: [Alarm]
    let pushSubscriptions: [PushSubscription]
    let shares: [ShareLink]
    let pauses: [LocationPause]
    let meetings: [MeetingPoint]
    let messages: [MessageInfo]

    init(_ state: StoredState) {
        users = state.users.sorted { $0.username < $1.username }
        lastSeen = state.lastSeen
        tokens = state.tokens.sorted { $0.hash < $1.hash }
        friendships = state.friendships.map { "\($0.0)|\($0.1)" }.sorted()
        friendRequests = state.friendRequests.map { "\($0.from)|\($0.to)" }.sorted()
        blocks = state.blocks.map { "\($0.blocker)|\($0.blocked)" }.sorted()
        alarmContacts = state.alarmContacts
        standingShares = state.standingShares
        sessions = state.sessions.sorted { $0.id < $1.id }
        alarms = state.alarms.sorted { $0.id < $1.id }
        pushSubscriptions = state.pushSubscriptions.sorted { $0.id < $1.id }
        shares = state.shares.sorted { $0.id < $1.id }
        pauses = state.pauses.sorted { ($0.owner, $0.key) < ($1.owner, $1.key) }
        meetings = state.meetings.sorted { $0.id < $1.id }
        messages = state.messages.sorted { $0.id < $1.id }
    }
}
