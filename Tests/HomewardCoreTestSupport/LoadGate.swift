import Synchronization

/// Holds a store's read until the reading task is cancelled, which then throws `CancellationError`: a read that
/// takes as long as the test wants, to stop a relay during its load (`InstrumentedStore(_:holdingLoadsAt:)`) or a
/// service during a read.
package final class LoadGate: Sendable {
    private let state = Mutex<(held: Int, watchers: [CheckedContinuation<Void, Never>])>((0, []))

    package init() {}

    package func hold() async throws {
        let watchers = state.withLock { state in
            state.held += 1
            defer { state.watchers = [] }
            return state.watchers
        }
        for watcher in watchers { watcher.resume() }
        // Only a cancellation ends it.
        while true { try await Task.sleep(for: .seconds(3600)) }
    }

    /// Returns once a read waits at the gate.
    package func loadIsHeld() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.held == 0 { state.watchers.append(continuation) }
                return state.held > 0
            }
            if now { continuation.resume() }
        }
    }
}
