import Foundation
import NIOCore
import HomewardCore
import HomewardPostgres

/// Everything the relay needs to start. Filled in once by the executable from flags, then
/// `HOMEWARD_*` variables, then these defaults.
public struct RelayConfiguration: Sendable {
    public var host = "0.0.0.0"
    public var port = 8443
    public var dataDirectory = "./.homeward"
    /// Where accounts, friends, sessions and alarms are kept: the SQLite file in the data directory, or PostgreSQL.
    public var store = StoreSetting.sqlite
    /// How this relay hears about the others sharing its store: in-process (alone) or nats-server.
    public var bus = BusSetting.local
    /// What the relay keeps in memory: every user's part, or only its connected users' (`CacheMode`).
    public var cache = CacheMode.whole
    /// Where change notices go on the bus (`--change-notices`): one subject every relay reads, or also each user's.
    public var changeNotices = ChangeNoticeSubjects.all
    /// This relay's name among several (logs, the sign-in reply's `node`, the bus's messages).
    public var nodeID = RelayConfiguration.defaultNodeID
    /// How long the relay waits for PostgreSQL before a request fails with `internal` (unused for SQLite).
    public var postgresTimeouts = PostgresStore.Timeouts()
    /// PEM certificate chain and key; when both are nil a development CA and certificate are made in the data directory.
    public var tlsCertificatePath: String?
    public var tlsPrivateKeyPath: String?
    /// The TLS library that serves connections: the system's OpenSSL or swift-nio-ssl's BoringSSL.
    public var tlsBackend = TLSBackend.nioSSL
    /// Kernel TLS (`--ktls`): the relay starts only where it can serve it (see `KernelTLS`).
    public var kernelTLS = false
    /// Fault tests only: how long each change notice waits after its commit before it is published (nil: none).
    public var testNoticeDelay: Duration?
    public var eventLoopThreads = System.coreCount
    public var limits = ConnectionLimits()
    public var relayLimits = RelayLimits()
    public var safety = SafetySettings()
    public var passwordIterations = PasswordHasher.recommendedIterations
    /// The hasher to use instead of one of `passwordIterations` (tests set a cheap one; the executable never does).
    public var passwordHasher: PasswordHasher?
    /// What the `ok` of every sign-in lists as `features` (protocol 1.1): one entry per optional part
    /// of the contract this relay serves.
    public var features = ["share", "push", "friends-map", "trail"]
    /// Share-link lifetimes (`publicURL` there is replaced at start-up, see `sharePublicURL(port:)`).
    public var shares = ShareSettings()
    /// The relay's public base URL for share links (`--public-url`); nil for https://HOST:PORT of the listener.
    public var publicURL: String?
    /// The web app served at `/` and `/f` (none unless a web root is set; the executable finds a default).
    public var web = WebConfiguration()
    /// Web Push and the operator webhook.
    public var push = PushConfiguration()
    /// Load balancers whose connections start with a PROXY protocol header (v1 or v2) naming the client
    /// (`--proxy-protocol-from`). A connection from one of these addresses without a valid header is closed;
    /// a header from any other address is not trusted. Empty: no PROXY protocol at all.
    public var proxyProtocolFrom: [IPAddressRange] = []
    /// Web pages (origins, `https://host[:port]`) whose browsers may open WebSockets (`--allowed-origins`);
    /// nil for the relay's own (`webSocketOrigins(port:)`). Clients that send no `Origin` are always served.
    public var allowedOrigins: [String]?
    /// Where the full metrics are served over plain HTTP (`--metrics-listen`); nil for nowhere but the main
    /// port with `metricsToken`. The executable's default is `defaultMetricsListen`; the library's is none,
    /// so that relays started in-process (tests) open no port they did not ask for.
    public var metricsListen: ListenAddress?
    /// A bearer token (`--metrics-token`): with it, the main port's `/metrics` serves the full metrics to
    /// `Authorization: Bearer TOKEN`, and the metrics listener serves nobody else.
    public var metricsToken: String?

    public static let defaultMetricsListen = ListenAddress(host: "127.0.0.1", port: 9464)

    public init() {}

    /// The origins allowed to open WebSockets once the listener is on `port`: `allowedOrigins`, else the
    /// origin of the public URL. When that URL is derived from the listener (no `--public-url`), the
    /// loopback names of the same port are the relay too: a browser on this machine may use any of them.
    public func webSocketOrigins(port: Int) -> [String] {
        if let allowedOrigins { return allowedOrigins }
        let own = sharePublicURL(port: port)
        guard publicURL == nil else { return [own] }
        return [own, "https://localhost:\(port)", "https://127.0.0.1:\(port)", "https://[::1]:\(port)"]
    }

    /// The host name and the process id: unique among relays on one network, and telling an operator where to look.
    public static var defaultNodeID: String {
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "relay"
        return "\(host.isEmpty ? "relay" : host)-\(ProcessInfo.processInfo.processIdentifier)"
    }

    /// Whether `name` can be a node id: 1-64 characters of letters, digits, `.`, `_` and `-`.
    public static func isValidNodeID(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { $0.isASCIIAlphanumeric || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    public var databasePath: String { dataDirectory + "/homeward.sqlite" }
    /// Alarms delivered while the store failed, until it takes them (`FileAlarmSpool`); per relay, also in a cluster.
    public var alarmSpoolPath: String { dataDirectory + "/alarm-spool.jsonl" }
    public var devCertificateDirectory: String { dataDirectory + "/certs" }

    /// The base of share-link URLs: `publicURL`, else the listener's address (a wildcard host becomes
    /// `localhost`: an operator serving others sets `--public-url`).
    public func sharePublicURL(port: Int) -> String {
        if let publicURL { return publicURL.hasSuffix("/") ? String(publicURL.dropLast()) : publicURL }
        let name = ["0.0.0.0", "::", ""].contains(host) ? "localhost" : host.contains(":") ? "[\(host)]" : host
        return "https://\(name):\(port)"
    }
}

/// Per-connection limits of the network edge.
public struct ConnectionLimits: Sendable {
    /// The largest message (after reassembling fragments); larger closes the connection with 1009.
    public var maxMessageBytes = 64 * 1024
    /// Seconds a new connection has to authenticate before it is closed with 1008.
    public var authenticationTimeout: Double = 10
    /// Requests per second, with bursts of twice that.
    public var requestsPerSecond: Double = 100
    public var pingInterval: Double = 25
    public var idleTimeout: Double = 90
    /// Messages other than positions that may wait for a slow client before it is disconnected.
    public var maxOutboundBacklog = 1024
    /// Bytes of queued messages (positions included) a slow client may pin before it is disconnected.
    public var maxOutboundBacklogBytes = 4 * 1024 * 1024
    /// Pings and pongs per second a client may send, with bursts of twice that; more closes with 1008.
    public var controlFramesPerSecond: Double = 10
    /// Connections from one IP address that have not signed in yet; more are closed right after accept.
    public var maxUnauthenticatedPerAddress = 64
    /// Failed `login` or `hello` attempts on one connection before it is closed with 1008.
    public var maxAuthenticationFailures = 5
    /// Seconds a TLS handshake plus HTTP upgrade may take.
    public var handshakeTimeout: Double = 10

    public init() {}
}


extension UInt8 {
    var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}

/// Where a cluster's change notices go (`--change-notices`), the same on every relay of a cluster.
public enum ChangeNoticeSubjects: String, Sendable, CaseIterable {
    /// Every notice on `hw.changes` only, which every relay reads.
    case all
    /// Also on the subject of every user and timer shard it concerns; relays with `--cache connected` read only those
    /// of the users and shards they follow (docs/architecture.md, "Change notices per user").
    case perUser = "per-user"
}
