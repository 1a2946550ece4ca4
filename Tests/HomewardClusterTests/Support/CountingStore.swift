@testable import HomewardCore
import Synchronization

/// A store between a relay and its SQLite database that keeps the users' write versions, as PostgreSQL does
/// for relays sharing it (`PostgresStore.applyChecked`), and counts how often it was loaded whole and whose slices it read.
///
/// With `checksWrites`, a checked write from a cache holding another version of one of its users is refused
/// (`StoreCacheBehind`), as PostgreSQL refuses it. "Another relay" then commits what `interleave` gives it just
/// before the relay's next checked writes, after the relay decided: the race two relays run in a cluster.
/// Without it (tests that hand notices over in order themselves), versions move on and nothing is refused.
final class CountingStore: RelayStore {
    typealias Write = @Sendable (StoredState) -> [StoreChange]

    private let store: any RelayStore
    private let checksWrites: Bool
    private let counted = Mutex((versions: UserVersions(), loads: 0, slices: [Set<String>](), refused: 0, interlopers: [Write]()))

    init(_ store: any RelayStore, checksWrites: Bool = false) {
        self.store = store
        self.checksWrites = checksWrites
    }

    /// How often the store was loaded whole.
    var loads: Int { counted.withLock { $0.loads } }

    /// The users of each slice read so far (`loadSlice`), in order.
    var slices: [Set<String>] { counted.withLock { $0.slices } }

    /// How many of the relay's writes were refused so far.
    var refused: Int { counted.withLock { $0.refused } }

    /// The versions the store holds now.
    var versions: UserVersions { counted.withLock { $0.versions } }

    /// Moves `user`'s version on as another relay's write about them would, one whose notice never comes.
    func skipAVersion(of user: String) { counted.withLock { $0.versions[user, default: 0] += 1 } }

    /// Before each of the relay's next checked writes, one of `writes` (in order) is committed, made from
    /// what is stored then (with the versions so far), moving its users' versions on.
    func interleave(_ writes: [Write]) {
        counted.withLock { $0.interlopers += writes }
    }

    /// Drops the writes `interleave` still had for the relay's next writes.
    func stopInterleaving() {
        counted.withLock { $0.interlopers.removeAll() }
    }

    func load() async throws -> StoredState {
        var stored = try await store.load()
        stored.versions = counted.withLock { counted in
            counted.loads += 1
            return counted.versions
        }
        return stored
    }

    func loadSlice(of users: Set<String>) async throws -> StoredState {
        var stored = try await store.loadSlice(of: users)
        stored.versions = counted.withLock { counted in
            counted.slices.append(users)
            return Dictionary(uniqueKeysWithValues: users.union(stored.ownersNamed(besides: users)).map {
                ($0, counted.versions[$0, default: 0])
            })
        }
        if let racing = afterSlice.withLock({ hook in defer { hook = nil }; return hook }) { try await racing() }
        return stored
    }

    /// Runs once, right after the next slice is read (its rows and versions), before the relay has it: another relay's
    /// commit racing an admission.
    func afterNextSlice(_ racing: @escaping @Sendable () async throws -> Void) {
        afterSlice.withLock { $0 = racing }
    }

    private let afterSlice = Mutex<(@Sendable () async throws -> Void)?>(nil)

    func apply(_ changes: [StoreChange]) async throws {
        _ = try await applyChecked(changes, scope: nil)
    }

    func applyChecked(_ changes: [StoreChange], scope: UserVersions?) async throws -> UserVersions? {
        guard let scope else {
            try await store.apply(changes)
            return nil
        }
        let interloper = counted.withLock { $0.interlopers.isEmpty ? nil : $0.interlopers.removeFirst() }
        if let interloper {
            var stored = try await store.load()
            stored.versions = counted.withLock { $0.versions }
            let write = interloper(stored)
            let users = RelayState(stored).writeScope(of: write)
            try await store.apply(write)
            counted.withLock { counted in for user in users { counted.versions[user, default: 0] += 1 } }
        }
        let current = counted.withLock { counted in scope.keys.reduce(into: UserVersions()) { $0[$1] = counted.versions[$1, default: 0] } }
        if checksWrites, current != scope {
            counted.withLock { $0.refused += 1 }
            throw StoreCacheBehind(expected: scope, current: current)
        }
        try await store.apply(changes)
        return counted.withLock { counted in
            for user in scope.keys { counted.versions[user, default: 0] += 1 }
            return scope.keys.reduce(into: UserVersions()) { $0[$1] = counted.versions[$1, default: 0] }
        }
    }

    func versions(of users: [String]) async throws -> UserVersions? {
        counted.withLock { counted in users.reduce(into: UserVersions()) { $0[$1] = counted.versions[$1, default: 0] } }
    }

    func passwordHash(of username: String) async throws -> String? { try await store.passwordHash(of: username) }
    func username(forTokenHash hash: String) async throws -> String? { try await store.username(forTokenHash: hash) }
    func shareOwner(forTokenHash hash: String) async throws -> String? { try await store.shareOwner(forTokenHash: hash) }
}
