import Dispatch
import Synchronization

/// Runs `body` and returns its result, or throws `PostgresStoreError.timeout` once `timeout` has passed,
/// whichever comes first. Cancelling the caller cancels `body`.
///
/// A task group would not do: it waits for every child, and a query on a connection whose server
/// stopped answering may not end on cancellation. So the body runs in its own task (`DeadlineCall`), which is
/// cancelled on timeout and left to finish in the background (its transaction is rolled back by PostgreSQL's
/// statement timeout or when its connection closes); the caller gets its answer at the deadline.
func withDeadline<T: Sendable>(
    _ timeout: Duration, operation: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let call = DeadlineCall<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            call.start(timeout, operation: operation, body) { continuation.resume(with: $0) }
        }
    } onCancel: {
        call.cancel()
    }
}

/// One call with a deadline: `body` runs in one task, and the completion gets whichever comes first, the body's
/// result or `PostgresStoreError.timeout`, once; the other is dropped. The deadline costs no task and no timer of
/// its own: `DeadlineWatch` keeps every call's.
final class DeadlineCall<T: Sendable>: Sendable {
    private struct State {
        var completion: (@Sendable (Result<T, any Error>) -> Void)?
        var work: Task<Void, Never>?
        var cancelled = false
    }

    private let state = Mutex(State())

    init() {}

    /// Starts `body`; `completion` runs once, on the thread that ended first (the body's task, or the watch's queue).
    /// Returns the body's task, which ends after its result was handed over or dropped.
    @discardableResult
    func start(_ timeout: Duration, operation: String, _ body: @escaping @Sendable () async throws -> T,
               completion: @escaping @Sendable (Result<T, any Error>) -> Void) -> Task<Void, Never> {
        state.withLock { $0.completion = completion }
        let deadline = DeadlineWatch.shared.add(after: timeout) { [self] in
            finish(.failure(PostgresStoreError.timeout(operation: operation, after: timeout)))
        }
        let work = Task {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            DeadlineWatch.shared.remove(deadline)
            _ = self.finish(result)
        }
        let cancelNow = state.withLock { state -> Bool in
            // Ended already: the body was that quick (cancelling it changes nothing), or the deadline came first.
            guard state.completion != nil else { return true }
            state.work = work
            return state.cancelled
        }
        if cancelNow { work.cancel() }
        return work
    }

    /// The caller was cancelled: so is the body (whose end, an error or not, is then the answer).
    func cancel() {
        let work = state.withLock { state -> Task<Void, Never>? in
            state.cancelled = true
            return state.work
        }
        work?.cancel()
    }

    /// Hands `result` to the completion unless something came first; returns the body's task when this call did it.
    private func finish(_ result: Result<T, any Error>) -> Task<Void, Never>? {
        let taken = state.withLock { state -> ((@Sendable (Result<T, any Error>) -> Void)?, Task<Void, Never>?) in
            defer { state.completion = nil; state.work = nil }
            return (state.completion, state.work)
        }
        guard let completion = taken.0 else { return nil }
        completion(result)
        return taken.1
    }
}

/// Every pending call's deadline, on one Dispatch timer armed at the earliest of them.
///
/// When deadlines expire, every caller is answered first, on the watch's queue; only then are the calls' tasks
/// cancelled, each on a queue of its own (`cancellations`). Cancelling runs the task's cancellation handlers
/// where `cancel()` is called, and one of them may be slow (a connection's close, a lock): run inline, it would
/// hold up the answers of the other calls expiring with it, just when the store stopped answering and every
/// caller waits for its deadline.
///
/// Calls end long before their deadline, and each new deadline is later than those already pending, so under load
/// adding and removing one touches only a dictionary under a lock: the timer is moved only when a deadline earlier
/// than the one it is armed for comes (the first call after an idle spell, a call with a shorter timeout), and it
/// fires about once per timeout, to find the calls that did end and arm itself for the earliest still pending.
final class DeadlineWatch: Sendable {
    static let shared = DeadlineWatch()

    private struct Entry {
        let deadline: UInt64
        /// Answers the caller; returns the call's task to cancel, if it is still running.
        let expire: @Sendable () -> Task<Void, Never>?
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var nextID: UInt64 = 0
        /// When the timer fires next (uptime nanoseconds); nil when it is not armed.
        var armedAt: UInt64?
        var timer: (any DispatchSourceTimer)?
    }

    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "homeward.postgres.deadlines")
    /// Where the expired calls' tasks are cancelled, each on its own: concurrent, so that a slow cancellation
    /// holds up no other.
    private let cancellations = DispatchQueue(label: "homeward.postgres.deadline-cancellations", attributes: .concurrent)

    /// Runs `expire` on the watch's queue once `timeout` has passed, unless `remove` comes first, then cancels the
    /// task it returns on another queue.
    func add(after timeout: Duration, _ expire: @escaping @Sendable () -> Task<Void, Never>?) -> UInt64 {
        let deadline = DispatchTime.now().uptimeNanoseconds &+ Self.nanoseconds(timeout)
        return state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.entries[id] = Entry(deadline: deadline, expire: expire)
            if state.armedAt.map({ deadline < $0 }) ?? true { arm(&state, at: deadline) }
            return id
        }
    }

    /// The call ended: its deadline no longer counts. The timer stays as it is.
    func remove(_ id: UInt64) {
        _ = state.withLock { $0.entries.removeValue(forKey: id) }
    }

    /// How many deadlines are pending (for tests).
    var pending: Int { state.withLock { $0.entries.count } }

    private func arm(_ state: inout State, at deadline: UInt64) {
        state.armedAt = deadline
        let timer: any DispatchSourceTimer
        if let existing = state.timer {
            timer = existing
        } else {
            timer = DispatchSource.makeTimerSource(queue: queue)
            timer.setEventHandler { [self] in fire() }
            timer.resume()
            state.timer = timer
        }
        timer.schedule(deadline: DispatchTime(uptimeNanoseconds: deadline), leeway: .milliseconds(1))
    }

    private func fire() {
        let now = DispatchTime.now().uptimeNanoseconds
        let expired = state.withLock { state -> [@Sendable () -> Task<Void, Never>?] in
            state.armedAt = nil
            let due = state.entries.filter { $0.value.deadline <= now }
            for id in due.keys { state.entries.removeValue(forKey: id) }
            if let next = state.entries.values.lazy.map(\.deadline).min() { arm(&state, at: next) }
            return due.values.sorted { $0.deadline < $1.deadline }.map(\.expire)
        }
        // Every caller is answered before any task is cancelled.
        let running = expired.compactMap { expire in expire() }
        for work in running { cancellations.async { work.cancel() } }
    }

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) &* 1_000_000_000 &+ UInt64(max(attoseconds, 0) / 1_000_000_000)
    }
}
