import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import Testing

/// What a cache of connected users reads from each store: the entities under way at start (`RelayStore.loadActive`),
/// and users by name prefix (`RelayStore.searchUsers`), each against the same selection made from a whole load.
extension StoreContractTests {
    /// After every commit of the script (every kind of change), `loadActive` holds exactly what `StoredState.active()`
    /// selects from the whole load, and no versions.
    @Test(arguments: StoreKind.allCases)
    func theActiveLoadHoldsWhatTheWholeLoadHoldsActiveAfterEveryCommit(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            var left = Set<String>()
            var kept = Set<String>()
            for (step, commit) in StoreChangeScript.commits.enumerated() {
                try await store.apply(commit)
                let whole = try await store.load()
                let active = try await store.loadActive()
                #expect(LoadedRows(active) == LoadedRows(whole.active()), "after commit \(step): \(commit)")
                #expect(active.versions == nil, "after commit \(step)")
                // What the selection keeps and leaves out, so that the comparison is not one of empty states.
                if !active.sessions.isEmpty { kept.insert("session") }
                if !active.shares.isEmpty { kept.insert("share") }
                if !active.alarms.isEmpty { kept.insert("alarm") }
                if !active.pauses.isEmpty { kept.insert("pause") }
                if !active.meetings.isEmpty { kept.insert("meeting") }
                if whole.shares.count > active.shares.count { left.insert("share of an ended session") }
                if whole.pauses.count > active.pauses.count { left.insert("pause without an end") }
                if !whole.users.isEmpty { left.insert("user") }
            }
            #expect(kept == ["session", "share", "alarm", "pause", "meeting"])
            #expect(left == ["share of an ended session", "pause without an end", "user"])
            try await subject.close(store)
        }
    }

    /// The active reads start from indexes that hold only active rows (active sessions and alarms, pauses with an end)
    /// and look up invitees, recipients and links per active session or alarm; meeting points are all read (each has a
    /// deadline). A search reads a range of the users' key. So at a million users neither reads users, tokens or
    /// relations, nor every invitee of every walk ever made. (On PostgreSQL sequential scans are priced out: a plan
    /// that still reads a table whole has no index it could use.)
    @Test(arguments: StoreKind.allCases)
    func theActiveReadsAndTheSearchReadOnlyIndexesOfWhatTheyBring(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            let partialIndexes = ["sessions_active_by_owner", "alarms_active_by_owner", "location_pauses_with_end"]
            for read in StoredState.Read.allCases {
                guard let statement = read.activeStatement else { continue }
                let plan = try await subject.plan(store, statement)
                let whole = plan.filter { line in
                    switch kind {
                    case .sqlite:
                        line.hasPrefix("SCAN ") && !line.hasPrefix("SCAN meeting")
                            && !partialIndexes.contains { line.contains("USING INDEX \($0)") || line.contains("USING COVERING INDEX \($0)") }
                    case .postgres:
                        line.contains("Seq Scan on ") && !line.contains("Seq Scan on meeting")
                    }
                }
                #expect(whole.isEmpty, "\(read) reads a table whole: \(plan)")
            }
            let search = try await subject.plan(store, try #require(UsernamePrefix("ann")).statement(limit: 20))
            switch kind {
            case .sqlite:
                #expect(search.contains { $0.hasPrefix("SEARCH users USING") && $0.contains("(username>? AND username<?)") }, "\(search)")
            case .postgres:
                #expect(search.contains { $0.contains("Index Cond: ((username >= ") && $0.contains("AND (username < ") }, "\(search)")
            }
            try await subject.close(store)
        }
    }

    /// Usernames chosen around the range's edges: a name that is another's prefix, the characters that sort before
    /// and after the letters (`-` `.` digits `_`), `_` (a LIKE wildcard), and `z`, the last character a name can have.
    static let searchNames = ["ann", "anna", "annabel", "ann_", "ann.x", "ann-y", "ann0", "anz", "an_x", "ano", "bob",
                              "z-a", "zz9", "zzz", "zzzz"]

    @Test(arguments: StoreKind.allCases)
    func aSearchFindsTheUsersWhoseNameStartsWithThePrefixInOrderUpToTheLimit(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(Self.searchNames.enumerated().map { index, name in
                .createUser(UserProfile(username: name, name: "\(name.capitalized) ☂\u{0}!"), passwordHash: "h", at: Int64(index))
            })
            let users = try await store.load().users
            func expected(_ prefix: String, _ limit: Int) -> [UserProfile] {
                Array(users.filter { $0.username.hasPrefix(prefix) }.sorted { $0.username < $1.username }.prefix(limit))
            }
            let prefixes = ["a", "an", "ann", "anna", "annabel", "ann_", "an_", "ann.", "ann-", "ann0", "ano", "b", "bob",
                            "z", "zz", "zzz", "zzzz", "zzzzz", "-", ".", "0", "_", "c", "nobody"]
            for prefix in prefixes {
                for limit in [1, 2, 3, 20] {
                    #expect(try await store.searchUsers(prefix: prefix, limit: limit) == expected(prefix, limit),
                            "prefix \(prefix), limit \(limit)")
                }
            }
            // Not vacuous: a full name that is others' prefix, one that is no one else's, and none at all.
            #expect(try await store.searchUsers(prefix: "ann", limit: 20).map(\.username)
                == ["ann", "ann-y", "ann.x", "ann0", "ann_", "anna", "annabel"])
            #expect(try await store.searchUsers(prefix: "an_", limit: 20).map(\.username) == ["an_x"], "_ is no wildcard")
            #expect(try await store.searchUsers(prefix: "zz", limit: 20).map(\.username) == ["zz9", "zzz", "zzzz"])
            #expect(try await store.searchUsers(prefix: "annabel", limit: 20).map(\.name) == ["Annabel ☂\u{0}!"])
            #expect(try await store.searchUsers(prefix: "nobody", limit: 20).isEmpty)
            try await subject.close(store)
        }
    }

    /// A prefix no stored name can start with finds nobody (names are normalised: lowercase `a-z 0-9 _ . -`, at most
    /// 32), rather than every user (the empty prefix) or another spelling of one (uppercase, NUL); so does a limit below 1.
    @Test(arguments: StoreKind.allCases)
    func aSearchWithAPrefixNoNameCanStartWithFindsNobody(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(Self.searchNames.map {
                .createUser(UserProfile(username: $0, name: $0), passwordHash: "h", at: 1)
            })
            for prefix in ["", "ANN", "Ann", "ann\u{0}", "ann\u{0}a", "an n", "ann%", "a*", "annä", "ａnn", "ann\u{7F}",
                           String(repeating: "a", count: 33)] {
                #expect(try await store.searchUsers(prefix: prefix, limit: 20).isEmpty, "prefix \(prefix.debugDescription)")
            }
            for limit in [0, -1] {
                #expect(try await store.searchUsers(prefix: "ann", limit: limit).isEmpty, "limit \(limit)")
            }
            #expect(try await store.searchUsers(prefix: "ann", limit: 1).map(\.username) == ["ann"], "the store answers at all")
            try await subject.close(store)
        }
    }
}
