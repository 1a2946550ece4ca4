import Histogram
import NIOCore
import Synchronization

/// Counts what walkers sent and what observers received, with the end-to-end latency of each delivery.
public final class DeliverySink: Sendable {
    public struct Snapshot: Sendable {
        public var sent: Int
        public var received: Int
        public var latency: Histogram<UInt64>
    }

    private struct State {
        var sent = 0
        var received = 0
        var latency = DeliverySink.histogram()
    }

    private let state = Mutex(State())

    public init() {}

    static func histogram() -> Histogram<UInt64> {
        Histogram<UInt64>(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
    }

    public func sent(_ count: Int = 1) {
        state.withLock { $0.sent += count }
    }

    /// A delivery: reads the stamp inside and records its latency.
    public func delivered(_ payload: ByteBuffer) {
        guard let stamp = Payload.stamp(in: payload) else { return }
        let now = BenchClock.micros()
        let latency = now > stamp ? now - stamp : 0
        state.withLock { state in
            state.received += 1
            state.latency.record(latency)
        }
    }

    /// A latency sample measured elsewhere (microseconds).
    public func recordSample(_ micros: UInt64) {
        state.withLock { state in
            state.received += 1
            state.latency.record(micros)
        }
    }

    public func reset() {
        state.withLock { $0 = State() }
    }

    public func snapshot() -> Snapshot {
        state.withLock { Snapshot(sent: $0.sent, received: $0.received, latency: $0.latency) }
    }
}

/// Waits for one message to reach every one of `expected` recipients.
public final class ArrivalCounter: Sendable {
    private struct State {
        var expected = 0
        var arrived = 0
        var started: UInt64 = 0
        var last: UInt64 = 0
        var generation = 0
        var waiter: CheckedContinuation<UInt64?, Never>?
    }

    private let state = Mutex(State())

    public init() {}

    /// Arms the counter and starts the clock.
    public func arm(expected: Int) {
        state.withLock { state in
            let generation = state.generation + 1
            state = State(expected: expected, started: BenchClock.micros(), generation: generation)
        }
    }

    public func arrived() {
        let now = BenchClock.micros()
        let resumed: (CheckedContinuation<UInt64?, Never>, UInt64)? = state.withLock { state in
            guard state.expected > 0 else { return nil }
            state.arrived += 1
            state.last = now
            guard state.arrived == state.expected, let waiter = state.waiter else { return nil }
            state.waiter = nil
            return (waiter, now - state.started)
        }
        if let (waiter, value) = resumed { waiter.resume(returning: value) }
    }

    /// Microseconds from `arm` until the last recipient had it, or nil after `timeout` seconds.
    public func wait(timeout: Double) async -> UInt64? {
        let generation = state.withLock { $0.generation }
        let timer = Task {
            try? await Task.sleep(for: .milliseconds(Int(timeout * 1000)))
            let waiter: CheckedContinuation<UInt64?, Never>? = state.withLock { state in
                guard state.generation == generation, let waiter = state.waiter else { return nil }
                state.waiter = nil
                return waiter
            }
            waiter?.resume(returning: nil)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { (continuation: CheckedContinuation<UInt64?, Never>) in
            let done: UInt64? = state.withLock { state in
                if state.arrived >= state.expected { return state.last - state.started }
                state.waiter = continuation
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    public var arrivedCount: Int { state.withLock { $0.arrived } }
}
