import Foundation
@testable import HomewardPostgres
import HomewardTestSupport
import Synchronization
import Testing

/// The deadline every PostgreSQL call has (`DeadlineCall`, `DeadlineWatch`): a call whose body never ends is
/// answered with `PostgresStoreError.timeout` at its deadline, and what the body returns after that is dropped.
/// The body here waits on a gate that ignores cancellation, as a query on a connection whose server stopped
/// answering may. The store itself, on a query that outlives its timeout: `PostgresStoreTests`.
struct PostgresDeadlineTests {
    @Test func aBodyThatNeverEndsIsAnsweredAtItsDeadlineAndItsLateResultIsDropped() async throws {
        let gate = Gate()
        let answers = Answers<String>()
        let clock = ContinuousClock()
        let started = clock.now
        let work = DeadlineCall<String>().start(.milliseconds(200), operation: "stuck", {
            await gate.wait()
            return "late"
        }, completion: answers.record)
        let first = try await withTimeout(10, "the deadline's answer") { await answers.first() }
        // When the answer was handed over, not when this task ran again: other suites' work may keep the test's
        // task waiting for a thread of the pool, which says nothing of the deadline.
        let waited = try #require(answers.firstAt) - started
        #expect(waited >= .milliseconds(200), "not before the deadline")
        // Loose: a machine busy with builds may be slow to run the timer; without the deadline it would wait forever.
        #expect(waited < .seconds(5))
        #expect(first.isTimeout, "\(first)")
        gate.open()
        await work.value
        #expect(answers.count == 1, "the body's result after the deadline reaches nobody")
    }

    /// The watch keeps one timer armed at the earliest deadline: one shorter than those already pending moves it.
    @Test func aShorterDeadlineAddedAfterALongerOneIsStillKept() async throws {
        let longGate = Gate(), shortGate = Gate()
        let long = Answers<String>(), short = Answers<String>()
        let longWork = DeadlineCall<String>().start(.seconds(60), operation: "long", {
            await longGate.wait()
            return "long"
        }, completion: long.record)
        let clock = ContinuousClock()
        let started = clock.now
        let shortWork = DeadlineCall<String>().start(.milliseconds(200), operation: "short", {
            await shortGate.wait()
            return "short"
        }, completion: short.record)
        let first = try await withTimeout(10, "the shorter deadline's answer") { await short.first() }
        #expect(first.isTimeout, "\(first)")
        #expect(try #require(short.firstAt) - started < .seconds(5))
        #expect(long.count == 0, "the longer deadline has not passed")
        longGate.open()
        shortGate.open()
        await longWork.value
        await shortWork.value
        #expect(try long.only() == "long", "a body that ends in time is the answer")
        #expect(short.count == 1)
    }

    /// A call's task is cancelled once its caller is answered, and off the watch's queue: a cancellation handler
    /// that takes long (a connection's close, a lock) holds up no other call's deadline. Here one blocks its
    /// thread until the test lets it go (at most 10 s, so that the test ends either way).
    @Test func aSlowCancellationDoesNotDelayAnotherCallsDeadline() async throws {
        let letGo = DispatchSemaphore(value: 0)
        let cancelling = Gate()
        let slowGate = Gate(), otherGate = Gate()
        let slow = Answers<String>(), other = Answers<String>()
        let slowWork = DeadlineCall<String>().start(.milliseconds(100), operation: "slow to cancel", {
            await withTaskCancellationHandler {
                await slowGate.wait()
            } onCancel: {
                cancelling.open()
                _ = letGo.wait(timeout: .now() + 10)
            }
            return "slow"
        }, completion: slow.record)
        try await withTimeout(20, "the slow call's cancellation under way") { await cancelling.wait() }
        #expect(slow.count == 1, "the slow call was answered before its task was cancelled")

        let started = ContinuousClock.now
        let otherWork = DeadlineCall<String>().start(.milliseconds(100), operation: "other", {
            await otherGate.wait()
            return "other"
        }, completion: other.record)
        let answer = try await withTimeout(20, "the other call's deadline answer") { await other.first() }
        let waited = try #require(other.firstAt) - started
        letGo.signal()
        #expect(answer.isTimeout, "\(answer)")
        // Loose for a loaded machine; a cancellation on the watch's queue would answer 10 s late.
        #expect(waited < .seconds(5), "the other call was answered \(waited) after it started, not at its deadline")
        slowGate.open()
        otherGate.open()
        await slowWork.value
        await otherWork.value
    }

    @Test func aBodyThatEndsInTimeIsTheAnswer() async throws {
        let value = try await withDeadline(.seconds(30), operation: "quick") { 42 }
        #expect(value == 42)
        await #expect(throws: Refusal.self) {
            try await withDeadline(.seconds(30), operation: "refused") { () async throws -> Int in throw Refusal() }
        }
    }

    @Test func cancellingTheCallerCancelsTheBody() async throws {
        let call = Task {
            try await withDeadline(.seconds(60), operation: "sleep") { try await Task.sleep(for: .seconds(60)) }
        }
        call.cancel()
        let outcome = try await withTimeout(10, "the cancelled call's end") { await call.result }
        #expect(throws: CancellationError.self) { try outcome.get() }
    }
}

private struct Refusal: Error {}

/// A wait that ignores cancellation, opened by the test.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let openNow = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiting.append(continuation)
                return false
            }
            if openNow { continuation.resume() }
        }
    }

    func open() {
        for waiting in state.withLock({ state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }) { waiting.resume() }
    }
}

/// Every answer a call's completion got, in order, and when the first came; `first` waits for one.
final class Answers<T: Sendable>: Sendable {
    private let state = Mutex<(answers: [Result<T, any Error>], firstAt: ContinuousClock.Instant?,
                               waiting: [CheckedContinuation<Result<T, any Error>, Never>])>(([], nil, []))

    var record: @Sendable (Result<T, any Error>) -> Void {
        { answer in
            let now = ContinuousClock.now
            let waiting = self.state.withLock { state -> [CheckedContinuation<Result<T, any Error>, Never>] in
                state.answers.append(answer)
                if state.firstAt == nil { state.firstAt = now }
                defer { state.waiting = [] }
                return state.waiting
            }
            for continuation in waiting { continuation.resume(returning: answer) }
        }
    }

    var count: Int { state.withLock { $0.answers.count } }

    /// When the completion got its first answer (nil: none yet).
    var firstAt: ContinuousClock.Instant? { state.withLock { $0.firstAt } }

    func first() async -> Result<T, any Error> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Result<T, any Error>? in
                if let first = state.answers.first { return first }
                state.waiting.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    func only() throws -> T {
        let answers = state.withLock { $0.answers }
        guard answers.count == 1 else { throw TestFailure("\(answers.count) answers") }
        return try answers[0].get()
    }
}

extension Result {
    var isTimeout: Bool {
        if case .failure(let error) = self, case .timeout? = error as? PostgresStoreError { return true }
        return false
    }
}
