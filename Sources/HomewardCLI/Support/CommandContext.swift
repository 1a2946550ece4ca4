import Foundation
import HomewardClient
import HomewardProtocol
import Logging
import Synchronization

/// What a command runs with: a connected client, the profile it acts for, and the console.
///
/// A one-shot command opens its own; the interactive shell opens one and hands it to every
/// command typed, which is why commands are written against this and not against `run()`.
final class CommandContext: Sendable {
    let console: Console
    let client: RelayClient
    let store: ProfileStore
    let profileName: String
    /// Events from the moment the connection opened, so nothing sent right after signing in
    /// (missed friend requests, invites, alarms) is lost.
    let events: AsyncStream<RelayEvent>
    /// True inside `homeward shell`: long-running commands return at once there, because the
    /// shell already prints every event as it arrives.
    let isInteractive: Bool
    /// The relay and trust this context connected with, remembered in the profile on sign-in.
    let connection: Connection
    private let storedProfile: Mutex<Profile>

    private init(console: Console, client: RelayClient, store: ProfileStore, profileName: String, profile: Profile,
                 events: AsyncStream<RelayEvent>, isInteractive: Bool, connection: Connection) {
        self.connection = connection
        self.console = console
        self.client = client
        self.store = store
        self.profileName = profileName
        self.storedProfile = Mutex(profile)
        self.events = events
        self.isInteractive = isInteractive
    }

    var profile: Profile { storedProfile.withLock { $0 } }

    /// Changes the profile and saves it at once.
    func updateProfile(_ change: (inout Profile) -> Void) throws(CLIError) {
        let updated: Profile = storedProfile.withLock {
            change(&$0)
            return $0
        }
        try store.save(updated, as: profileName)
    }

    /// The resolved relay URL and trust, from flags, environment, then the profile.
    struct Connection: Sendable {
        var endpoint: RelayEndpoint
        var trust: TLSTrust
        var relayURL: String
        /// The CA path to remember in the profile after signing in.
        var caPath: String?
    }

    static func resolveConnection(_ options: GlobalOptions, profile: Profile) throws(CLIError) -> Connection {
        let url = options.relay ?? Environment.value("HOMEWARD_RELAY") ?? profile.relay ?? RelayEndpoint.defaultURL
        let endpoint: RelayEndpoint
        do { endpoint = try RelayEndpoint(url: url) } catch { throw .usage(error.description) }
        let caPath = options.ca ?? Environment.value("HOMEWARD_CA") ?? profile.ca
        let trust: TLSTrust
        if options.insecure {
            trust = .insecure
        } else if let caPath {
            trust = .caFile(Self.absolute(caPath))
        } else {
            trust = .system
        }
        return Connection(endpoint: endpoint, trust: trust, relayURL: endpoint.url, caPath: caPath.map(Self.absolute))
    }

    /// The client library's log: quiet unless `HOMEWARD_LOG` names a level (docs/cli.md).
    static func clientLogger() -> Logger {
        var logger = Logger(label: "homeward.cli")
        logger.logLevel = Environment.value("HOMEWARD_LOG").flatMap(Logger.Level.init(rawValue:)) ?? .critical
        return logger
    }

    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        return FileManager.default.currentDirectoryPath + "/" + path
    }

    /// Connects and, when `signIn`, signs in with the profile's token.
    static func open(_ options: GlobalOptions, signIn: Bool, reconnect: Bool, interactive: Bool = false,
                     console: Console? = nil) async throws(CLIError) -> CommandContext {
        let console = console ?? Console(json: options.json)
        let store = ProfileStore()
        let name = options.profileName
        let profile = try store.load(name)
        if signIn, profile.token == nil {
            let who = profile.username.map { " (last signed in as \($0))" } ?? ""
            throw CLIError(code: "unauthenticated",
                           message: "profile \"\(name)\"\(who) is not signed in: run `homeward login` or `homeward register` first",
                           exitCode: CLIError.Status.local)
        }
        let connection = try resolveConnection(options, profile: profile)
        var configuration = RelayClientConfiguration(endpoint: connection.endpoint, trust: connection.trust)
        configuration.reconnect = reconnect ? ReconnectPolicy() : .disabled
        let client: RelayClient
        do {
            client = try RelayClient(configuration: configuration, logger: clientLogger())
        } catch {
            throw CLIError(error)
        }
        let events = client.events()
        do {
            try await client.connect()
        } catch {
            var failure = CLIError(error)
            if connection.trust == .system, error.description.contains("TLS") {
                failure.message += " (is the relay using its development certificate? pass --ca DATA-DIR/certs/dev-ca.pem)"
            }
            throw failure
        }
        let context = CommandContext(console: console, client: client, store: store, profileName: name, profile: profile,
                                     events: events, isInteractive: interactive, connection: connection)
        if signIn, let token = profile.token {
            do {
                try await client.hello(token: token)
            } catch {
                await client.close()
                if error.code == .unauthenticated {
                    try? context.updateProfile { $0.token = nil }
                    throw CLIError(code: "unauthenticated",
                                   message: "the relay refused the saved token of profile \"\(name)\" (logged out elsewhere?): run `homeward login` again",
                                   exitCode: CLIError.Status.rejected)
                }
                throw CLIError(error)
            }
        }
        return context
    }

    func close() async {
        await client.close()
    }

    /// Runs a client call, turning its failure into a CLI error.
    func call<T: Sendable>(_ body: () async throws(RelayClientError) -> T) async throws(CLIError) -> T {
        do { return try await body() } catch { throw CLIError(error) }
    }

    /// The signed-in username (from the profile).
    var username: String { profile.username ?? "?" }
}
