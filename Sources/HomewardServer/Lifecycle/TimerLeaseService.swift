import HomewardPostgres
import ServiceLifecycle

/// On a shared bus, the relays split the timers' shards through PostgreSQL (`PostgresTimerLease`). From the
/// relay's start until this service's graceful shutdown, which comes after the relay's last write: the relay
/// fires nothing more by then, and closing the lease's connection hands its shards to the other relays.
struct TimerLeaseService: Service, CustomStringConvertible {
    let lease: PostgresTimerLease
    let relay: ReadySignal<StartedRelay>
    var description: String { "timer lease" }

    func run() async throws {
        guard let relay = try await relay.valueUnlessStopping()?.relay else { return }
        await cancelWhenGracefulShutdown {
            await lease.run { shards in await relay.setTimerShards(shards) }
        }
    }
}
