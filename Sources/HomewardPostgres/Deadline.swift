import Synchronization

/// Runs `body` and returns its result, or throws `PostgresStoreError.timeout` once `timeout` has passed,
/// whichever comes first.
///
/// A task group would not do: it waits for every child, and a query on a connection whose server
/// stopped answering may not end on cancellation. So the body runs in its own task, which is cancelled
/// on timeout and left to finish in the background (its transaction is rolled back by PostgreSQL's
/// statement timeout or when its connection closes); the caller gets its answer at the deadline.
func withDeadline<T: Sendable>(
    _ timeout: Duration, operation: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let work = Task { try await body() }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            let outcome = FirstOutcome(continuation)
            let timer = Task {
                try await Task.sleep(for: timeout)
                if outcome.resolve(.failure(PostgresStoreError.timeout(operation: operation, after: timeout))) {
                    work.cancel()
                }
            }
            Task {
                let result = await work.result
                timer.cancel()
                outcome.resolve(result.mapError { $0 })
            }
        }
    } onCancel: {
        work.cancel()
    }
}

/// The continuation of `withDeadline`, resumed by whichever of the body and the timer ends first.
private final class FirstOutcome<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T, any Error>?>

    init(_ continuation: CheckedContinuation<T, any Error>) { self.continuation = Mutex(continuation) }

    /// Resumes the caller with `result` unless it was resumed already; true when this call did it.
    @discardableResult
    func resolve(_ result: Result<T, any Error>) -> Bool {
        guard let waiting = continuation.withLock({ slot in defer { slot = nil }; return slot }) else { return false }
        waiting.resume(with: result)
        return true
    }
}
