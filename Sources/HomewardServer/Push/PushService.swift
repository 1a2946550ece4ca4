import CoreMetrics
import HomewardCore
import HomewardProtocol
import HomewardWebPush
import Logging

/// Puts push together for one relay: the settings the core needs (subscription checks, the webhook,
/// the worker's wake-up), what sign-in replies announce, and the delivery worker over the store's outbox.
struct PushService: Sendable {
    let settings: PushSettings
    private let worker: PushDeliveryWorker?

    init(configuration: PushConfiguration, vapidKey: VAPIDKey, store: any RelayStore, metrics: any MetricsFactory,
         logger: Logger) throws {
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
            let worker = PushDeliveryWorker(
                store: outbox, sender: PushSender(),
                credentials: .init(vapidKey: vapidKey, subject: subject, webhookSecret: configuration.webhookSecret),
                maxAge: settings.maxAge, metrics: PushMetrics(factory: metrics), logger: logger,
                target: { url in await policy.target(of: url) })
            settings.outboxChanged = { worker.wake() }
            self.worker = worker
        } else {
            self.worker = nil
        }
        settings.vapidPublicKey = vapidKey.publicKeyBase64URL
        self.settings = settings
    }

    func start(relay: Relay) async {
        await worker?.start(forgetSubscription: { [weak relay] id in relay?.removePushSubscription(id) })
    }

    func stop() async {
        await worker?.stop()
    }
}
