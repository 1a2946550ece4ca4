import Logging
import ServiceLifecycle
import UnixSignals

/// One of the relay's services as its group runs it: whichever way it ends, the group stops gracefully, from
/// the last service to the first, each once the one after it has finished.
///
/// swift-service-lifecycle's default for a service that throws (a port in use, a load that fails) or returns is
/// to cancel every service at once: the event loops and PostgreSQL's pool would then close while the relay, the
/// push worker and the listener still use them, and a task or a future on a closed event loop never completes,
/// so the relay could hang for good, deaf to SIGTERM. Stopped in order instead, the relay still writes what it
/// holds, the clients close last, and the group ends with the first error.
struct GroupMember: Service, CustomStringConvertible {
    let service: any Service & CustomStringConvertible
    var description: String { service.description }

    func run() async throws {
        try await service.run()
        // A service returns once asked to stop; before that, returning is a fault, not a clean stop with exit 0.
        guard Task.isShuttingDownGracefully || Task.isCancelled else { throw RelayServiceEnded(service: description) }
    }

    /// The group that runs `services` (in the order they start; they stop in reverse), stopped gracefully by `signals`.
    static func group(_ services: [any Service & CustomStringConvertible], signals: [UnixSignal] = [], logger: Logger) -> ServiceGroup {
        let members = services.map {
            ServiceGroupConfiguration.ServiceConfiguration(service: GroupMember(service: $0),
                                                           successTerminationBehavior: .gracefullyShutdownGroup,
                                                           failureTerminationBehavior: .gracefullyShutdownGroup)
        }
        return ServiceGroup(configuration: .init(services: members, gracefulShutdownSignals: signals, logger: logger))
    }
}

/// A service of the relay stopped by itself, while nothing had asked it to: the relay stops with this error.
public struct RelayServiceEnded: Error, CustomStringConvertible {
    public let service: String
    public var description: String { "the relay's \(service) stopped by itself; the relay stops" }
}
