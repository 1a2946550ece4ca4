import Dispatch

/// A `SerialExecutor` over a `DispatchQueue`, so that an actor runs its jobs on that queue.
///
/// The relay is "Dispatch-driven": its core owns one serial queue. On Darwin `DispatchSerialQueue`
/// is an executor already; on Linux it is missing, so this wraps the queue the same way
/// NIO's `NIOSerialEventLoopExecutor` wraps an event loop (see EventLoop+SerialExecutor.swift in
/// swift-nio): every job becomes one `async` block on the queue.
public final class QueueExecutor: SerialExecutor {
    public let queue: DispatchQueue

    public init(label: String) {
        queue = DispatchQueue(label: label)
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Lets `assumeIsolated` and the runtime's isolation checks see that code on the queue is isolated.
    public func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}
