import NIOCore
import Prometheus
import ServiceLifecycle

/// The plain-HTTP metrics listener (`--metrics-listen`): bound at start (an address it cannot have is a
/// startup error), closed at graceful shutdown, after the relay's listener has closed every connection.
struct MetricsListenerService: Service, CustomStringConvertible {
    let address: ListenAddress
    let group: any EventLoopGroup
    let access: MetricsAccess
    let prometheus: PrometheusCollectorRegistry
    /// The port it listens on, once it does.
    let bound: ReadySignal<Int?>
    var description: String { "metrics listener" }

    func run() async throws {
        let channel: any Channel
        do {
            let prometheus = self.prometheus
            channel = try await MetricsListener.bind(address, group: group, access: access, exposition: { prometheus.emitToBuffer() })
        } catch {
            let failure = RelayStartupError.cannotListen(host: address.host, port: address.port,
                                                         reason: RelayStartupError.listenReason(error, flag: "--metrics-listen"))
            bound.fail(failure)
            throw failure
        }
        bound.succeed(channel.localAddress?.port)
        try? await gracefulShutdown()
        try? await channel.close()
    }
}
