import ArgumentParser
import HomewardCore
import HomewardServer
import Logging

/// The relay's options, each stated once (`RelayOption`: flag, variable, help and default) and parsed by
/// the `@Option` made from it. `resolve` (RelayOptions+Resolve.swift) is the one place configuration is
/// read: a flag, else its `HOMEWARD_*` variable, else the default.
struct RelayOptions: ParsableArguments {
    /// The defaults `--help` shows: the configuration's own.
    private static let defaults = RelayConfiguration()

    static let host = RelayOption<String>("host", "Address to listen on (0.0.0.0 for all IPv4 interfaces).", default: defaults.host)
    @Option(Self.host) var host: String?

    static let port = RelayOption<Int>(
        "port", "TLS port for WebSocket, /healthz, /metrics (in full only with --metrics-token) and the web app.", default: defaults.port)
    @Option(Self.port) var port: Int?

    static let metricsListen = RelayOption<String>(
        "metrics-listen",
        "Plain-HTTP listener for Prometheus: GET /metrics (the relay's full metrics, which show when alarms are raised) and GET /healthz. Keep it on loopback or a private monitoring network; off for none. Give each relay on one host its own port.",
        valueName: "host:port|off", default: RelayConfiguration.defaultMetricsListen.description)
    @Option(Self.metricsListen) var metricsListen: String?

    static let metricsToken = RelayOption<String>(
        "metrics-token",
        "Bearer token (at least 16 characters) for the metrics: with it, GET /metrics on --port serves them in full to Authorization: Bearer TOKEN, and the --metrics-listen listener serves nobody without it. Prefer HOMEWARD_METRICS_TOKEN: a command line is visible to every local user.",
        valueName: "token", defaultText: "none: the main port's /metrics shows only homeward_up")
    @Option(Self.metricsToken) var metricsToken: String?

    static let allowedOrigins = RelayOption<String>(
        "allowed-origins",
        "Web pages whose browsers may open WebSockets (the Origin a browser sends with every upgrade); others get 403. Clients that send no Origin (apps, the CLI) are not affected.",
        valueName: "origin[,origin...]",
        defaultText: "the origin of --public-url; without it, https://HOST:PORT of the listener and its loopback names")
    @Option(Self.allowedOrigins) var allowedOrigins: String?

    static let dataDir = RelayOption<String>(
        "data-dir", "Directory for the database and generated certificates; a new one is made 0700, the database files 0600.",
        default: defaults.dataDirectory)
    @Option(Self.dataDir) var dataDir: String?

    static let store = RelayOption<String>(
        "store",
        "Where accounts, friends, sessions and alarms are kept: sqlite (a file in the data directory) or postgres://USER[:PASS]@HOST[:PORT]/DB[?sslmode=disable|prefer|require], a PostgreSQL database several relays can share.",
        valueName: "url", default: defaults.store.description)
    @Option(Self.store) var store: String?

    static let bus = RelayOption<String>(
        "bus",
        "How relays sharing one PostgreSQL store hear of each other: local (this relay is the only one) or nats://HOST:PORT[,HOST:PORT...], nats-server (needs --store postgres://...).",
        valueName: "url", default: defaults.bus.description)
    @Option(Self.bus) var bus: String?

    static let cache = RelayOption<String>(
        "cache",
        "What the relay keeps in memory. whole: every registered user's part, loaded at start (memory and start time grow with the registered users; no request reads the store). connected: only what the users it serves need (their part, read when they sign in or a request names them) and the entities timers fire on (memory and start time follow the connected users; the first request naming a user not yet cached reads their part, one indexed query, while the relay's other requests wait). Both answer every request the same.",
        valueName: "whole|connected", default: defaults.cache.rawValue)
    @Option(Self.cache) var cache: String?

    static let changeNotices = RelayOption<String>(
        "change-notices",
        "Where a relay sharing its store tells the others what it committed (the same on every relay of a cluster). all: one subject every relay reads. per-user: also the subject of each user and timer shard a change concerns, and relays with --cache connected hear only those of the users they serve and the timer shards they fire (more messages on the bus per notice; fewer notices each such relay decodes when relays serve different users).",
        valueName: "all|per-user", default: defaults.changeNotices.rawValue)
    @Option(Self.changeNotices) var changeNotices: String?
    static let cacheGrace = RelayOption<Double>(
        "cache-grace",
        "With --cache connected: seconds a user stays in memory after they signed in elsewhere, were named by a request, or their last connection here closed; then their part is dropped (read again, one indexed query, if they come back or are named later). Users connected here, and owners whose share link has a viewer here, stay.",
        default: Double(defaults.relayLimits.cacheEvictionGrace) / 1000)
    @Option(Self.cacheGrace) var cacheGrace: Double?

    static let nodeID = RelayOption<String>(
        "node-id", "This relay's name among several: in logs, in the sign-in reply's node, on the bus (1-64 of A-Z a-z 0-9 . _ -).",
        defaultText: "host name and process id")
    @Option(Self.nodeID) var nodeID: String?

    static let storeTimeout = RelayOption<Double>(
        "store-timeout", "Seconds the relay waits for PostgreSQL (connecting, and each read or write) before the request fails with internal.",
        default: seconds(defaults.postgresTimeouts.query))
    @Option(Self.storeTimeout) var storeTimeout: Double?

    static let tlsCert = RelayOption<String>("tls-cert", "PEM certificate chain (server certificate first). Needs --tls-key.")
    @Option(Self.tlsCert) var tlsCert: String?

    static let tlsKey = RelayOption<String>("tls-key", "PEM private key for --tls-cert.")
    @Option(Self.tlsKey) var tlsKey: String?

    static let tlsBackend = RelayOption<String>(
        "tls-backend",
        "The TLS library that serves connections: openssl (the system's libssl, updated by the distribution's security updates) or nio-ssl (swift-nio-ssl's BoringSSL, built into this binary).",
        valueName: "openssl|nio-ssl", default: defaults.tlsBackend.description)
    @Option(Self.tlsBackend) var tlsBackend: String?

    static let ktls = RelayOption<Bool>(
        "ktls",
        "Kernel TLS: have the kernel encrypt and decrypt records (OpenSSL 3's SSL_OP_ENABLE_KTLS). Needs --tls-backend openssl and the kernel's tls module (tls listed in /proc/sys/net/ipv4/tcp_available_ulp). This version cannot serve it: its OpenSSL handler passes records through memory buffers, and OpenSSL gives the keys to the kernel only on a socket it owns. So with --ktls the relay refuses to start (exit 1) and says which of these are missing.")
    @Flag(Self.ktls) var ktls = false

    /// For the cluster's fault tests only (hidden from `--help`): each change notice waits this long after its
    /// commit before it is published, so that a test can kill the relay between a commit and its notice.
    static let testNoticeDelayMs = RelayOption<Int>(
        "test-notice-delay-ms", "Fault tests only: hold each change notice this long after its commit.", hidden: true)
    @Option(Self.testNoticeDelayMs) var testNoticeDelayMs: Int?

    static let logLevel = RelayOption<String>(
        "log-level", "trace, debug, info, notice, warning, error or critical.", default: Settings.defaultLogLevel.rawValue)
    @Option(Self.logLevel) var logLevel: String?

    static let threads = RelayOption<Int>("threads", "Event loop threads (1-256).", defaultText: "the number of cores")
    @Option(Self.threads) var threads: Int?

    static let maxMessageBytes = RelayOption<Int>(
        "max-message-bytes", "Largest accepted message; larger ones close the connection with 1009.", default: defaults.limits.maxMessageBytes)
    @Option(Self.maxMessageBytes) var maxMessageBytes: Int?

    static let authTimeout = RelayOption<Double>(
        "auth-timeout", "Seconds a new connection has to sign in (at most a week).", default: defaults.limits.authenticationTimeout)
    @Option(Self.authTimeout) var authTimeout: Double?

    static let rateLimit = RelayOption<Double>(
        "rate-limit", "Requests per second per connection (bursts of twice that).", default: defaults.limits.requestsPerSecond)
    @Option(Self.rateLimit) var rateLimit: Double?

    static let pingInterval = RelayOption<Double>("ping-interval", "Seconds between WebSocket pings (at most a week).", default: defaults.limits.pingInterval)
    @Option(Self.pingInterval) var pingInterval: Double?

    static let idleTimeout = RelayOption<Double>(
        "idle-timeout", "Seconds of silence after which a connection is closed (at most a week).", default: defaults.limits.idleTimeout)
    @Option(Self.idleTimeout) var idleTimeout: Double?

    static let maxConnectionsPerUser = RelayOption<Int>(
        "max-connections-per-user",
        "Open connections one account may have on this relay: a further hello gets rate_limited, while a password login always gets in, closing the account's oldest connection (1008).",
        default: defaults.relayLimits.maxConnectionsPerUser)
    @Option(Self.maxConnectionsPerUser) var maxConnectionsPerUser: Int?

    static let maxBacklog = RelayOption<Int>(
        "max-backlog", "Messages (other than positions) queued for a slow client before it is disconnected.",
        default: defaults.limits.maxOutboundBacklog)
    @Option(Self.maxBacklog) var maxBacklog: Int?

    static let maxBacklogBytes = RelayOption<Int>(
        "max-backlog-bytes", "Bytes of messages queued for a slow client before it is disconnected.",
        default: defaults.limits.maxOutboundBacklogBytes)
    @Option(Self.maxBacklogBytes) var maxBacklogBytes: Int?

    static let controlFrameRate = RelayOption<Double>(
        "control-frame-rate", "WebSocket pings and pongs per second per connection (bursts of twice that); more closes it with 1008.",
        default: defaults.limits.controlFramesPerSecond)
    @Option(Self.controlFrameRate) var controlFrameRate: Double?

    static let maxUnauthenticatedPerAddress = RelayOption<Int>(
        "max-unauthenticated-per-address", "Connections from one IP address not yet signed in; more are closed right after accept.",
        default: defaults.limits.maxUnauthenticatedPerAddress)
    @Option(Self.maxUnauthenticatedPerAddress) var maxUnauthenticatedPerAddress: Int?

    static let proxyProtocolFrom = RelayOption<String>(
        "proxy-protocol-from",
        "Load balancers (haproxy send-proxy-v2) whose connections start with a PROXY protocol header, v2 or v1, naming the client: its address is then the one every per-address limit, log line and metric sees. A connection from these addresses without a valid header is closed; a header from any other address is not trusted. Only list balancers: whoever connects from here can claim any address.",
        valueName: "cidr[,cidr...]", defaultText: "none")
    @Option(Self.proxyProtocolFrom) var proxyProtocolFrom: String?

    static let loginFailuresPerUser = RelayOption<Int>(
        "login-failures-per-user", "Failed logins per username within 15 minutes before logins are refused (0: no limit).",
        default: defaults.relayLimits.loginFailuresPerUsername)
    @Option(Self.loginFailuresPerUser) var loginFailuresPerUser: Int?

    static let loginFailuresPerAddress = RelayOption<Int>(
        "login-failures-per-address", "Failed logins per client address within 15 minutes before logins are refused (0: no limit).",
        default: defaults.relayLimits.loginFailuresPerAddress)
    @Option(Self.loginFailuresPerAddress) var loginFailuresPerAddress: Int?

    static let helloFailuresPerAddress = RelayOption<Int>(
        "hello-failures-per-address",
        "Failed hellos (unknown, revoked or expired tokens) per client address within 15 minutes; past that, hellos from it with a token the relay does not hold as valid get rate_limited (0: no limit).",
        default: defaults.relayLimits.helloFailuresPerAddress)
    @Option(Self.helloFailuresPerAddress) var helloFailuresPerAddress: Int?

    static let registrationsPerAddress = RelayOption<Int>(
        "registrations-per-address", "Accounts one client address may create per hour (0: no limit).",
        default: defaults.relayLimits.registrationsPerAddress)
    @Option(Self.registrationsPerAddress) var registrationsPerAddress: Int?

    static let tokenLifetime = RelayOption<Double>(
        "token-lifetime", "Days a sign-in token stays valid after its last use; each sign-in with it extends it.",
        default: Double(defaults.relayLimits.tokenLifetime) / millisecondsPerDay)
    @Option(Self.tokenLifetime) var tokenLifetime: Double?

    static let pbkdf2Iterations = RelayOption<Int>(
        "pbkdf2-iterations", "PBKDF2-HMAC-SHA256 iterations for new password hashes (at least \(PasswordHasher.minimumIterations)).",
        default: defaults.passwordIterations)
    @Option(Self.pbkdf2Iterations) var pbkdf2Iterations: Int?

    static let lostContactGrace = RelayOption<Double>(
        "lost-contact-grace", "Seconds the owner of an active session may be offline before observers get session.lost (at most a week).",
        default: Double(defaults.safety.lostContactGrace) / 1000)
    @Option(Self.lostContactGrace) var lostContactGrace: Double?

    static let alarmRepeatInterval = RelayOption<Double>(
        "alarm-repeat-interval", "Seconds between repeats of an unacknowledged alarm (at most a week).",
        default: Double(defaults.safety.alarmRepeatInterval) / 1000)
    @Option(Self.alarmRepeatInterval) var alarmRepeatInterval: Double?

    static let alarmRepeatMax = RelayOption<Int>(
        "alarm-repeat-max", "How many times an unacknowledged alarm is repeated (0: never).", default: defaults.safety.alarmRepeatMax)
    @Option(Self.alarmRepeatMax) var alarmRepeatMax: Int?

    static let publicURL = RelayOption<String>(
        "public-url", "The relay's public base URL; share links are URL/f#TOKEN.",
        valueName: "url", defaultText: "https://HOST:PORT of the listener, localhost for 0.0.0.0")
    @Option(Self.publicURL) var publicURL: String?

    static let watchFailuresPerAddress = RelayOption<Int>(
        "watch-failures-per-address", "Failed share-link watch attempts per client address within 15 minutes before watch is refused with rate_limited.",
        default: defaults.relayLimits.watchFailuresPerAddress)
    @Option(Self.watchFailuresPerAddress) var watchFailuresPerAddress: Int?

    static let shareMinTTL = RelayOption<Int64>(
        "share-min-ttl", "For tests only: the shortest share-link ttl in seconds (the contract's is 60).",
        default: defaults.shares.minimumTTL)
    @Option(Self.shareMinTTL) var shareMinTTL: Int64?

    static let webRoot = RelayOption<String>(
        "web-root", "Directory of the web app served at / and /f (index.html, f.html, static/).",
        valueName: "dir", defaultText: "PREFIX/share/homeward/web beside the binary's bin/, else web/ of the source checkout it was built from")
    @Option(Self.webRoot) var webRoot: String?

    static let leafletDir = RelayOption<String>(
        "leaflet-dir",
        "Leaflet's files (Debian: apt-get install libjs-leaflet), served at /vendor/leaflet/; without them the page draws its own plain map.",
        valueName: "dir", default: WebConfiguration.debianLeafletDirectory)
    @Option(Self.leafletDir) var leafletDir: String?

    static let mapTiles = RelayOption<String>(
        "map-tiles",
        "Tile server the web app's map loads images from, e.g. https://tile.example.org/{z}/{x}/{y}.png; browsers then ask that server for the tiles around each walk.",
        valueName: "url-template", defaultText: "none: no third-party requests, a plain map")
    @Option(Self.mapTiles) var mapTiles: String?

    static let mapAttribution = RelayOption<String>(
        "map-attribution", "Attribution the tile server's licence requires, shown on the map (with --map-tiles).", valueName: "text")
    @Option(Self.mapAttribution) var mapAttribution: String?

    static let mapTilesMBTiles = RelayOption<String>(
        "map-tiles-mbtiles",
        "MBTiles file of vector tiles (tilemaker's output for a city; see deploy/README.md) that the relay serves at /tiles/ and the web app draws as streets: a map with no third-party requests. Read whole into memory at start; the relay refuses to start if it is missing, corrupt or not vector tiles.",
        valueName: "file")
    @Option(Self.mapTilesMBTiles) var mapTilesMBTiles: String?

    @OptionGroup(title: "Web Push and webhook")
    var push: PushRelayOptions

    static let millisecondsPerDay = 86_400_000.0

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
