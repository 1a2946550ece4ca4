import HomewardCore
import Synchronization

/// A store between a relay and its SQLite database that counts and checks writes as PostgreSQL does for
/// relays sharing it (`PostgresStore.applyCounting`): a counted write from a cache loaded at another count is
/// refused (`StoreCacheBehind`). "Another relay" commits what `interleave` gives it just before the relay's
/// next counted writes, after the relay last read the count: the race two relays run in a cluster.
final class InterleavingStore: RelayStore {
    typealias Write = @Sendable (StoredState) -> [StoreChange]

    private let store: any RelayStore
    private let counted = Mutex((count: Int64(0), refused: 0, interlopers: [Write]()))

    init(_ store: any RelayStore) { self.store = store }

    /// How many of the relay's writes were refused so far.
    var refused: Int { counted.withLock { $0.refused } }

    /// Before each of the relay's next counted writes, one of `writes` (in order) is committed, made from
    /// what is stored then, and counted.
    func interleave(_ writes: [Write]) {
        counted.withLock { $0.interlopers += writes }
    }

    func load() async throws -> StoredState {
        var stored = try await store.load()
        stored.changeCount = counted.withLock { $0.count }
        return stored
    }

    func apply(_ changes: [StoreChange]) async throws {
        _ = try await applyCounting(changes, expecting: nil)
    }

    func applyCounting(_ changes: [StoreChange], expecting: Int64?) async throws -> Int64? {
        guard changes.contains(where: \.concernsOtherRelays) else {
            try await store.apply(changes)
            return nil
        }
        let interloper = counted.withLock { $0.interlopers.isEmpty ? nil : $0.interlopers.removeFirst() }
        if let interloper {
            try await store.apply(interloper(try await store.load()))
            counted.withLock { $0.count += 1 }
        }
        let current = counted.withLock { $0.count }
        if let expecting, expecting != current {
            counted.withLock { $0.refused += 1 }
            throw StoreCacheBehind(expected: expecting, current: current)
        }
        try await store.apply(changes)
        return counted.withLock { counted in
            counted.count += 1
            return counted.count
        }
    }

    func changeCount() async throws -> Int64? { counted.withLock { $0.count } }
    func passwordHash(of username: String) async throws -> String? { try await store.passwordHash(of: username) }
    func username(forTokenHash hash: String) async throws -> String? { try await store.username(forTokenHash: hash) }
}
