import ArgumentParser
import HomewardServer
import Logging
import UnixSignals

@main
struct RelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "homeward-relay",
        abstract: "Homeward relay: live positions, follow-me sessions and panic alarms over TLS WebSockets.",
        discussion: """
            Serves wss://HOST:PORT/v1/ws, GET /healthz and the web app (/ and the share-link \
            viewer /f; see --web-root) on one TLS port, the metrics for Prometheus on a plain-HTTP \
            listener of their own (--metrics-listen, 127.0.0.1:9464), and keeps its \
            state in an SQLite database inside the data directory, or with --store postgres://... in \
            PostgreSQL (the database must exist; the relay creates its tables).

            Several relays can serve one community behind a load balancer: give each the same \
            --store postgres://... and --bus nats://HOST:PORT[,HOST:PORT...] (nats-server), and a --node-id. \
            PostgreSQL keeps everything durable; the bus carries positions, change notices and presence \
            between the relays; the relays split the timers among them through PostgreSQL locks (each user's on one relay at a time).

            Every option can also be set with an environment variable: HOMEWARD_ and the option's name \
            in capitals with '_' for '-' (for example HOMEWARD_PORT=9443, HOMEWARD_TLS_CERT=/etc/homeward/server.pem), \
            named by [env: ...] below. An option given on the command line wins over the environment, and \
            the environment over the default; an empty variable counts as unset.

            Without --tls-cert and --tls-key the relay makes a development CA and a certificate for \
            localhost and 127.0.0.1 in DATA_DIR/certs on first start, reuses them later, and logs the \
            CA's path: give that file to clients (homeward --ca PATH) so they can verify the relay.
            """)

    @OptionGroup var options: RelayOptions

    func run() async throws {
        let settings = try options.resolve(environment: .process)
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = settings.logLevel
            return handler
        }
        let logger = Logger(label: "homeward.relay")
        // SIGTERM and SIGINT start the graceful shutdown: see `RelayServer` for its order.
        try await RelayServer(configuration: settings.relay, logger: logger).run(gracefulShutdownSignals: [.sigterm, .sigint])
    }
}
