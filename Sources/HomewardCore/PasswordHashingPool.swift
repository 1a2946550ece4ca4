import Dispatch

/// Runs slow password hashing off the relay's queue, at most `limit` at a time.
///
/// Work beyond the limit waits as a suspended continuation, not as a thread parked on a semaphore,
/// so a burst of logins costs memory for its waiters, never threads. The hashing itself runs on a
/// concurrent Dispatch queue, whose threads are only ever busy with `limit` items.
public actor PasswordHashingPool {
    private let limit: Int
    private var running = 0
    private var waiting = FIFO<CheckedContinuation<Void, Never>>()
    private let queue = DispatchQueue(label: "homeward.passwords", attributes: .concurrent)

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    public func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        if running < limit {
            running += 1
        } else {
            // The slot is handed over by `release`, so `running` already counts this caller.
            await withCheckedContinuation { waiting.append($0) }
        }
        defer { release() }
        return await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: work()) }
        }
    }

    private func release() {
        if let next = waiting.popFirst() {
            next.resume()
        } else {
            running -= 1
        }
    }
}
