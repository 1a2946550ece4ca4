import Foundation

/// Hands every event to every subscriber, each through its own unbounded stream.
///
/// Unbounded on purpose: events are small and a consumer that counts deliveries (the
/// simulator) must not have any silently dropped. A lock rather than an actor so that a
/// subscription can end from `onTermination`, which is synchronous.
final class EventBroadcaster: @unchecked Sendable {
    private let lock = NSLock()
    private var subscribers: [Int: AsyncStream<RelayEvent>.Continuation] = [:]
    private var nextID = 0
    private var finished = false

    func subscribe() -> AsyncStream<RelayEvent> {
        let (stream, continuation) = AsyncStream<RelayEvent>.makeStream(bufferingPolicy: .unbounded)
        let id: Int? = lock.withLock {
            guard !finished else { return nil }
            nextID += 1
            subscribers[nextID] = continuation
            return nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = self.lock.withLock { self.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ event: RelayEvent) {
        let targets = lock.withLock { Array(subscribers.values) }
        for continuation in targets { continuation.yield(event) }
    }

    func finish() {
        let targets: [AsyncStream<RelayEvent>.Continuation] = lock.withLock {
            finished = true
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for continuation in targets { continuation.finish() }
    }
}
