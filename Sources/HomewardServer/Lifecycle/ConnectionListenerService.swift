import HomewardCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// The relay once it accepts connections.
struct Listening: Sendable {
    let port: Int
    let metricsPort: Int?
    let relay: Relay
    let channel: any Channel
}

/// The TLS port: binds once the relay has loaded, and at graceful shutdown (the first service the group
/// stops) stops accepting and closes every connection with 1001: each once its close frame is written, and
/// those still open after `closeGrace` without it. The relay behind it then drains and closes.
struct ConnectionListenerService: Service, CustomStringConvertible {
    let configuration: RelayConfiguration
    let logger: Logger
    let group: any EventLoopGroup
    /// Everything a connection's pipeline needs but the relay, which is not there before it has loaded.
    let pipeline: @Sendable (StartedRelay) -> PipelineFactory
    let connections: ConnectionRegistry
    let origins: OriginPolicy
    /// The generated development CA, when the relay made its own certificate.
    let devCA: String?
    let relay: ReadySignal<StartedRelay>
    let metricsPort: ReadySignal<Int?>
    let listening: ReadySignal<Listening>
    var description: String { "listener" }

    /// How long a connection's close frame may take to leave at shutdown before the connection is closed without it.
    static let closeGrace = WebSocketConnection.closeFrameTimeout

    func run() async throws {
        let channel: any Channel
        do {
            // Asked to stop before the relay has loaded (SIGTERM during the start): nothing to bind or close.
            guard let started = try await relay.valueUnlessStopping(),
                  let metricsPort = try await self.metricsPort.valueUnlessStopping() else {
                listening.withdraw()
                return
            }
            channel = try await bind(pipeline(started))
            let port = channel.localAddress?.port ?? configuration.port
            await started.relay.setSharePublicURL(configuration.sharePublicURL(port: port))
            origins.allow(configuration.webSocketOrigins(port: port))
            logListening(port: port, metricsPort: metricsPort)
            listening.succeed(Listening(port: port, metricsPort: metricsPort, relay: started.relay, channel: channel))
        } catch {
            listening.fail(error)
            throw error
        }
        try? await gracefulShutdown()
        logger.info("shutting down")
        try? await channel.close()
        await connections.closeAll(.goingAway, reason: "relay shutting down", grace: Self.closeGrace)
    }

    private func bind(_ pipeline: PipelineFactory) async throws -> any Channel {
        let config = configuration
        do {
            return try await ServerBootstrap(group: group)
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
            throw RelayStartupError.cannotListen(host: config.host, port: config.port, reason: RelayStartupError.listenReason(error))
        }
    }

    private func logListening(port: Int, metricsPort: Int?) {
        let config = configuration
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
        if let devCA {
            logger.notice("using the development certificate; clients must trust its CA", metadata: ["ca": "\(devCA)"])
        }
    }
}
