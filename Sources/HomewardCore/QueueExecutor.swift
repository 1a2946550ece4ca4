import Dispatch

/// A `SerialExecutor` over a `DispatchQueue`, so that an actor runs its jobs on that queue.
///
/// The relay is "Dispatch-driven": its core owns one serial queue. On Darwin `DispatchSerialQueue`
/// is an executor already; on Linux it is missing, so this wraps the queue the same way
/// NIO's `NIOSerialEventLoopExecutor` wraps an event loop (see EventLoop+SerialExecutor.swift in
/// swift-nio): every job becomes one `async` block on the queue.
public final class QueueExecutor: SerialExecutor {
    public let queue: DispatchQueue
    /// The same queue as a `TaskExecutor`: a task given it as its preference starts on the queue, where the
    /// actor runs, instead of on the global pool and then hopping to the queue (two thread wake-ups, not one).
    public let starter: Starter

    public init(label: String) {
        queue = DispatchQueue(label: label)
        starter = Starter(queue: queue)
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

extension QueueExecutor {
    /// Runs a task's jobs on the queue as a `TaskExecutor` (`Task(executorPreference:)`). A job of an actor on the
    /// queue still goes through the actor's `QueueExecutor`; enqueued from the queue itself, it runs right after
    /// the current one, with no wake-up.
    public final class Starter: TaskExecutor {
        let queue: DispatchQueue

        init(queue: DispatchQueue) {
            self.queue = queue
        }

        public func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }
}
