import HomewardCore
import Synchronization

/// Passes every call on to a relay's store and counts them: each is at least one statement on PostgreSQL,
/// so no call means nothing was sent there.
final class StoreCallCounter: RelayStore {
    private let store: any RelayStore
    private let count = Atomic<Int>(0)

    init(_ store: any RelayStore) { self.store = store }

    var calls: Int { count.load(ordering: .sequentiallyConsistent) }

    private func counted() { count.add(1, ordering: .sequentiallyConsistent) }

    func load() async throws -> StoredState {
        counted()
        return try await store.load()
    }

    func apply(_ changes: [StoreChange]) async throws {
        counted()
        try await store.apply(changes)
    }

    func passwordHash(of username: String) async throws -> String? {
        counted()
        return try await store.passwordHash(of: username)
    }

    func username(forTokenHash hash: String) async throws -> String? {
        counted()
        return try await store.username(forTokenHash: hash)
    }

    func versions(of users: [String]) async throws -> UserVersions? {
        counted()
        return try await store.versions(of: users)
    }

    func applyChecked(_ changes: [StoreChange], scope: UserVersions?) async throws -> UserVersions? {
        counted()
        return try await store.applyChecked(changes, scope: scope)
    }

    func sharedSecret(_ name: String, storingIfAbsent candidate: String?) async throws -> String? {
        counted()
        return try await store.sharedSecret(name, storingIfAbsent: candidate)
    }
}
