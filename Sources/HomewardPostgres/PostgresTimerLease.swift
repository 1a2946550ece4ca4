import Logging
import PostgresNIO
import Synchronization

/// Decides which of the relays sharing one database fires the timers (check-in deadlines, alarm
/// repeats, lost contact, session expiry): the one holding a PostgreSQL session-level advisory lock on
/// a connection of its own.
///
/// Why a lock rather than claiming due rows (`UPDATE ... RETURNING`): the timers are computed from the
/// relay's cached state (alarm repeat counts, who is offline since when), not only from rows, and one
/// owner firing from one cache keeps the rules exactly as on a single relay. The lock belongs to the
/// connection's session, so PostgreSQL releases it by itself when the owner dies (its socket closes;
/// TCP keepalives catch a host that vanished), and a waiting relay takes it at its next try.
///
/// The owner checks its connection every `checkInterval`; when that fails it gives the timers up at
/// once (`onChange(false)`), before PostgreSQL could have given the lock to another relay that then
/// fires too. Others try to take the lock every `checkInterval`.
///
/// The relay runs `run` as a service of its group, stopped after the relay's last write.
public struct PostgresTimerLease: Sendable {
    private let location: PostgresLocation
    private let timeouts: PostgresStore.Timeouts
    private let logger: Logger

    /// The advisory lock's key ("hwtimers"), distinct from the migration lock.
    static let lockKey: Int64 = 0x6877_7469_6d65_7273
    public static let checkInterval = Duration.seconds(1)

    public init(_ location: PostgresLocation, timeouts: PostgresStore.Timeouts, logger: Logger) {
        self.location = location
        self.timeouts = timeouts
        self.logger = logger
    }

    /// Competes for the timers until the calling task is cancelled: `onChange` is called with true when
    /// this relay takes them and with false when it loses or gives them up, which it does before its
    /// connection closes (closing releases the lock for another relay).
    public func run(onChange: @escaping @Sendable (Bool) -> Void) async {
        while !Task.isCancelled {
            var held = false
            do {
                var settings = try PostgresStore.connectionConfiguration(location, timeouts)
                settings.options.additionalStartupParameters += [
                    ("tcp_keepalives_idle", "5"), ("tcp_keepalives_interval", "2"), ("tcp_keepalives_count", "2"),
                    ("application_name", "homeward-relay timers"),
                ]
                let configuration = settings
                let logger = self.logger
                let connection = try await withDeadline(timeouts.connect, operation: "connect for the timer lock") {
                    try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
                }
                do {
                    try await hold(connection, held: &held, onChange: onChange)
                } catch {
                    if held { onChange(false) }
                    held = false
                    try? await connection.close()
                    throw error
                }
                if held { onChange(false) }
                held = false
                try? await connection.close()
            } catch {
                if !Task.isCancelled {
                    logger.warning("timer lock connection failed; trying again", metadata: ["error": "\(String(reflecting: error))"])
                }
            }
            if Task.isCancelled { return }
            try? await Task.sleep(for: Self.checkInterval)
        }
    }

    /// Takes the lock when it is free and checks the connection while it holds it, until cancelled or
    /// the connection fails.
    private func hold(_ connection: PostgresConnection, held: inout Bool, onChange: @Sendable (Bool) -> Void) async throws {
        let logger = self.logger
        while !Task.isCancelled {
            if held {
                _ = try await withDeadline(timeouts.query, operation: "timer lock check") {
                    try await connection.query("SELECT 1", logger: logger).collect()
                }
            } else {
                let taken = try await withDeadline(timeouts.query, operation: "timer lock") {
                    try await Self.tryLock(connection, logger: logger)
                }
                if taken {
                    held = true
                    onChange(true)
                }
            }
            try await Task.sleep(for: Self.checkInterval)
        }
    }

    private static func tryLock(_ connection: PostgresConnection, logger: Logger) async throws -> Bool {
        var taken = false
        for try await value in try await connection.query("SELECT pg_try_advisory_lock(\(lockKey))", logger: logger).decode(Bool.self) {
            taken = value
        }
        return taken
    }
}
