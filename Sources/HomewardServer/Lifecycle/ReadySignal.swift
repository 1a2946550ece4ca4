import Foundation
import ServiceLifecycle
import Synchronization

/// A value one service of the relay's group makes while it starts, which others wait for: the loaded
/// relay (the listener, the push worker and the timer lease need it), the metrics port, the listening port.
///
/// A `ServiceGroup` starts its services side by side; this is how one waits for another without
/// polling. Set once: by `succeed`, by `fail` when the maker could not start (every waiter then
/// throws that error, so the group reports the maker's reason, not a waiter's), or by `withdraw` when the
/// maker was asked to stop before it had made the value (a SIGTERM during the relay's load). A waiting task
/// that is cancelled (the group is cancelled) throws `CancellationError`.
final class ReadySignal<Value: Sendable>: Sendable {
    private enum State {
        case waiting([UUID: CheckedContinuation<Value, any Error>])
        case done(Result<Value, any Error>)
    }

    /// What `value` throws once the maker withdrew.
    struct Withdrawn: Error {}

    private let state = Mutex<State>(.waiting([:]))

    func succeed(_ value: Value) { finish(.success(value)) }

    /// Does nothing once the signal is set (a later failure of the maker does not undo its value).
    func fail(_ error: any Error) { finish(.failure(error)) }

    /// The maker stopped, as asked, before it had made the value: not a failure.
    func withdraw() { finish(.failure(Withdrawn())) }

    private func finish(_ result: Result<Value, any Error>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, any Error>] in
            guard case .waiting(let waiters) = state else { return [] }
            state = .done(result)
            return Array(waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    /// For a service of the group: the value, or nil once this service is to stop without it. Its own graceful
    /// shutdown ends the wait at once (a service asked to stop while the relay still loads neither binds nor
    /// serves); when the maker withdrew, it waits for that shutdown first, since a service of the group may end
    /// only when asked (`GroupMember`). Throws the maker's error when it failed.
    func valueUnlessStopping() async throws -> Value? {
        do {
            return try await cancelWhenGracefulShutdown { try await self.value }
        } catch is Withdrawn {
            try? await gracefulShutdown()
            return nil
        } catch is CancellationError where Task.isShuttingDownGracefully {
            return nil
        }
    }

    /// The value, once it is there.
    var value: Value {
        get async throws {
            let id = UUID()
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let result = state.withLock { state -> Result<Value, any Error>? in
                        switch state {
                        case .done(let result):
                            return result
                        case .waiting(var waiters):
                            if Task.isCancelled { return .failure(CancellationError()) }
                            waiters[id] = continuation
                            state = .waiting(waiters)
                            return nil
                        }
                    }
                    if let result { continuation.resume(with: result) }
                }
            } onCancel: {
                let waiter = state.withLock { state -> CheckedContinuation<Value, any Error>? in
                    guard case .waiting(var waiters) = state, let waiter = waiters.removeValue(forKey: id) else { return nil }
                    state = .waiting(waiters)
                    return waiter
                }
                waiter?.resume(throwing: CancellationError())
            }
        }
    }
}
