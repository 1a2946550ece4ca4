import Synchronization

/// The first of several racing answers resumes the waiting continuation; later ones are dropped. For a wait
/// with a deadline on work that cannot be cancelled (a store call): the work goes on, unheard.
final class FirstAnswer<Value: Sendable>: Sendable {
    private let waiting = Mutex<CheckedContinuation<Value, Never>?>(nil)

    /// Must be set before anything can answer (`Relay.load(within:)` starts the racers after it).
    func wait(_ continuation: CheckedContinuation<Value, Never>) {
        waiting.withLock { $0 = continuation }
    }

    func answer(_ value: Value) {
        waiting.withLock { $0.take() }?.resume(returning: value)
    }
}
