import Foundation
import HomewardCluster
import HomewardCore
import HomewardPostgres
import HomewardProtocol
import HomewardStorage
import HomewardWebPush
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import Prometheus
import Synchronization

/// Starts the relay: storage, TLS, the event loops and the listening socket.
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

    /// Binds and serves; returns once the relay accepts connections.
    public func start() async throws -> RunningRelay {
        let config = configuration
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
        let vapidKey: VAPIDKey
        do {
            vapidKey = try await RelayVAPIDKey.load(path: config.push.vapidKeyPath, dataDirectory: config.dataDirectory,
                                                    store: store.store, storeName: config.store.description, logger: logger)
        } catch {
            await store.close()
            throw error
        }
        let prometheus = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: prometheus)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(10), .microseconds(50), .microseconds(100), .microseconds(500), .milliseconds(1),
            .milliseconds(5), .milliseconds(10), .milliseconds(50), .milliseconds(100), .seconds(1),
        ]
        let bus = try await openBus(closing: store)
        let push: PushService
        do {
            push = try PushService(configuration: config.push, vapidKey: vapidKey, store: store.store, metrics: factory, logger: logger)
        } catch {
            await bus.stop()
            await store.close()
            throw error
        }
        let relay: Relay
        do {
            relay = try await Relay(store: wrapStore(store.store), hasher: config.passwordHasher ?? PasswordHasher(iterations: config.passwordIterations),
                                    limits: config.relayLimits, safety: config.safety, shares: config.shares,
                                    features: config.features, node: config.nodeID, bus: bus, ownsTimers: !bus.isShared,
                                    logger: logger, metrics: factory, push: push.settings,
                                    spool: FileAlarmSpool(path: config.alarmSpoolPath, codec: ClusterCodec.spoolCodec))
            try await relay.startBus()
        } catch {
            await bus.stop()
            await push.stop()
            await store.close()
            throw error
        }
        await push.start(relay: relay)
        let cluster = ClusterMembership(relay: relay, lease: timerLease(for: relay, bus: bus))
        let metrics = RelayMetrics(factory: factory)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, config.eventLoopThreads))
        // One keepalive sweep per event loop instead of a RepeatedTask per connection: a repeated task
        // costs every idle connection about 0.7 KiB (task object, timer-heap entry, closure, promise).
        // Each connection is still pinged every ping interval and closed once idle for the idle timeout
        // (checked at the same granularity as before); only the phase of the first ping changes.
        let pingInterval = TimeAmount.nanoseconds(Int64(config.limits.pingInterval * 1e9))
        let loops = group.makeIterator().map { ConnectionLoop(eventLoop: $0) }
        for loop in loops { loop.start(pingInterval: pingInterval, fanoutLatency: metrics.fanoutLatency) }
        let connections = ConnectionRegistry(loops: loops)
        let unauthenticated = UnauthenticatedConnections(limitPerAddress: config.limits.maxUnauthenticatedPerAddress)
        let metricsAccess = MetricsAccess(token: config.metricsToken)
        let origins = OriginPolicy(config.webSocketOrigins(port: config.port))
        let pipeline = PipelineFactory(relay: relay, limits: config.limits, metrics: metrics, connections: connections,
                                       unauthenticated: unauthenticated, tls: serverTLS, logger: logger,
                                       exposition: { prometheus.emitToBuffer() }, site: site,
                                       vapidPublicKey: vapidKey.publicKeyBase64URL, trustedProxies: config.proxyProtocolFrom,
                                       metricsAccess: metricsAccess, origins: origins)
        let metricsChannel: (any Channel)?
        do {
            metricsChannel = try await Self.listenForMetrics(config, group: group, access: metricsAccess, prometheus: prometheus)
        } catch {
            try? await group.shutdownGracefully()
            await relay.drain()
            await cluster.leave()
            await push.stop()
            await store.close()
            throw error
        }

        let channel: any Channel
        do {
            channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 1024)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                // Out of file descriptors, accept(2) fails at once and the listening socket stays readable: without
                // a pause the loop would retry in a tight loop, burning a core until some connection closes.
                .serverChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(AcceptBackoff())
                    }
                }
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                // At most 4 reads of up to 64 KiB per readiness event: one flooding client cannot hold its loop (and
                // every other connection on it) for more than a bounded burst before the loop moves on.
                .childChannelOption(.maxMessagesPerRead, value: 4)
                // Each channel keeps its receive buffers pooled for its whole life, sized by this allocator; the
                // default starts at 2 KiB, while an idle client's reads (pings, a position) fit in a few hundred bytes.
                // It still grows on demand when a read fills the buffer.
                .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65536))
                .childChannelInitializer { channel in pipeline.configure(channel) }
                .bind(host: config.host, port: config.port)
                .get()
        } catch {
            try? await metricsChannel?.close()
            try? await group.shutdownGracefully()
            await relay.drain()
            await cluster.leave()
            await push.stop()
            await store.close()
            throw RelayStartupError.cannotListen(host: config.host, port: config.port, reason: RelayStartupError.listenReason(error))
        }
        let port = channel.localAddress?.port ?? config.port
        await relay.setSharePublicURL(config.sharePublicURL(port: port))
        origins.allow(config.webSocketOrigins(port: port))
        let metricsPort = metricsChannel?.localAddress?.port
        logger.info("homeward relay listening", metadata: [
            "address": "wss://\(config.host):\(port)/v1/ws", "data-dir": "\(config.dataDirectory)", "store": "\(config.store)",
            "bus": "\(config.bus)", "node": "\(config.nodeID)",
            "threads": "\(config.eventLoopThreads)",
        ])
        if !config.proxyProtocolFrom.isEmpty {
            logger.info("connections from these balancers must start with a PROXY protocol header", metadata: [
                "proxy-protocol-from": "\(config.proxyProtocolFrom.map(\.description).joined(separator: ","))",
            ])
        }
        if let metricsListen = config.metricsListen, let metricsPort {
            logger.info("metrics listening", metadata: [
                "address": "http://\(ListenAddress(host: metricsListen.host, port: metricsPort))/metrics",
                "token": "\(config.metricsToken == nil ? "none" : "required")",
            ])
        }
        logger.info("browsers may connect from these origins", metadata: [
            "allowed-origins": "\(origins.origins.sorted().joined(separator: ","))",
        ])
        if let ca = tls.devCA {
            logger.notice("using the development certificate; clients must trust its CA", metadata: ["ca": "\(ca)"])
        }
        return RunningRelay(port: port, metricsPort: metricsPort, devCAPath: tls.devCA, channel: channel,
                            metricsChannel: metricsChannel, group: group, relay: relay,
                            connections: connections, unauthenticated: unauthenticated, leaveCluster: cluster.leave,
                            closeStore: { await push.stop(); await store.close() }, logger: logger)
    }

    /// The metrics listener `--metrics-listen` names, if any; an address it cannot have is a startup error.
    private static func listenForMetrics(_ config: RelayConfiguration, group: any EventLoopGroup, access: MetricsAccess,
                                         prometheus: PrometheusCollectorRegistry) async throws -> (any Channel)? {
        guard let address = config.metricsListen else { return nil }
        do {
            return try await MetricsListener.bind(address, group: group, access: access, exposition: { prometheus.emitToBuffer() })
        } catch {
            throw RelayStartupError.cannotListen(host: address.host, port: address.port,
                                                 reason: RelayStartupError.listenReason(error, flag: "--metrics-listen"))
        }
    }

    /// The bus `--bus` names, connected; a nats-server that cannot be reached is a startup error.
    private func openBus(closing store: OpenedStore) async throws -> any RelayBus {
        guard case .nats(let servers) = configuration.bus else { return LocalBus() }
        do {
            return try await NATSBus.connect(servers: servers, node: configuration.nodeID, logger: logger)
        } catch {
            await store.close()
            throw RelayStartupError.cannotConnectBus(configuration.bus.description, reason: "\(error)")
        }
    }

    /// On a shared bus, the relays compete for the timers through PostgreSQL (see `PostgresTimerLease`).
    private func timerLease(for relay: Relay, bus: any RelayBus) -> PostgresTimerLease? {
        guard bus.isShared, case .postgres(let location) = configuration.store else { return nil }
        return PostgresTimerLease(location, timeouts: configuration.postgresTimeouts, logger: logger) { owns in
            relay.setOwnsTimers(owns)
        }
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

/// A relay that is serving. `shutdown()` stops it the way SIGTERM does.
public final class RunningRelay: Sendable {
    public let port: Int
    /// The metrics listener's port (`--metrics-listen`), when there is one.
    public let metricsPort: Int?
    /// Where the generated development CA is, when the relay made its own certificate.
    public let devCAPath: String?
    public let relay: Relay
    private let channel: any Channel
    private let metricsChannel: (any Channel)?
    private let group: MultiThreadedEventLoopGroup
    private let connections: ConnectionRegistry
    let unauthenticated: UnauthenticatedConnections
    /// Tells the other relays this one is gone and gives up the timers.
    private let leaveCluster: @Sendable () async -> Void
    /// Closes the store after the last write (stops PostgreSQL's connection pool).
    private let closeStore: @Sendable () async -> Void
    private let logger: Logger
    private let stopping = Mutex<Task<Void, Never>?>(nil)

    init(port: Int, metricsPort: Int?, devCAPath: String?, channel: any Channel, metricsChannel: (any Channel)?,
         group: MultiThreadedEventLoopGroup, relay: Relay,
         connections: ConnectionRegistry, unauthenticated: UnauthenticatedConnections,
         leaveCluster: @escaping @Sendable () async -> Void, closeStore: @escaping @Sendable () async -> Void, logger: Logger) {
        self.port = port
        self.metricsPort = metricsPort
        self.devCAPath = devCAPath
        self.channel = channel
        self.metricsChannel = metricsChannel
        self.group = group
        self.relay = relay
        self.connections = connections
        self.unauthenticated = unauthenticated
        self.leaveCluster = leaveCluster
        self.closeStore = closeStore
        self.logger = logger
    }

    /// Whether the listening socket backs off accepting when out of file descriptors (for tests).
    var backsOffAccepting: Bool {
        get async {
            (try? await channel.pipeline.containsHandler(type: AcceptBackoff.self).get()) != nil
        }
    }

    /// Stops accepting, closes every connection with 1001, finishes storage writes, stops the event loops.
    /// Safe to call more than once and from several tasks: every caller waits for the one shutdown.
    public func shutdown() async {
        let task = stopping.withLock { task in
            if let task { return task }
            let started = Task { await self.stop() }
            task = started
            return started
        }
        await task.value
    }

    private func stop() async {
        logger.info("shutting down")
        try? await channel.close()
        try? await metricsChannel?.close()
        await connections.closeAll(.goingAway, reason: "relay shutting down", timeout: .seconds(5))
        await relay.drain()
        await leaveCluster()
        // Whatever was queued meanwhile (a disconnect, a notice, a timer) finishes before the store closes.
        await relay.close()
        await closeStore()
        try? await group.shutdownGracefully()
        logger.info("stopped")
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

/// What a relay must undo when it leaves the relays sharing its store.
struct ClusterMembership: Sendable {
    let relay: Relay
    let lease: PostgresTimerLease?

    /// The last presence digest first (the others mark this relay's users offline at once), then the
    /// timer lock goes (another relay takes the timers), then the bus closes.
    func leave() async {
        await relay.stopBus()
        await lease?.stop()
    }
}
