import HomewardCore
import HomewardWebPush
import Logging

/// Sends the pushes and webhook calls of an alarm delivered while storage fails (`Relay+Spool`): they are in
/// no outbox, so they go out at once from memory, retried on 429/5xx/no answer as the outbox would (backoff,
/// `Retry-After`), until they are `maxAge` old or the relay stops. Pushes go side by side; webhook calls one
/// after another in the order given, so a desk hears of an alarm before its acknowledgement.
struct UnstoredPushSender: Sendable {
    let worker: PushDeliveryWorker
    let sender: any PushTransport
    let maxAge: Int64
    let metrics: PushMetrics
    let logger: Logger
    let clock: @Sendable () -> Int64

    /// Callable from any thread (the relay's queue): the sends run in a task of their own.
    func send(_ entries: [OutboxEntry]) {
        Task { await deliver(entries) }
    }

    /// Returns once every entry is delivered, refused or given up.
    func deliver(_ entries: [OutboxEntry]) async {
        await withTaskGroup(of: Void.self) { group in
            for entry in entries where entry.kind == .webPush { group.addTask { await attempt(entry) } }
            let hooks = entries.filter { $0.kind == .webhook }
            group.addTask { for entry in hooks { await attempt(entry) } }
        }
    }

    private func attempt(_ entry: OutboxEntry) async {
        var attempts = 0
        while true {
            let outcome: DeliveryOutcome
            switch await worker.prepare(entry) {
            case .send(let request):
                outcome = await sender.send(request)
            case .later:
                outcome = .retry(status: nil, after: nil)
            case .drop(let why):
                metrics.failed.increment()
                return logger.info("unstored push not sent", metadata: ["entry": "\(entry.id)", "reason": "\(why)"])
            }
            switch outcome {
            case .delivered:
                return metrics.sent.increment()
            case .gone(let status), .failed(let status):
                metrics.failed.increment()
                return logger.info("unstored push not delivered", metadata: ["entry": "\(entry.id)", "status": "\(status)"])
            case .retry(_, let after):
                attempts += 1
                let backoff = min(PushDeliveryWorker.maxBackoff, PushDeliveryWorker.firstBackoff << min(attempts - 1, 20))
                let wait = after.map { Int64($0 * 1000) } ?? backoff
                guard clock() + wait - entry.createdAt <= maxAge, !Task.isCancelled else {
                    return metrics.dropped.increment()
                }
                metrics.retried.increment()
                try? await Task.sleep(for: .milliseconds(wait))
            }
        }
    }
}
