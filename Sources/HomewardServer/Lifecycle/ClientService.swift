import HomewardPostgres
import ServiceLifecycle

/// A client that the relay's other services use (the event loops, the bus, the push HTTP client),
/// open from before the group starts until this service's graceful shutdown, then closed.
///
/// Clients come first in the relay's group, so that the group, which shuts its services down in reverse
/// order and waits for each, closes them after everything that uses them has stopped, also when a service failed
/// (`GroupMember`). Only a cancelled group (its task cancelled) closes them at once.
struct ClientService: Service, CustomStringConvertible {
    /// The name in the group's logs.
    let description: String
    let close: @Sendable () async -> Void

    func run() async {
        try? await gracefulShutdown()
        await close()
    }
}

/// PostgreSQL's connection pool (`--store postgres://`): it serves the store's calls while it runs, and
/// closes its connections at this service's graceful shutdown, which comes after the relay's last write.
struct PostgresPoolService: Service, CustomStringConvertible {
    let store: PostgresStore
    var description: String { "PostgreSQL pool" }

    func run() async {
        await store.runPool()
    }
}
