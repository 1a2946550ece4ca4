import Foundation
import HomewardCluster
import HomewardCore
import HomewardPostgres
import HomewardProtocol
import HomewardStorage
import HomewardWebPush
import Logging
import Metrics
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import Prometheus
import ServiceLifecycle
import UnixSignals

/// The relay: storage, the bus, TLS, the event loops and the listening socket.
///
/// Each long-running part is a swift-service-lifecycle `Service` of one `ServiceGroup` (`makeServices`
/// lists them), which starts them side by side (a part that needs another's result waits for its
/// `ReadySignal`) and at graceful shutdown stops them one after another in reverse order, each once the
/// one after it has finished: the listener (stop accepting, 1001 to every connection), the metrics
/// listener, the relay (drain, leave the bus, close: the last writes), the push worker, the timer lease,
/// then the clients (the push HTTP client, the bus, PostgreSQL's pool, the event loops).
/// A part that fails (or ends by itself) stops the group the same way, and the relay exits with its error
/// (`GroupMember`).
public struct RelayServer: Sendable {
    public let configuration: RelayConfiguration
    public let logger: Logger
    /// Wraps the store the configuration names (an `SQLiteStore` or a `PostgresStore`), or replaces it
    /// (tests put fault injection here).
    private let wrapStore: @Sendable (any RelayStore) -> any RelayStore

    public init(configuration: RelayConfiguration, logger: Logger = Logger(label: "homeward.relay"),
                wrapStore: @escaping @Sendable (any RelayStore) -> any RelayStore = { $0 }) {
        self.configuration = configuration
        self.logger = logger
        self.wrapStore = wrapStore
    }

    /// Runs the relay until one of `signals` arrives (or the task is cancelled), then stops it gracefully.
    /// Throws a `RelayStartupError` when it cannot start.
    public func run(gracefulShutdownSignals signals: [UnixSignal]) async throws {
        let parts = try await makeServices()
        try await GroupMember.group(parts.services, signals: signals, logger: logger).run()
        logger.info("stopped")
    }

    /// Runs the relay's group in a task of its own and returns once the relay accepts connections: for tests
    /// and programs that embed a relay and stop it with `RunningRelay.shutdown()` rather than a signal.
    public func start() async throws -> RunningRelay {
        let parts = try await makeServices()
        let group = GroupMember.group(parts.services, logger: logger)
        let logger = self.logger
        let serving = Task {
            do {
                try await group.run()
            } catch {
                parts.listening.fail(error)
                throw error
            }
            parts.listening.fail(CancellationError())
            logger.info("stopped")
        }
        do {
            let listening = try await parts.listening.value
            return RunningRelay(listening, devCAPath: parts.devCA, unauthenticated: parts.unauthenticated,
                                group: group, serving: serving)
        } catch {
            // A part that failed stopped the group; the group's error is the one that says why.
            await group.triggerGracefulShutdown()
            try await serving.value
            throw error
        }
    }

    /// The relay's services in the order the group starts them (it stops them in reverse), after opening
    /// what can fail with a reason for the operator: the data directory, TLS, the web app, the store and the bus.
    func makeServices() async throws -> RelayServices {
        let config = configuration
        if config.kernelTLS {
            let obstacles = KernelTLS.obstaclesOnThisMachine(backend: config.tlsBackend)
            if !obstacles.isEmpty { throw RelayStartupError.kernelTLSUnavailable(reasons: obstacles) }
        }
        do {
            try OwnerOnlyFiles.createDirectory(config.dataDirectory)
        } catch {
            throw RelayStartupError.cannotCreateDataDirectory(path: config.dataDirectory, reason: RelayStartupError.fileReason(error))
        }
        let tls = try resolveTLS()
        let site = try loadWebSite()
        let serverTLS = try ServerTLS.make(config.tlsBackend, certificatePath: tls.certificate,
                                           privateKeyPath: tls.privateKey, logger: logger)

        let store = try await OpenedStore.open(config, logger: logger)
        let eventLoops = MultiThreadedEventLoopGroup(numberOfThreads: max(1, config.eventLoopThreads))
        let prometheus = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: prometheus)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(10), .microseconds(50), .microseconds(100), .microseconds(500), .milliseconds(1),
            .milliseconds(5), .milliseconds(10), .milliseconds(50), .milliseconds(100), .seconds(1),
        ]
        // The last step that can fail here, so nothing opened before it but the event loops needs closing: the
        // store's pool does not run yet (its service runs it).
        let bus: any RelayBus
        do {
            bus = try await openBus(on: eventLoops, metrics: factory)
        } catch {
            try? await eventLoops.shutdownGracefully()
            throw error
        }

        let metrics = RelayMetrics(factory: factory)
        // One keepalive sweep per event loop instead of a RepeatedTask per connection: a repeated task
        // costs every idle connection about 0.7 KiB (task object, timer-heap entry, closure, promise).
        // Each connection is still pinged every ping interval and closed once idle for the idle timeout
        // (checked at the same granularity as before); only the phase of the first ping changes.
        let pingInterval = TimeAmount.nanoseconds(Int64(config.limits.pingInterval * 1e9))
        let loops = eventLoops.makeIterator().map { ConnectionLoop(eventLoop: $0) }
        for loop in loops { loop.start(pingInterval: pingInterval, fanoutLatency: metrics.fanoutLatency) }
        let connections = ConnectionRegistry(loops: loops)
        let unauthenticated = UnauthenticatedConnections(limitPerAddress: config.limits.maxUnauthenticatedPerAddress)
        let metricsAccess = MetricsAccess(token: config.metricsToken)
        let origins = OriginPolicy(config.webSocketOrigins(port: config.port))
        let pushSender = PushSender()
        let logger = self.logger

        let started = ReadySignal<StartedRelay>()
        let metricsPort = ReadySignal<Int?>()
        let listening = ReadySignal<Listening>()
        var services: [any Service & CustomStringConvertible] = [ClientService(description: "event loops") { try? await eventLoops.shutdownGracefully() }]
        if let pool = store.pool { services.append(pool) }
        if bus.isShared { services.append(ClientService(description: "bus") { await bus.stop() }) }
        services.append(ClientService(description: "push HTTP client") { try? await pushSender.shutdown() })
        if let lease = timerLease(bus: bus) { services.append(TimerLeaseService(lease: lease, relay: started)) }
        services.append(PushWorkerService(relay: started))
        services.append(RelayCoreService(configuration: config, store: store.store, wrapStore: wrapStore, bus: bus,
                                         pushSender: pushSender, metrics: factory, logger: logger, started: started))
        if let address = config.metricsListen {
            services.append(MetricsListenerService(address: address, group: eventLoops, access: metricsAccess,
                                                   prometheus: prometheus, bound: metricsPort))
        } else {
            metricsPort.succeed(nil)
        }
        services.append(ConnectionListenerService(
            configuration: config, logger: logger, group: eventLoops,
            pipeline: { relay in
                PipelineFactory(relay: relay.relay, limits: config.limits, metrics: metrics, connections: connections,
                                unauthenticated: unauthenticated, tls: serverTLS, logger: logger,
                                exposition: { prometheus.emitToBuffer() }, site: site,
                                vapidPublicKey: relay.vapidPublicKey, trustedProxies: config.proxyProtocolFrom,
                                metricsAccess: metricsAccess, origins: origins)
            },
            connections: connections, origins: origins, devCA: tls.devCA,
            relay: started, metricsPort: metricsPort, listening: listening))
        return RelayServices(services: services, listening: listening, unauthenticated: unauthenticated, devCA: tls.devCA)
    }

    /// The bus `--bus` names, connected on one of the relay's event loops (positions from other relays reach
    /// the observers' loops from there without a thread hop); a nats-server that cannot be reached is a
    /// startup error.
    private func openBus(on eventLoops: any EventLoopGroup, metrics: any MetricsFactory) async throws -> any RelayBus {
        guard case .nats(let servers) = configuration.bus else { return LocalBus() }
        do {
            // With notices per user, a cache of connected users hears only those of the users it follows (`Relay+Following`).
            let perUser = configuration.changeNotices == .perUser
            return try await NATSBus.connect(servers: servers, node: configuration.nodeID, logger: logger, eventLoopGroup: eventLoops,
                                             publishesPerUser: perUser, readsEveryNotice: !(perUser && configuration.cache == .connected),
                                             metrics: metrics)
        } catch {
            throw RelayStartupError.cannotConnectBus(configuration.bus.description, reason: "\(error)")
        }
    }

    /// On a shared bus, the relays split the timers' shards through PostgreSQL (see `PostgresTimerLease`).
    private func timerLease(bus: any RelayBus) -> PostgresTimerLease? {
        guard bus.isShared, case .postgres(let location) = configuration.store else { return nil }
        return PostgresTimerLease(location, timeouts: configuration.postgresTimeouts, node: configuration.nodeID, logger: logger)
    }

    /// The web app's files, read once here so that serving them never touches the disk on an event loop.
    private func loadWebSite() throws -> WebSite {
        let web = configuration.web
        guard let root = web.webRoot else {
            logger.info("no web app: no --web-root and none found beside the binary or in the source checkout")
            return WebSite(assets: WebAssets(), tiles: web.mapTiles)
        }
        let assets: WebAssets
        do {
            assets = try WebAssets.load(webRoot: root, leafletDirectory: web.leafletDirectory)
        } catch {
            throw RelayStartupError.cannotLoadWebApp(reason: error.description)
        }
        logger.info("serving the web app", metadata: [
            "web-root": "\(root)", "leaflet": "\(assets.hasLeaflet ? web.leafletDirectory ?? "" : "none (own map drawing)")",
            "tiles": "\(web.mapTiles?.urlTemplate ?? "none (no third-party requests)")",
        ])
        return WebSite(assets: assets, tiles: web.mapTiles, vectorTiles: try VectorTileRoute.load(web.vectorTilesPath, logger: logger))
    }

    private func resolveTLS() throws -> (certificate: String, privateKey: String, devCA: String?) {
        switch (configuration.tlsCertificatePath, configuration.tlsPrivateKeyPath) {
        case (let certificate?, let key?):
            return (certificate, key, nil)
        case (nil, nil):
            let dev = try DevCertificates.ensure(in: URL(fileURLWithPath: configuration.devCertificateDirectory))
            return (dev.certificatePath, dev.privateKeyPath, dev.caPath)
        default:
            throw TLSSetupError.incompleteConfiguration
        }
    }
}

/// What `RelayServer.makeServices` made: the services, and what `start` needs of them.
struct RelayServices: Sendable {
    /// In the order the group starts them.
    let services: [any Service & CustomStringConvertible]
    let listening: ReadySignal<Listening>
    let unauthenticated: UnauthenticatedConnections
    let devCA: String?
}

/// A relay that is serving (`RelayServer.start`). `shutdown()` stops it the way SIGTERM does.
public final class RunningRelay: Sendable {
    public let port: Int
    /// The metrics listener's port (`--metrics-listen`), when there is one.
    public let metricsPort: Int?
    /// Where the generated development CA is, when the relay made its own certificate.
    public let devCAPath: String?
    public let relay: Relay
    private let channel: any Channel
    let unauthenticated: UnauthenticatedConnections
    private let group: ServiceGroup
    private let serving: Task<Void, any Error>

    init(_ listening: Listening, devCAPath: String?, unauthenticated: UnauthenticatedConnections,
         group: ServiceGroup, serving: Task<Void, any Error>) {
        self.port = listening.port
        self.metricsPort = listening.metricsPort
        self.devCAPath = devCAPath
        self.relay = listening.relay
        self.channel = listening.channel
        self.unauthenticated = unauthenticated
        self.group = group
        self.serving = serving
    }

    /// Whether the listening socket backs off accepting when out of file descriptors (for tests).
    var backsOffAccepting: Bool {
        get async {
            (try? await channel.pipeline.containsHandler(type: AcceptBackoff.self).get()) != nil
        }
    }

    /// Stops accepting, closes every connection with 1001, finishes storage writes, closes the clients and
    /// the event loops: the group's graceful shutdown. Safe to call more than once and from several tasks:
    /// every caller waits for the one shutdown.
    public func shutdown() async {
        await group.triggerGracefulShutdown()
        _ = try? await serving.value
    }
}

/// Builds each accepted connection's pipeline: TLS, HTTP, and the WebSocket upgrade.
struct PipelineFactory: Sendable {
    let relay: Relay
    let limits: ConnectionLimits
    let metrics: RelayMetrics
    let connections: ConnectionRegistry
    let unauthenticated: UnauthenticatedConnections
    let tls: ServerTLS
    let logger: Logger
    let exposition: @Sendable () -> [UInt8]
    let site: WebSite
    let vapidPublicKey: String
    /// Balancers whose connections start with a PROXY header naming the client (`--proxy-protocol-from`).
    let trustedProxies: [IPAddressRange]
    let metricsAccess: MetricsAccess
    /// Pages whose browsers may upgrade (`--allowed-origins`); others get 403 from `HTTPHandler`.
    let origins: OriginPolicy

    static let path = "/v1/ws"
    static let subprotocol = "homeward.v1"

    func configure(_ channel: any Channel) -> EventLoopFuture<Void> {
        if let balancer = channel.remoteAddress, trustedProxies.contains(where: { $0.contains(balancer) }) {
            return channel.eventLoop.makeCompletedFuture { try expectProxyHeader(on: channel, from: balancer) }
        }
        let address = channel.remoteAddress?.ipAddress ?? "unknown"
        // Refused before TLS: closing right after accept costs the relay nothing, while a TLS handshake to
        // send a 429 is the very work a flood of connections wants to cause.
        let slot: UnauthenticatedConnections.Slot
        do { slot = try admit(channel, peer: address) } catch { return channel.eventLoop.makeFailedFuture(error) }
        return channel.eventLoop.makeCompletedFuture { try serve(channel, peer: address, slot: slot) }
    }

    /// Counts the connection among `peer`'s unauthenticated ones until it signs in or closes; throws when
    /// `peer` already holds its limit.
    func admit(_ channel: any Channel, peer: String) throws -> UnauthenticatedConnections.Slot {
        guard let slot = unauthenticated.admit(peer) else {
            metrics.refusedConnections.increment()
            logger.debug("refused a connection: too many unauthenticated from its address", metadata: ["peer": "\(peer)"])
            throw ConnectionRefusal.tooManyUnauthenticated(address: peer)
        }
        channel.closeFuture.whenComplete { _ in slot.release() }
        return slot
    }

    /// TLS, HTTP and the WebSocket upgrade for a connection from `peer` (the client's address, also
    /// when it came through a balancer).
    func serve(_ channel: any Channel, peer address: String, slot: UnauthenticatedConnections.Slot) throws {
        let sync = channel.pipeline.syncOperations
        try tls.addHandler(to: sync)
        let http = HTTPHandler(metrics: exposition, site: site, vapidPublicKey: vapidPublicKey,
                               metricsAccess: metricsAccess, origins: origins)
        let handshakeTimer = HandshakeTimer(timeout: .nanoseconds(Int64(limits.handshakeTimeout * 1e9)))
        let upgrader = NIOWebSocketServerUpgrader(
            maxFrameSize: limits.maxMessageBytes,
            automaticErrorHandling: false,
            shouldUpgrade: { channel, head in
                guard head.uri.split(separator: "?", maxSplits: 1).first == Substring(Self.path),
                      origins.admits(head.headers["Origin"]) else {
                    return channel.eventLoop.makeSucceededFuture(nil)
                }
                var headers = HTTPHeaders()
                let offered = head.headers[canonicalForm: "Sec-WebSocket-Protocol"]
                if offered.contains(where: { $0.trimmingCharacters(in: .whitespaces) == Substring(Self.subprotocol) }) {
                    headers.add(name: "Sec-WebSocket-Protocol", value: Self.subprotocol)
                }
                return channel.eventLoop.makeSucceededFuture(headers)
            },
            upgradePipelineHandler: { [self] channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    let connection = WebSocketConnection(
                        relay: relay, limits: limits, metrics: metrics, loop: connections.loop(for: channel.eventLoop),
                        logger: logger, peer: address, unauthenticatedSlot: slot)
                    try channel.pipeline.syncOperations.addHandlers([
                        FrameValidator(),
                        NIOWebSocketFrameAggregator(minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 1024,
                                                    maxAccumulatedFrameSize: limits.maxMessageBytes),
                        connection,
                    ])
                }
            })
        // Handlers are not Sendable; the upgrade completes on this channel's loop, so bind them to it.
        let upgradeOnly = NIOLoopBound((http, handshakeTimer), eventLoop: channel.eventLoop)
        try sync.configureHTTPServerPipeline(
            withServerUpgrade: (upgraders: [upgrader], completionHandler: { context in
                let (http, handshakeTimer) = upgradeOnly.value
                context.pipeline.syncOperations.removeHandler(http, promise: nil)
                context.pipeline.syncOperations.removeHandler(handshakeTimer, promise: nil)
            }),
            withErrorHandling: true)
        try sync.addHandler(http)
        try sync.addHandler(handshakeTimer, position: .first)
    }
}

/// Closes a connection that has not finished its TLS handshake and WebSocket upgrade in time,
/// so half-open and slow-loris connections cannot pile up.
final class HandshakeTimer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    private let timeout: TimeAmount
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) { self.timeout = timeout }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: timeout) { loopBound.value.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
    }
}
