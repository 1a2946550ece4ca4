@testable import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import Testing

/// Slices (`RelayStore.loadSlice`, `RelayState.replaceSlice`): one user's part of the state read from each store
/// and put in place of what a cache holds about them gives the cache a whole load gives, for every kind of change.
extension StoreContractTests {
    /// Every user of the script, and one nobody made.
    static let sliceUsers = ["ann", "bob", "cat", "dan", "eve", "zed"]

    /// The script stored commit by commit (checked writes, so that PostgreSQL's versions move), with what the store
    /// loads whole before the first and after each.
    private func storeScript(_ store: any RelayStore, after: (Int, [StoredState]) async throws -> Void) async throws {
        var loads = [try await store.load()]
        for (step, commit) in StoreChangeScript.commits.enumerated() {
            let users = RelayState(loads[step]).sliceScope(of: commit).sorted()
            let scope = try await store.versions(of: users)
            _ = try await store.applyChecked(commit, scope: scope.map { current in
                Dictionary(uniqueKeysWithValues: users.map { ($0, current[$0, default: 0]) })
            })
            loads.append(try await store.load())
            try await after(step + 1, loads)
        }
    }

    /// The users the commits from `start` to `end` concern, each looked up in the state it was decided into.
    private func concerned(from start: Int, to end: Int, _ loads: [StoredState]) -> Set<String> {
        (start..<end).reduce(into: Set<String>()) { users, step in
            users.formUnion(RelayState(loads[step]).sliceScope(of: StoreChangeScript.commits[step]))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aSliceHoldsWhatTheWholeLoadHoldsAboutItsUsersAndNoOneElsesPrivateRows(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            var ownersNamed = 0
            try await storeScript(store) { step, loads in
                let whole = loads[step]
                for users in Self.sliceUsers.map({ Set([$0]) }) + [["ann", "bob"], ["cat", "dan", "eve"]] {
                    let slice = try await store.loadSlice(of: users)
                    #expect(LoadedRows(slice) == LoadedRows(whole.slice(of: users)), "slice of \(users) after commit \(step)")
                    // Its users' versions and those of the owners of what it holds, from the same snapshot.
                    let owners = slice.ownersNamed(besides: users)
                    ownersNamed += owners.count
                    #expect(slice.versions == whole.versions.map { all in
                        Dictionary(uniqueKeysWithValues: users.union(owners).map { ($0, all[$0, default: 0]) })
                    }, "versions of \(users) and the owners \(owners) after commit \(step)")
                    // What is one user's alone is never in another's slice.
                    #expect(slice.users.allSatisfy { users.contains($0.username) })
                    #expect(slice.lastSeen.keys.allSatisfy(users.contains))
                    #expect(slice.tokens.allSatisfy { users.contains($0.username) })
                    #expect(slice.pushSubscriptions.allSatisfy { users.contains($0.username) })
                    #expect(slice.alarmContacts.keys.allSatisfy(users.contains))
                }
            }
            #expect(ownersNamed > 0, "the script gives some of the users a part in what others own")
            try await subject.close(store)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aSliceOfAUserWithNothingStoredIsEmpty(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            for commit in StoreChangeScript.commits { try await store.apply(commit) }
            let slice = try await store.loadSlice(of: ["zed", "nobody\u{0}"])
            #expect(LoadedRows(slice) == LoadedRows(StoredState()))
            #expect(slice.versions == (kind == .postgres ? ["zed": 0, "nobody\u{0}": 0] : nil))
            #expect(!LoadedRows(try await store.loadSlice(of: ["ann"])).isEmpty, "the script stored something of ann's")
            try await subject.close(store)
        }
    }

    /// A cache that missed some commits (another relay's, their notices lost), with the slices of the users those
    /// commits concern put in place, holds what the store loads whole; and so does a cache that holds commits the
    /// store refused (this relay's own decisions, undone).
    @Test(arguments: StoreKind.allCases)
    func aCacheOffBySomeCommitsHoldsTheWholeLoadOnceTheirUsersSlicesAreReplaced(_ kind: StoreKind) async throws {
        // The loads of every step first: the store stays at each step while a cache is ahead of it.
        var all: [StoredState] = []
        try await with(kind) { subject in
            let store = try await subject.open()
            try await storeScript(store) { _, loads in all = loads }
            try await subject.close(store)
        }
        var seen = Set<String>()
        try await with(kind) { subject in
            let store = try await subject.open()
            try await storeScript(store) { step, loads in
                seen.formUnion(StoreChangeScript.commits[step - 1].map(StoreChangeScript.caseName))
                let expected = CacheSnapshot(RelayState(loads[step]))
                // Behind: loaded at `start`, missed the commits since.
                for start in Set([0] + Array(max(0, step - 3)..<step)).sorted() {
                    let users = concerned(from: start, to: step, loads)
                    var cache = RelayState(loads[start])
                    cache.replaceSlice(of: users, with: try await store.loadSlice(of: users), afterRemoteChange: true)
                    #expect(CacheSnapshot(cache) == expected, "missed commits \(start)..<\(step), slices of \(users.sorted())")
                }
                // Ahead: holds commits the store does not have (refused).
                for end in (step + 1)..<min(step + 4, all.count) {
                    let users = concerned(from: step, to: end, all)
                    var cache = RelayState(all[end])
                    cache.replaceSlice(of: users, with: try await store.loadSlice(of: users))
                    #expect(CacheSnapshot(cache) == expected, "refused commits \(step)..<\(end), slices of \(users.sorted())")
                }
            }
            try await subject.close(store)
        }
        #expect(seen == StoreChangeScript.allCases, "cases never stored: \(StoreChangeScript.allCases.subtracting(seen))")
    }
}

extension LoadedRows {
    var isEmpty: Bool { self == LoadedRows(StoredState()) }
}
