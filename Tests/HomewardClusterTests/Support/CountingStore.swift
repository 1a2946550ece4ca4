import HomewardCore
import Synchronization

/// A store between a relay and its SQLite database that counts the writes other relays must hear of, as
/// PostgreSQL does for relays sharing it (`PostgresStore.applyCounting`), and how often it was loaded whole.
///
/// With `checksWrites`, a counted write from a cache loaded at another count is refused (`StoreCacheBehind`),
/// as PostgreSQL refuses it. "Another relay" then commits what `interleave` gives it just before the relay's
/// next counted writes, after the relay last read the count: the race two relays run in a cluster. Without
/// it (tests that hand notices over in order themselves), writes are counted and never refused.
final class CountingStore: RelayStore {
    typealias Write = @Sendable (StoredState) -> [StoreChange]

    private let store: any RelayStore
    private let checksWrites: Bool
    private let counted = Mutex((count: Int64(0), loads: 0, refused: 0, interlopers: [Write]()))

    init(_ store: any RelayStore, checksWrites: Bool = false) {
        self.store = store
        self.checksWrites = checksWrites
    }

    /// How often the store was loaded whole.
    var loads: Int { counted.withLock { $0.loads } }

    /// How many of the relay's writes were refused so far.
    var refused: Int { counted.withLock { $0.refused } }

    /// Makes the next counted write skip a count, as a transaction that took one and then failed does.
    func skipACount() { counted.withLock { $0.count += 1 } }

    /// Before each of the relay's next counted writes, one of `writes` (in order) is committed, made from
    /// what is stored then (with the count so far), and counted.
    func interleave(_ writes: [Write]) {
        counted.withLock { $0.interlopers += writes }
    }

    /// Drops the writes `interleave` still had for the relay's next writes.
    func stopInterleaving() {
        counted.withLock { $0.interlopers.removeAll() }
    }

    func load() async throws -> StoredState {
        var stored = try await store.load()
        stored.changeCount = counted.withLock { counted in
            counted.loads += 1
            return counted.count
        }
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
            var stored = try await store.load()
            stored.changeCount = counted.withLock { $0.count }
            try await store.apply(interloper(stored))
            counted.withLock { $0.count += 1 }
        }
        let current = counted.withLock { $0.count }
        if checksWrites, let expecting, expecting != current {
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
