import CoreMetrics
import HomewardCluster
import HomewardCore
import HomewardStorage
import HomewardWebPush
import Logging
import ServiceLifecycle

/// What the other services need of the relay once it has loaded.
struct StartedRelay: Sendable {
    let relay: Relay
    /// The key `GET /v1/push/key` shows.
    let vapidPublicKey: String
    /// Nil when the store keeps no outbox.
    let pushWorker: PushDeliveryWorker?
}

/// The relay itself: at start it reads the VAPID key and loads its state from the store (which needs
/// PostgreSQL's pool, a service before it, running) and starts hearing the bus; at graceful shutdown, which
/// comes once the listener has closed every connection, it drains what was queued, tells the other relays
/// it is gone, and closes (`Relay.close`: the last writes; from then on it touches the store no more).
struct RelayCoreService: Service, CustomStringConvertible {
    let configuration: RelayConfiguration
    let store: any RelayStore
    /// Applied to `store` for the relay's own calls (tests inject faults here).
    let wrapStore: @Sendable (any RelayStore) -> any RelayStore
    let bus: any RelayBus
    let pushSender: any PushTransport
    let metrics: any MetricsFactory
    let logger: Logger
    let started: ReadySignal<StartedRelay>

    var description: String { "relay" }

    func run() async throws {
        let relay: Relay
        do {
            guard let ready = try await start() else {
                started.withdraw()
                return
            }
            started.succeed(ready)
            relay = ready.relay
        } catch {
            started.fail(error)
            throw error
        }
        // Returns at graceful shutdown; throws when the group is cancelled (a service failed): stop either way.
        try? await gracefulShutdown()
        await relay.drain()
        await relay.stopBus()
        await relay.close()
    }

    /// The relay, loaded and hearing the bus; nil when the graceful shutdown came first (a SIGTERM during a long
    /// load stops the load rather than waiting for it).
    private func start() async throws -> StartedRelay? {
        let config = configuration
        let vapidKey = try await RelayVAPIDKey.load(path: config.push.vapidKeyPath, dataDirectory: config.dataDirectory,
                                                    store: store, storeName: config.store.description, logger: logger)
        let push = try PushService(configuration: config.push, vapidKey: vapidKey, store: store, sender: pushSender,
                                   metrics: metrics, logger: logger)
        let relayStore = wrapStore(store)
        let hasher = config.passwordHasher ?? PasswordHasher(iterations: config.passwordIterations)
        let (bus, metrics, logger) = (self.bus, self.metrics, self.logger)
        let relay: Relay
        do {
            relay = try await cancelWhenGracefulShutdown {
                try await Relay(store: relayStore, hasher: hasher,
                                limits: config.relayLimits, safety: config.safety, shares: config.shares,
                                features: config.features, node: config.nodeID, bus: bus, ownsTimers: !bus.isShared, cache: config.cache,
                                logger: logger, metrics: metrics, push: push.settings,
                                spool: FileAlarmSpool(path: config.alarmSpoolPath, codec: ClusterCodec.spoolCodec),
                                testNoticeDelay: config.testNoticeDelay, releaseFreedMemory: { FreedMemory.release() })
            }
        } catch where Task.isShuttingDownGracefully {
            // Whatever the interrupted load threw (a cancellation, or the store's word for one), the stop was asked
            // for: not an error for the operator, who sees the one that stopped the relay (a port in use) alone.
            logger.info("stopped before the relay had loaded")
            logger.debug("the interrupted load threw", metadata: ["error": "\(error)"])
            return nil
        }
        try await relay.startBus()
        // What the load decoded and dropped, before the first connection is served.
        FreedMemory.release()
        return StartedRelay(relay: relay, vapidPublicKey: vapidKey.publicKeyBase64URL, pushWorker: push.worker)
    }
}

/// Delivers the push outbox (`PushDeliveryWorker`) from the relay's start until this service's graceful
/// shutdown, which comes after the relay's last write; the sends in flight finish first.
struct PushWorkerService: Service, CustomStringConvertible {
    let relay: ReadySignal<StartedRelay>
    var description: String { "push worker" }

    func run() async throws {
        guard let started = try await relay.valueUnlessStopping() else { return }
        guard let worker = started.pushWorker else {
            try? await gracefulShutdown()
            return
        }
        let relay = started.relay
        await cancelWhenGracefulShutdown {
            await worker.run(forgetSubscription: { [weak relay] id in relay?.removePushSubscription(id) })
        }
    }
}
