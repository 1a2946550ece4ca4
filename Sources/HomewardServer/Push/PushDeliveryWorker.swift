import CoreMetrics
import Foundation
import HomewardCore
import HomewardWebPush
import Logging

/// Delivers the durable outbox: Web Pushes (encrypted, VAPID-signed) and webhook calls (HMAC-signed).
///
/// One loop (`run`, a service of the relay's group), isolated to this actor (not an event loop): it reads what is due from the store, sends
/// each with async-http-client (non-blocking), and records the answer:
/// - 2xx: delivered, removed;
/// - 404/410 from a push service: the subscription is gone; the relay forgets it (and its pushes);
/// - 429/5xx/no answer: tried again after `Retry-After` when given, else exponential backoff, until
///   the entry is an hour old (`maxAge`), then dropped;
/// - anything else: it will never be accepted; dropped as failed.
/// Right before each Web Push the endpoint's host is resolved again and the push connects to the
/// address vetted then (`PushEndpointPolicy.target`): one that is now special-purpose is dropped, one
/// that resolves to nothing is retried.
/// An entry is removed only after its answer, so a push queued before a crash is sent after the
/// restart (at least once: a crash between the answer and the removal would send it again). Entries
/// are claimed with a lease (`PushOutboxStore.claimDueOutboxEntries`), so relays sharing one
/// PostgreSQL database do not send the same entry twice.
actor PushDeliveryWorker {
    struct Credentials: Sendable {
        let vapidKey: VAPIDKey
        let subject: VAPIDSubject
        let webhookSecret: String?
    }

    private let store: any PushOutboxStore
    private let sender: any PushTransport
    private let credentials: Credentials
    private let maxAge: Int64
    private let clock: @Sendable () -> Int64
    private let logger: Logger
    private let metrics: PushMetrics
    private var forget: (@Sendable (String) -> Void)?
    /// Where a Web Push may connect, decided right before each send (`PushEndpointPolicy.target`).
    private let target: @Sendable (URL) async -> PushEndpointPolicy.SendTarget

    private var running = false
    private var sleeper: Task<Void, Never>?
    /// Set by `wake` while the loop is busy, so that the next sleep is skipped.
    private var woken = false

    static let batchSize = 32
    /// How long a claimed entry is left to this relay (each send has a 10 s timeout); after a crash
    /// mid-send the entry is tried again when its lease ends.
    static let lease: Int64 = 120_000
    static let firstBackoff: Int64 = 1_000
    static let maxBackoff: Int64 = 300_000
    /// When the store fails, the loop waits this long before it reads again.
    static let storeRetry: Int64 = 1_000

    init(store: any PushOutboxStore, sender: any PushTransport, credentials: Credentials, maxAge: Int64,
         metrics: PushMetrics, logger: Logger, clock: @escaping @Sendable () -> Int64 = Relay.systemMillis,
         target: @escaping @Sendable (URL) async -> PushEndpointPolicy.SendTarget = { _ in .connect(nil) }) {
        self.store = store
        self.target = target
        self.sender = sender
        self.credentials = credentials
        self.maxAge = maxAge
        self.metrics = metrics
        self.logger = logger
        self.clock = clock
    }

    /// Delivers until the calling task is cancelled, after the sends in flight; `forget` removes a subscription
    /// the push service no longer knows. The HTTP client is its owner's to shut down, after this returns.
    func run(forgetSubscription forget: @escaping @Sendable (String) -> Void) async {
        precondition(!running, "the worker runs once")
        running = true
        self.forget = forget
        await deliverUntilCancelled()
    }

    /// For tests that call `deliverDue` themselves, without the loop.
    func setForget(_ forget: @escaping @Sendable (String) -> Void) {
        self.forget = forget
    }

    /// Something was queued: look now rather than at the next planned time. Callable from any thread.
    nonisolated func wake() {
        Task { await self.poke() }
    }

    private func poke() {
        woken = true
        sleeper?.cancel()
    }

    private func deliverUntilCancelled() async {
        do {
            try await store.releaseClaimsAfterRestart()
        } catch {
            // Cancelled (the relay stops) during the read: the store did not fail.
            if !Task.isCancelled {
                logger.warning("push outbox: cannot release the claims of the last run; they end with their lease", metadata: ["error": "\(error)"])
            }
        }
        while !Task.isCancelled {
            let next: Int64?
            do {
                if try await deliverDue() == Self.batchSize { continue }
                next = try await store.nextOutboxAttempt()
            } catch {
                if Task.isCancelled { return }
                logger.warning("push outbox: cannot read the store; trying again shortly", metadata: ["error": "\(error)"])
                await sleep(until: clock() + Self.storeRetry)
                continue
            }
            await sleep(until: next)
        }
    }

    /// Attempts every entry due now (at most a batch); returns how many there were.
    func deliverDue() async throws -> Int {
        let due = try await store.claimDueOutboxEntries(now: clock(), limit: Self.batchSize, lease: Self.lease)
        // Pushes go out side by side; webhook calls one after another, in the order they were
        // queued, so a dispatch desk hears of an alarm before its acknowledgement.
        await withTaskGroup(of: Void.self) { group in
            for entry in due where entry.kind == .webPush { group.addTask { await self.attempt(entry) } }
            let hooks = due.filter { $0.kind == .webhook }
            group.addTask { for entry in hooks { await self.attempt(entry) } }
        }
        metrics.outboxDepth.record(try await store.outboxDepth())
        return due.count
    }

    /// Sleeps until `deadline` (or a minute when nothing waits), or until `wake`.
    private func sleep(until deadline: Int64?) async {
        // Cancelled while the loop was reading the store: there was no nap to cancel, so do not start one.
        if woken || Task.isCancelled {
            woken = false
            return
        }
        let delay = deadline.map { max(0, $0 - clock()) } ?? 60_000
        guard delay > 0 else { return }
        // A task of its own, so that `wake` can end the nap without cancelling the loop.
        let nap = Task { _ = try? await Task.sleep(for: .milliseconds(delay)) }
        sleeper = nap
        await withTaskCancellationHandler { await nap.value } onCancel: { nap.cancel() }
        sleeper = nil
        woken = false
    }

    private func attempt(_ entry: OutboxEntry) async {
        let now = clock()
        guard now - entry.createdAt <= maxAge else {
            return await finish(entry, counter: metrics.dropped, why: "an hour old")
        }
        let request: PushRequest
        switch await prepare(entry) {
        case .send(let prepared):
            request = prepared
        case .later:
            return await retry(entry, status: nil, after: nil)
        case .drop(let why):
            return await finish(entry, counter: metrics.failed, why: why)
        }
        switch await sender.send(request) {
        case .delivered:
            await finish(entry, counter: metrics.sent, why: nil)
        case .gone(let status):
            await finish(entry, counter: metrics.failed, why: "subscription gone (\(status))")
            if entry.kind == .webPush, let id = entry.subscriptionId { forget?(id) }
        case .failed(let status):
            await finish(entry, counter: metrics.failed, why: "refused with \(status)")
        case .retry(let status, let after):
            await retry(entry, status: status, after: after)
        }
    }

    private func retry(_ entry: OutboxEntry, status: Int?, after: TimeInterval?) async {
        let attempts = entry.attempts + 1
        let backoff = min(Self.maxBackoff, Self.firstBackoff << min(attempts - 1, 20))
        let wait = after.map { Int64($0 * 1000) } ?? backoff
        let at = clock() + wait
        guard at - entry.createdAt <= maxAge else {
            return await finish(entry, counter: metrics.dropped, why: "still failing (\(status.map(String.init) ?? "no answer")) after an hour")
        }
        do {
            try await store.rescheduleOutboxEntry(id: entry.id, at: at, attempts: attempts)
        } catch {
            // The claim's lease still holds it: it is tried again when the lease ends.
            logger.warning("push outbox: cannot reschedule", metadata: ["entry": "\(entry.id)", "error": "\(error)"])
        }
        // Counted once stored, so that whoever reads the counter knows the retry is durable.
        metrics.retried.increment()
    }

    private func finish(_ entry: OutboxEntry, counter: Counter, why: String?) async {
        counter.increment()
        if let why {
            logger.info("push outbox: not delivered", metadata: ["entry": "\(entry.id)", "kind": "\(entry.kind.rawValue)", "reason": "\(why)"])
        }
        do {
            try await store.removeOutboxEntry(id: entry.id)
        } catch {
            logger.warning("push outbox: cannot remove a finished entry", metadata: ["entry": "\(entry.id)", "error": "\(error)"])
        }
    }

    /// What to do with an entry now: its request, pointed at the address vetted right before the send (a Web
    /// Push), or why it waits or goes. Also for `UnstoredPushSender`, whose entries are in no outbox.
    enum Prepared: Sendable {
        case send(PushRequest)
        /// The endpoint's host did not resolve: try again later.
        case later
        case drop(String)
    }

    func prepare(_ entry: OutboxEntry) async -> Prepared {
        var request: PushRequest
        do {
            request = try makeRequest(entry)
        } catch {
            return .drop("cannot be built: \(error)")
        }
        guard entry.kind == .webPush else { return .send(request) }
        switch await target(request.url) {
        case .connect(let address):
            request.connectTo = address
            return .send(request)
        case .unresolved:
            return .later
        case .refused(let why):
            logger.warning("push: endpoint refused at send time", metadata: ["entry": "\(entry.id)", "reason": "\(why)"])
            return .drop("endpoint refused at send time: \(why)")
        }
    }

    private func makeRequest(_ entry: OutboxEntry) throws -> PushRequest {
        guard let url = URL(string: entry.endpoint) else { throw WebPushError.badEndpoint("not a URL") }
        switch entry.kind {
        case .webhook:
            // Signed as sent now: each attempt carries its own time, every attempt the entry's id.
            return WebhookSignature.request(url: url, body: entry.payload, secret: credentials.webhookSecret ?? "",
                                            deliveryId: entry.id, now: Date(timeIntervalSince1970: Double(clock()) / 1000))
        case .webPush:
            let urgency = PushOptions.Urgency(rawValue: entry.urgency) ?? .normal
            return try PushRequest.webPush(
                endpoint: url, keys: WebPushSubscriptionKeys(p256dh: entry.p256dh, auth: entry.auth), payload: entry.payload,
                options: PushOptions(ttl: entry.ttl, urgency: urgency, topic: entry.topic),
                vapidKey: credentials.vapidKey, subject: credentials.subject)
        }
    }
}

/// The outbox's metrics on `/metrics`.
struct PushMetrics: Sendable {
    let sent: Counter
    let failed: Counter
    let retried: Counter
    let dropped: Counter
    let outboxDepth: Gauge

    init(factory: any MetricsFactory) {
        sent = Counter(label: "homeward_push_sent_total", factory: factory)
        failed = Counter(label: "homeward_push_failed_total", factory: factory)
        retried = Counter(label: "homeward_push_retried_total", factory: factory)
        dropped = Counter(label: "homeward_push_dropped_total", factory: factory)
        outboxDepth = Gauge(label: "homeward_push_outbox_depth", factory: factory)
    }
}
