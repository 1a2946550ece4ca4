import HomewardCore
import HomewardPostgres
import HomewardStorage
import Logging

/// Which durable store the relay uses (`--store`).
public enum StoreSetting: Sendable, Equatable, CustomStringConvertible {
    /// The SQLite file in the data directory: the zero-setup default for a single relay.
    case sqlite
    /// A PostgreSQL database, which several relays can share.
    case postgres(PostgresLocation)

    /// Parses `sqlite` or `postgres://USER[:PASS]@HOST:PORT/DB`; the error says what is wrong.
    public init(parsing text: String) throws(StoreSettingError) {
        if text == "sqlite" {
            self = .sqlite
        } else if text.lowercased().hasPrefix("postgres://") || text.lowercased().hasPrefix("postgresql://") {
            do { self = .postgres(try PostgresLocation(url: text)) } catch { throw .badURL(error) }
        } else {
            throw .unknown(PostgresLocationError.masked(text))
        }
    }

    /// The setting as it may be logged (no password).
    public var description: String {
        switch self {
        case .sqlite: "sqlite"
        case .postgres(let location): location.description
        }
    }
}

/// A `--store` value the relay cannot use.
public enum StoreSettingError: Error, CustomStringConvertible {
    case unknown(String)
    case badURL(PostgresLocationError)

    public var description: String {
        switch self {
        case .unknown(let text): "unknown store '\(text)': use sqlite or postgres://USER[:PASS]@HOST:PORT/DB"
        case .badURL(let error): error.description
        }
    }
}

/// The store a relay opened, and the service that keeps its connections (PostgreSQL's pool; none for SQLite).
struct OpenedStore: Sendable {
    let store: any RelayStore
    let pool: PostgresPoolService?

    /// Opens the store `configuration` names, or throws a `RelayStartupError` for the operator. PostgreSQL's
    /// schema is brought up to date here; its pool runs once `pool` runs.
    static func open(_ configuration: RelayConfiguration, logger: Logger) async throws -> OpenedStore {
        switch configuration.store {
        case .sqlite:
            do {
                let store = try SQLiteStore(path: configuration.databasePath)
                return OpenedStore(store: store, pool: nil)
            } catch {
                throw RelayStartupError.cannotOpenDatabase(path: configuration.databasePath, reason: "\(error)")
            }
        case .postgres(let location):
            do {
                let store = try await PostgresStore.prepare(location, timeouts: configuration.postgresTimeouts, logger: logger)
                return OpenedStore(store: store, pool: PostgresPoolService(store: store))
            } catch let PostgresStoreError.cannotConnect(server, reason, detail) {
                // One line says what failed; the driver's words are there for whoever turns on debug.
                logger.debug("cannot connect to PostgreSQL", metadata: ["server": "\(server)", "detail": "\(detail)"])
                throw RelayStartupError.cannotConnectDatabase(server: server, reason: reason)
            } catch {
                throw RelayStartupError.cannotOpenDatabase(path: location.description, reason: "\(error)")
            }
        }
    }
}
