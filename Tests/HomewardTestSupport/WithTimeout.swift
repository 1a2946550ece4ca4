import Foundation
import Synchronization

/// Why a test helper gave up; thrown errors fail the XCTest with this description.
package struct TestFailure: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// Races `body` against a deadline. At the deadline the test fails at once and `body` is cancelled but not
/// waited for: a body that ignores cancellation (a relay that hangs while it stops) must turn into a failure,
/// not a hung test run. `Task.sleep` here is only the guard that turns a hang into a failure.
package func withTimeout<T: Sendable>(
    _ seconds: Double, _ what: @autoclosure () -> String,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let description = what()
    let first = FirstResult<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            first.arm(continuation)
            let work = Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                first.resume(with: result)
            }
            let timer = Task {
                try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
                first.resume(with: .failure(TestFailure("timed out after \(seconds) s waiting for \(description)")))
            }
            first.onResume { work.cancel(); timer.cancel() }
        }
    } onCancel: {
        first.resume(with: .failure(CancellationError()))
    }
}

/// A continuation resumed by whichever comes first; then it cancels what is still running.
private final class FirstResult<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        /// A result that came before the continuation was armed (a cancellation racing the start).
        var early: Result<T, any Error>?
        var cleanup: (@Sendable () -> Void)?
        var resumed = false
    }
    private let state = Mutex(State())

    func arm(_ continuation: CheckedContinuation<T, any Error>) {
        let early: Result<T, any Error>? = state.withLock { state in
            guard let early = state.early else { state.continuation = continuation; return nil }
            return early
        }
        if let early { continuation.resume(with: early) }
    }

    /// Runs `cleanup` once the result is in (at once if it already is).
    func onResume(_ cleanup: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.resumed { return true }
            state.cleanup = cleanup
            return false
        }
        if now { cleanup() }
    }

    func resume(with result: Result<T, any Error>) {
        let (continuation, cleanup): (CheckedContinuation<T, any Error>?, (@Sendable () -> Void)?) = state.withLock { state in
            guard !state.resumed else { return (nil, nil) }
            state.resumed = true
            if state.continuation == nil { state.early = result }
            defer { state.continuation = nil; state.cleanup = nil }
            return (state.continuation, state.cleanup)
        }
        continuation?.resume(with: result)
        cleanup?()
    }
}
