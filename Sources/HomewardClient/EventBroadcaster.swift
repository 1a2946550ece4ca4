import Synchronization

/// Hands every event to every subscriber, each through its own unbounded stream.
///
/// Unbounded on purpose: events are small and a consumer that counts deliveries (the
/// simulator) must not have any silently dropped. A lock rather than an actor so that a
/// subscription can end from `onTermination`, which is synchronous.
final class EventBroadcaster: Sendable {
    private struct Subscribers {
        var byID: [Int: AsyncStream<RelayEvent>.Continuation] = [:]
        var nextID = 0
        var finished = false
    }

    private let subscribers = Mutex(Subscribers())

    func subscribe() -> AsyncStream<RelayEvent> {
        let (stream, continuation) = AsyncStream<RelayEvent>.makeStream(bufferingPolicy: .unbounded)
        let id: Int? = subscribers.withLock {
            guard !$0.finished else { return nil }
            $0.nextID += 1
            $0.byID[$0.nextID] = continuation
            return $0.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.byID.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ event: RelayEvent) {
        let targets = subscribers.withLock { Array($0.byID.values) }
        for continuation in targets { continuation.yield(event) }
    }

    func finish() {
        let targets: [AsyncStream<RelayEvent>.Continuation] = subscribers.withLock { subscribers in
            subscribers.finished = true
            defer { subscribers.byID.removeAll() }
            return Array(subscribers.byID.values)
        }
        for continuation in targets { continuation.finish() }
    }
}
