import CoreMetrics
import HomewardCore
import HomewardProtocol
import HomewardWebPush
import Logging

/// Puts push together for one relay: the settings the core needs (subscription checks, the webhook,
/// the worker's wake-up), what sign-in replies announce, and the delivery worker over the store's outbox.
/// The worker runs as a service of the relay's group (`PushWorkerService`); `sender`'s HTTP client is
/// shut down by a service of its own after the worker stopped.
struct PushService: Sendable {
    let settings: PushSettings
    /// Nil for a store without an outbox.
    let worker: PushDeliveryWorker?

    init(configuration: PushConfiguration, vapidKey: VAPIDKey, store: any RelayStore, sender: any PushTransport,
         metrics: any MetricsFactory, logger: Logger) throws {
        let subject: VAPIDSubject
        do {
            subject = try VAPIDSubject(configuration.vapidSubject)
        } catch {
            throw RelayStartupError.badVAPIDSubject(configuration.vapidSubject, reason: error.description)
        }
        var settings = PushSettings()
        settings.maxSubscriptionsPerUser = configuration.maxSubscriptionsPerUser
        settings.webhookURL = configuration.webhookURL
        let policy = PushEndpointPolicy(allowHTTP: configuration.allowHTTP, allowPrivate: configuration.allowPrivate)
        settings.checkSubscription = { endpoint, p256dh, auth throws(RelayError) in
            try await policy.check(endpoint: endpoint, p256dh: p256dh, auth: auth)
        }
        // Every store the relay ships keeps an outbox; a store without one (a test double) pushes nothing.
        if let outbox = store as? any PushOutboxStore {
            let pushMetrics = PushMetrics(factory: metrics)
            let worker = PushDeliveryWorker(
                store: outbox, sender: sender,
                credentials: .init(vapidKey: vapidKey, subject: subject, webhookSecret: configuration.webhookSecret),
                maxAge: settings.maxAge, metrics: pushMetrics, logger: logger,
                target: { url in await policy.target(of: url) })
            settings.outboxChanged = { worker.wake() }
            // An alarm delivered while the store fails (the alarm spool): its pushes go out from memory.
            let unstored = UnstoredPushSender(worker: worker, sender: sender, maxAge: settings.maxAge, metrics: pushMetrics,
                                              logger: logger, clock: Relay.systemMillis)
            settings.sendUnstored = { unstored.send($0) }
            self.worker = worker
        } else {
            self.worker = nil
        }
        settings.vapidPublicKey = vapidKey.publicKeyBase64URL
        self.settings = settings
    }
}
