import HomewardCore
import HomewardStorage
import Synchronization

/// A store between the relay and its database that counts the transactions the relay commits and
/// can fail chosen writes, as a full disk or a lost database connection would.
package final class InstrumentedStore: RelayStore {
    package struct InjectedFailure: Error, CustomStringConvertible {
        package var description: String { "injected storage failure" }
    }

    private let store: any RelayStore
    private let counts = Mutex((commits: 0, failuresAhead: [Int](), batches: [[StoreChange]]()))
    /// While held, writes wait: an operation stays with the relay until `releaseWrites`.
    private let writeGate = Mutex(WriteGate())

    private struct WriteGate {
        var held = false
        var waiting: [CheckedContinuation<Void, Never>] = []
        /// Those waiting in `writeIsHeld`, by a number of their own (so that a cancelled one can leave).
        var watchers: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWatcher = 0
    }

    private let loadGate: LoadGate?

    /// With `loadGate`, every `load` waits there until its task is cancelled.
    package init(_ store: any RelayStore, holdingLoadsAt loadGate: LoadGate? = nil) {
        self.store = store
        self.loadGate = loadGate
    }

    package var commits: Int { counts.withLock { $0.commits } }

    /// The changes of each committed transaction, in order.
    package var committedBatches: [[StoreChange]] { counts.withLock { $0.batches } }

    /// Makes the `n`th write from now (1 is the next) fail without applying anything.
    package func failWrite(_ n: Int) {
        counts.withLock { $0.failuresAhead.append(n) }
    }

    /// While down, every read and write fails, as with a database that is not running.
    private let down = Atomic<Bool>(false)

    package func setDown(_ isDown: Bool) {
        down.store(isDown, ordering: .sequentiallyConsistent)
    }

    private func checkUp() throws {
        if down.load(ordering: .sequentiallyConsistent) { throw InjectedFailure() }
    }

    package func load() async throws -> StoredState {
        try checkUp()
        try await loadGate?.hold()
        return try await store.load()
    }

    package func loadSlice(of users: Set<String>) async throws -> StoredState {
        try checkUp()
        await passReadGate()
        reads.withLock { $0.slices.append(users) }
        return try await store.loadSlice(of: users)
    }

    /// The users of each slice read, in order.
    package var sliceReads: [Set<String>] { reads.withLock { $0.slices } }
    /// How many reads of tokens' users there were (one hash or several).
    package var tokenReads: Int { reads.withLock { $0.tokens } }
    private let reads = Mutex((slices: [Set<String>](), tokens: 0))

    /// While held, reads of slices and of tokens' users wait until `releaseReads`.
    private let readGate = Mutex((held: false, waiting: [CheckedContinuation<Void, Never>](),
                                  watchers: [CheckedContinuation<Void, Never>]()))

    package func holdReads() {
        readGate.withLock { $0.held = true }
    }

    /// Returns once a read is waiting at the held gate (see `holdReads`).
    package func readIsHeld() async {
        await withCheckedContinuation { continuation in
            let now = readGate.withLock { gate in
                if gate.waiting.isEmpty { gate.watchers.append(continuation) }
                return !gate.waiting.isEmpty
            }
            if now { continuation.resume() }
        }
    }

    package func releaseReads() {
        let waiting = readGate.withLock { gate in
            gate.held = false
            defer { gate.waiting.removeAll() }
            return gate.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    private func passReadGate() async {
        await withCheckedContinuation { continuation in
            let (pass, watchers) = readGate.withLock { gate in
                guard gate.held else { return (true, [CheckedContinuation<Void, Never>]()) }
                gate.waiting.append(continuation)
                defer { gate.watchers.removeAll() }
                return (false, gate.watchers)
            }
            for watcher in watchers { watcher.resume() }
            if pass { continuation.resume() }
        }
    }

    package func apply(_ changes: [StoreChange]) async throws {
        await withCheckedContinuation { continuation in
            let (pass, watchers) = writeGate.withLock { gate in
                guard gate.held else { return (true, [CheckedContinuation<Void, Never>]()) }
                gate.waiting.append(continuation)
                defer { gate.watchers.removeAll() }
                return (false, Array(gate.watchers.values))
            }
            for watcher in watchers { watcher.resume() }
            if pass { continuation.resume() }
        }
        let fail = counts.withLock { counts -> Bool in
            counts.failuresAhead = counts.failuresAhead.map { $0 - 1 }
            let due = counts.failuresAhead.contains(0)
            counts.failuresAhead.removeAll { $0 <= 0 }
            return due
        }
        if fail { throw InjectedFailure() }
        try checkUp()
        try await store.apply(changes)
        counts.withLock { counts in
            counts.commits += 1
            counts.batches.append(changes)
        }
    }

    package func passwordHash(of username: String) async throws -> String? { try await store.passwordHash(of: username) }

    package func username(forTokenHash hash: String) async throws -> String? {
        await passReadGate()
        reads.withLock { $0.tokens += 1 }
        return try await store.username(forTokenHash: hash)
    }

    package func shareOwner(forTokenHash hash: String) async throws -> String? {
        try checkUp()
        await passReadGate()
        return try await store.shareOwner(forTokenHash: hash)
    }

    package func usernames(forTokenHashes hashes: [String]) async throws -> [String: String] {
        try checkUp()
        await passReadGate()
        reads.withLock { $0.tokens += 1 }
        return try await store.usernames(forTokenHashes: hashes)
    }

    package func holdWrites() {
        writeGate.withLock { $0.held = true }
    }

    /// Returns once a write is waiting at the held gate (see `holdWrites`), or once the waiting task is cancelled:
    /// under `withTimeout`, a write that never comes fails the test with what it waited for instead of hanging it.
    package func writeIsHeld() async {
        let id = writeGate.withLock { gate in
            defer { gate.nextWatcher += 1 }
            return gate.nextWatcher
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = writeGate.withLock { gate in
                    guard gate.waiting.isEmpty, !Task.isCancelled else { return true }
                    gate.watchers[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            writeGate.withLock { $0.watchers.removeValue(forKey: id) }?.resume()
        }
    }

    package func releaseWrites() {
        let waiting = writeGate.withLock { gate in
            gate.held = false
            defer { gate.waiting.removeAll() }
            return gate.waiting
        }
        for continuation in waiting { continuation.resume() }
    }
}
