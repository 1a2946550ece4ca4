import Synchronization

/// How many change notices the bus has handed to its relay so far, and who waits for a number of them
/// (`NATSBus.barrier`): a barrier learns from its subscription how many notices came before nats-server's
/// answer, and waits until that many have been handed over.
final class NoticeHandoff: Sendable {
    private struct State {
        var handed = 0
        var ended = false
        var waiting: [(count: Int, resume: CheckedContinuation<Bool, Never>)] = []
    }

    private let state = Mutex(State())

    /// One more notice went to the relay (or, for one the bus could not read, its stand-in).
    func handedOne() {
        let ready = state.withLock { state in
            state.handed += 1
            let handed = state.handed
            let ready = state.waiting.filter { $0.count <= handed }
            state.waiting.removeAll { $0.count <= handed }
            return ready
        }
        for waiter in ready { waiter.resume.resume(returning: true) }
    }

    /// No more notices will come (the bus stopped): every wait ends unconfirmed.
    func end() {
        let waiting = state.withLock { state in
            state.ended = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiter in waiting { waiter.resume.resume(returning: false) }
    }

    /// Returns true once `count` notices have been handed over, false if the bus stopped first.
    func wait(until count: Int) async -> Bool {
        await withCheckedContinuation { continuation in
            let answer: Bool? = state.withLock { state in
                if state.handed >= count { return true }
                if state.ended { return false }
                state.waiting.append((count, continuation))
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }
}
