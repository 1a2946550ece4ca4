import ArgumentParser
import Foundation
import HomewardServer
import Logging

/// The relay's options. `resolve` is the one place configuration is read: a flag, else its
/// `HOMEWARD_*` variable, else the default.
struct RelayOptions: ParsableArguments {
    @Option(help: "Address to listen on (0.0.0.0 for all IPv4 interfaces). [default: 0.0.0.0]")
    var host: String?

    @Option(help: "TLS port for WebSocket, /healthz, /metrics (in full only with --metrics-token) and the web app. [default: 8443]")
    var port: Int?

    @Option(name: .customLong("metrics-listen"), help: ArgumentHelp(
        "Plain-HTTP listener for Prometheus: GET /metrics (the relay's full metrics, which show when alarms are raised) and GET /healthz. Keep it on loopback or a private monitoring network; off for none. Give each relay on one host its own port. [default: 127.0.0.1:9464]",
        valueName: "host:port|off"))
    var metricsListen: String?

    @Option(name: .customLong("metrics-token"), help: ArgumentHelp(
        "Bearer token (at least 16 characters) for the metrics: with it, GET /metrics on --port serves them in full to Authorization: Bearer TOKEN, and the --metrics-listen listener serves nobody without it. Prefer HOMEWARD_METRICS_TOKEN: a command line is visible to every local user. [default: none: the main port's /metrics shows only homeward_up]",
        valueName: "token"))
    var metricsToken: String?

    @Option(name: .customLong("allowed-origins"), help: ArgumentHelp(
        "Web pages whose browsers may open WebSockets (the Origin a browser sends with every upgrade); others get 403. Clients that send no Origin (apps, the CLI) are not affected. [default: the origin of --public-url; without it, https://HOST:PORT of the listener and its loopback names]",
        valueName: "origin[,origin...]"))
    var allowedOrigins: String?

    @Option(name: .customLong("data-dir"), help: "Directory for the database and generated certificates; a new one is made 0700, the database files 0600. [default: ./.homeward]")
    var dataDir: String?

    @Option(help: ArgumentHelp(
        "Where accounts, friends, sessions and alarms are kept: sqlite (a file in the data directory) or postgres://USER[:PASS]@HOST[:PORT]/DB[?sslmode=disable|prefer|require], a PostgreSQL database several relays can share. [default: sqlite]",
        valueName: "url"))
    var store: String?

    @Option(help: ArgumentHelp(
        "How relays sharing one PostgreSQL store hear of each other: local (this relay is the only one) or nats://HOST:PORT[,HOST:PORT...], nats-server (needs --store postgres://...). [default: local]",
        valueName: "url"))
    var bus: String?

    @Option(name: .customLong("node-id"), help: "This relay's name among several: in logs, in the sign-in reply's node, on the bus (1-64 of A-Z a-z 0-9 . _ -). [default: host name and process id]")
    var nodeID: String?

    @Option(name: .customLong("store-timeout"), help: "Seconds the relay waits for PostgreSQL (connecting, and each read or write) before the request fails with internal. [default: 5]")
    var storeTimeout: Double?

    @Option(name: .customLong("tls-cert"), help: "PEM certificate chain (server certificate first). Needs --tls-key.")
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: "PEM private key for --tls-cert.")
    var tlsKey: String?

    @Option(name: .customLong("tls-backend"), help: ArgumentHelp(
        "The TLS library that serves connections: openssl (the system's libssl, updated by the distribution's security updates) or nio-ssl (swift-nio-ssl's BoringSSL, built into this binary). [default: nio-ssl]",
        valueName: "openssl|nio-ssl"))
    var tlsBackend: String?

    @Flag(name: .customLong("ktls"), help: ArgumentHelp(
        "Kernel TLS: have the kernel encrypt and decrypt records (OpenSSL 3's SSL_OP_ENABLE_KTLS). Needs --tls-backend openssl and the kernel's tls module (tls listed in /proc/sys/net/ipv4/tcp_available_ulp). This version cannot serve it: its OpenSSL handler passes records through memory buffers, and OpenSSL gives the keys to the kernel only on a socket it owns. So with --ktls the relay refuses to start (exit 1) and says which of these are missing. [default: off]"))
    var ktls = false

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical. [default: info]")
    var logLevel: String?

    @Option(help: "Event loop threads. [default: the number of cores]")
    var threads: Int?

    @Option(name: .customLong("max-message-bytes"), help: "Largest accepted message; larger ones close the connection with 1009. [default: 65536]")
    var maxMessageBytes: Int?

    @Option(name: .customLong("auth-timeout"), help: "Seconds a new connection has to sign in. [default: 10]")
    var authTimeout: Double?

    @Option(name: .customLong("rate-limit"), help: "Requests per second per connection (bursts of twice that). [default: 100]")
    var rateLimit: Double?

    @Option(name: .customLong("ping-interval"), help: "Seconds between WebSocket pings. [default: 25]")
    var pingInterval: Double?

    @Option(name: .customLong("idle-timeout"), help: "Seconds of silence after which a connection is closed. [default: 90]")
    var idleTimeout: Double?

    @Option(name: .customLong("max-connections-per-user"), help: "Open connections one account may have on this relay: a further hello gets rate_limited, while a password login always gets in, closing the account's oldest connection (1008). [default: 16]")
    var maxConnectionsPerUser: Int?

    @Option(name: .customLong("max-backlog"), help: "Messages (other than positions) queued for a slow client before it is disconnected. [default: 1024]")
    var maxBacklog: Int?

    @Option(name: .customLong("max-backlog-bytes"), help: "Bytes of messages queued for a slow client before it is disconnected. [default: 4194304]")
    var maxBacklogBytes: Int?

    @Option(name: .customLong("control-frame-rate"), help: "WebSocket pings and pongs per second per connection (bursts of twice that); more closes it with 1008. [default: 10]")
    var controlFrameRate: Double?

    @Option(name: .customLong("max-unauthenticated-per-address"), help: "Connections from one IP address not yet signed in; more are closed right after accept. [default: 64]")
    var maxUnauthenticatedPerAddress: Int?

    @Option(name: .customLong("proxy-protocol-from"), help: ArgumentHelp(
        "Load balancers (haproxy send-proxy-v2) whose connections start with a PROXY protocol header, v2 or v1, naming the client: its address is then the one every per-address limit, log line and metric sees. A connection from these addresses without a valid header is closed; a header from any other address is not trusted. Only list balancers: whoever connects from here can claim any address. [default: none]",
        valueName: "cidr[,cidr...]"))
    var proxyProtocolFrom: String?

    @Option(name: .customLong("login-failures-per-user"), help: "Failed logins per username within 15 minutes before logins are refused. [default: 10]")
    var loginFailuresPerUser: Int?

    @Option(name: .customLong("login-failures-per-address"), help: "Failed logins per client address within 15 minutes before logins are refused. [default: 50]")
    var loginFailuresPerAddress: Int?

    @Option(name: .customLong("hello-failures-per-address"), help: "Failed hellos (unknown, revoked or expired tokens) per client address within 15 minutes; past that, hellos from it with a token the relay does not hold as valid get rate_limited (0: no limit). [default: 50]")
    var helloFailuresPerAddress: Int?

    @Option(name: .customLong("registrations-per-address"), help: "Accounts one client address may create per hour (0: no limit). [default: 10]")
    var registrationsPerAddress: Int?

    @Option(name: .customLong("token-lifetime"), help: "Days a sign-in token stays valid after its last use; each sign-in with it extends it. [default: 30]")
    var tokenLifetime: Double?

    @Option(name: .customLong("pbkdf2-iterations"), help: "PBKDF2-HMAC-SHA256 iterations for new password hashes (at least 210000). [default: 600000]")
    var pbkdf2Iterations: Int?

    @Option(name: .customLong("lost-contact-grace"), help: "Seconds the owner of an active session may be offline before observers get session.lost. [default: 60]")
    var lostContactGrace: Double?

    @Option(name: .customLong("alarm-repeat-interval"), help: "Seconds between repeats of an unacknowledged alarm. [default: 30]")
    var alarmRepeatInterval: Double?

    @Option(name: .customLong("alarm-repeat-max"), help: "How many times an unacknowledged alarm is repeated (0: never). [default: 10]")
    var alarmRepeatMax: Int?

    @Option(name: .customLong("public-url"), help: ArgumentHelp(
        "The relay's public base URL; share links are URL/f#TOKEN. [default: https://HOST:PORT of the listener, localhost for 0.0.0.0]",
        valueName: "url"))
    var publicURL: String?

    @Option(name: .customLong("watch-failures-per-address"), help: "Failed share-link watch attempts per client address within 15 minutes before watch is refused with rate_limited. [default: 20]")
    var watchFailuresPerAddress: Int?

    @Option(name: .customLong("share-min-ttl"), help: "For tests only: the shortest share-link ttl in seconds (the contract's is 60). [default: 60]")
    var shareMinTTL: Int?

    @Option(name: .customLong("web-root"), help: ArgumentHelp(
        "Directory of the web app served at / and /f (index.html, f.html, static/). [default: PREFIX/share/homeward/web beside the binary's bin/, else web/ of the source checkout it was built from]",
        valueName: "dir"))
    var webRoot: String?

    @Option(name: .customLong("leaflet-dir"), help: ArgumentHelp(
        "Leaflet's files (Debian: apt-get install libjs-leaflet), served at /vendor/leaflet/; without them the page draws its own plain map. [default: /usr/share/javascript/leaflet]",
        valueName: "dir"))
    var leafletDir: String?

    @Option(name: .customLong("map-tiles"), help: ArgumentHelp(
        "Tile server the web app's map loads images from, e.g. https://tile.example.org/{z}/{x}/{y}.png; browsers then ask that server for the tiles around each walk. [default: none: no third-party requests, a plain map]",
        valueName: "url-template"))
    var mapTiles: String?

    @Option(name: .customLong("map-attribution"), help: ArgumentHelp(
        "Attribution the tile server's licence requires, shown on the map (with --map-tiles).", valueName: "text"))
    var mapAttribution: String?

    @Option(name: .customLong("map-tiles-mbtiles"), help: ArgumentHelp(
        "MBTiles file of vector tiles (tilemaker's output for a city; see deploy/README.md) that the relay serves at /tiles/ and the web app draws as streets: a map with no third-party requests. Read whole into memory at start; the relay refuses to start if it is missing, corrupt or not vector tiles.",
        valueName: "file"))
    var mapTilesMBTiles: String?

    @OptionGroup(title: "Web Push and webhook")
    var push: PushRelayOptions

    struct Settings {
        var relay: RelayConfiguration
        var logLevel: Logger.Level
    }

    func resolve(environment: [String: String]) throws -> Settings {
        let env = EnvironmentReader(values: environment)
        var config = RelayConfiguration()
        config.host = try env.value(host, "host") ?? config.host
        config.port = try env.value(port, "port") ?? config.port
        config.dataDirectory = try env.value(dataDir, "data-dir") ?? config.dataDirectory
        if let text = try env.value(store, "store") {
            do { config.store = try StoreSetting(parsing: text) } catch { throw ValidationError(error.description) }
        }
        if let text = try env.value(bus, "bus") {
            do { config.bus = try BusSetting(parsing: text) } catch { throw ValidationError(error.description) }
        }
        config.nodeID = try env.value(nodeID, "node-id") ?? config.nodeID
        if let seconds = try env.value(storeTimeout, "store-timeout") {
            guard seconds > 0, seconds <= 3600 else { throw ValidationError("store-timeout must be more than 0 and at most 3600 seconds") }
            config.postgresTimeouts = .init(connect: .milliseconds(Int64(seconds * 1000)), query: .milliseconds(Int64(seconds * 1000)))
        }
        config.tlsCertificatePath = try env.value(tlsCert, "tls-cert")
        config.tlsPrivateKeyPath = try env.value(tlsKey, "tls-key")
        if let name = try env.value(tlsBackend, "tls-backend") {
            guard let backend = TLSBackend(name) else { throw ValidationError("tls-backend must be openssl or nio-ssl, not '\(name)'") }
            config.tlsBackend = backend
        }
        config.kernelTLS = try env.value(ktls ? true : nil, "ktls") ?? false
        config.eventLoopThreads = try env.value(threads, "threads") ?? config.eventLoopThreads
        config.limits.maxMessageBytes = try env.value(maxMessageBytes, "max-message-bytes") ?? config.limits.maxMessageBytes
        config.limits.authenticationTimeout = try env.value(authTimeout, "auth-timeout") ?? config.limits.authenticationTimeout
        config.limits.requestsPerSecond = try env.value(rateLimit, "rate-limit") ?? config.limits.requestsPerSecond
        config.limits.pingInterval = try env.value(pingInterval, "ping-interval") ?? config.limits.pingInterval
        config.limits.idleTimeout = try env.value(idleTimeout, "idle-timeout") ?? config.limits.idleTimeout
        config.limits.maxOutboundBacklog = try env.value(maxBacklog, "max-backlog") ?? config.limits.maxOutboundBacklog
        try env.override(&config.limits.maxOutboundBacklogBytes, maxBacklogBytes, "max-backlog-bytes")
        try env.override(&config.limits.controlFramesPerSecond, controlFrameRate, "control-frame-rate")
        try env.override(&config.limits.maxUnauthenticatedPerAddress, maxUnauthenticatedPerAddress, "max-unauthenticated-per-address")
        if let text = try env.value(proxyProtocolFrom, "proxy-protocol-from") {
            do { config.proxyProtocolFrom = try IPAddressRange.parseList(text) } catch { throw ValidationError("--proxy-protocol-from: \(error)") }
        }
        config.relayLimits.maxConnectionsPerUser =
            try env.value(maxConnectionsPerUser, "max-connections-per-user") ?? config.relayLimits.maxConnectionsPerUser
        config.relayLimits.loginFailuresPerUsername =
            try env.value(loginFailuresPerUser, "login-failures-per-user") ?? config.relayLimits.loginFailuresPerUsername
        config.relayLimits.loginFailuresPerAddress =
            try env.value(loginFailuresPerAddress, "login-failures-per-address") ?? config.relayLimits.loginFailuresPerAddress
        try env.override(&config.relayLimits.registrationsPerAddress, registrationsPerAddress, "registrations-per-address")
        try env.override(&config.relayLimits.helloFailuresPerAddress, helloFailuresPerAddress, "hello-failures-per-address")
        if let days = try env.value(tokenLifetime, "token-lifetime") {
            guard days > 0, days <= 3650 else { throw ValidationError("token-lifetime must be more than 0 and at most 3650 days") }
            config.relayLimits.tokenLifetime = Int64(days * 86_400_000)
        }
        config.passwordIterations = try env.value(pbkdf2Iterations, "pbkdf2-iterations") ?? config.passwordIterations
        if let grace = try env.value(lostContactGrace, "lost-contact-grace") { config.safety.lostContactGrace = Int64(grace * 1000) }
        if let interval = try env.value(alarmRepeatInterval, "alarm-repeat-interval") {
            config.safety.alarmRepeatInterval = Int64(interval * 1000)
        }
        config.safety.alarmRepeatMax = try env.value(alarmRepeatMax, "alarm-repeat-max") ?? config.safety.alarmRepeatMax
        if let url = try env.value(publicURL, "public-url") {
            guard url.hasPrefix("https://") || url.hasPrefix("http://"), url.count > "https://".count else {
                throw ValidationError("public-url must be an http:// or https:// URL, e.g. https://homeward.example.org")
            }
            config.publicURL = url
        }
        try env.override(&config.relayLimits.watchFailuresPerAddress, watchFailuresPerAddress, "watch-failures-per-address")
        try resolveMetricsAndOrigins(&config, env)
        try env.override(&config.shares.minimumTTL, shareMinTTL.map(Int64.init), "share-min-ttl")
        try resolveWeb(&config.web, env)
        try push.apply(to: &config.push, env)
        let levelName = try env.value(logLevel, "log-level") ?? "info"
        guard let level = Logger.Level(rawValue: levelName) else {
            throw ValidationError("unknown log level '\(levelName)'")
        }
        try validate(config)
        return Settings(relay: config, logLevel: level)
    }

    private func resolveMetricsAndOrigins(_ config: inout RelayConfiguration, _ env: EnvironmentReader) throws {
        let listen = try env.value(metricsListen, "metrics-listen") ?? RelayConfiguration.defaultMetricsListen.description
        if listen == "off" {
            config.metricsListen = nil
        } else {
            guard let address = ListenAddress(parsing: listen) else {
                throw ValidationError("metrics-listen must be HOST:PORT ([HOST]:PORT for IPv6) or off, e.g. 127.0.0.1:9464")
            }
            config.metricsListen = address
        }
        if let token = try env.value(metricsToken, "metrics-token") {
            guard token.count >= 16, token.allSatisfy({ $0.isASCII && !$0.isWhitespace && !$0.isNewline }) else {
                throw ValidationError("metrics-token must be at least 16 printable ASCII characters without spaces")
            }
            config.metricsToken = token
        }
        if let list = try env.value(allowedOrigins, "allowed-origins") {
            var origins: [String] = []
            for entry in list.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !entry.isEmpty {
                guard let origin = WebOrigin.normalize(entry) else {
                    throw ValidationError("allowed-origins: '\(entry)' is not an origin such as https://homeward.example.org")
                }
                origins.append(origin)
            }
            guard !origins.isEmpty else { throw ValidationError("allowed-origins needs at least one origin") }
            config.allowedOrigins = origins
        }
    }

    private func resolveWeb(_ web: inout WebConfiguration, _ env: EnvironmentReader) throws {
        web.webRoot = try env.value(webRoot, "web-root") ?? WebConfiguration.defaultWebRoot()
        if let directory = try env.value(leafletDir, "leaflet-dir") { web.leafletDirectory = directory }
        web.vectorTilesPath = try env.value(mapTilesMBTiles, "map-tiles-mbtiles")
        let attribution = try env.value(mapAttribution, "map-attribution")
        if let template = try env.value(mapTiles, "map-tiles") {
            do {
                web.mapTiles = try MapTiles(urlTemplate: template, attribution: attribution ?? "")
            } catch {
                throw ValidationError(error.description)
            }
        } else if attribution != nil {
            throw ValidationError("--map-attribution needs --map-tiles")
        }
    }

    private func validate(_ config: RelayConfiguration) throws {
        guard (0...65535).contains(config.port) else { throw ValidationError("port must be 0-65535") }
        guard (config.tlsCertificatePath == nil) == (config.tlsPrivateKeyPath == nil) else {
            throw ValidationError("--tls-cert and --tls-key go together (or leave both out for a development certificate)")
        }
        guard config.limits.maxMessageBytes >= 1024 else { throw ValidationError("max-message-bytes must be at least 1024") }
        guard config.limits.authenticationTimeout > 0, config.limits.pingInterval > 0, config.limits.idleTimeout > 0,
              config.limits.requestsPerSecond > 0, config.limits.controlFramesPerSecond > 0 else {
            throw ValidationError("timeouts, intervals and rates must be positive")
        }
        guard config.safety.lostContactGrace > 0, config.safety.alarmRepeatInterval > 0, config.safety.alarmRepeatMax >= 0 else {
            throw ValidationError("lost-contact-grace and alarm-repeat-interval must be positive, alarm-repeat-max at least 0")
        }
        guard config.limits.maxOutboundBacklog >= 1, config.limits.maxOutboundBacklogBytes >= config.limits.maxMessageBytes else {
            throw ValidationError("max-backlog must be at least 1 and max-backlog-bytes at least max-message-bytes")
        }
        guard config.limits.maxUnauthenticatedPerAddress >= 1 else {
            throw ValidationError("max-unauthenticated-per-address must be at least 1")
        }
        guard config.relayLimits.registrationsPerAddress >= 0 else { throw ValidationError("registrations-per-address must be at least 0") }
        guard config.relayLimits.helloFailuresPerAddress >= 0 else { throw ValidationError("hello-failures-per-address must be at least 0") }
        guard config.passwordIterations >= 210_000 else { throw ValidationError("pbkdf2-iterations must be at least 210000") }
        guard RelayConfiguration.isValidNodeID(config.nodeID) else {
            throw ValidationError("node-id must be 1-64 characters of A-Z a-z 0-9 . _ -")
        }
        if case .nats = config.bus, config.store == .sqlite {
            throw ValidationError("--bus nats://... needs --store postgres://...: relays on a bus share one PostgreSQL database (an SQLite file is one relay's own)")
        }
        guard config.relayLimits.watchFailuresPerAddress >= 1 else { throw ValidationError("watch-failures-per-address must be at least 1") }
        guard (1...config.shares.defaultTTL).contains(config.shares.minimumTTL) else {
            throw ValidationError("share-min-ttl must be 1 to \(config.shares.defaultTTL) seconds")
        }
        guard config.eventLoopThreads >= 1 else { throw ValidationError("threads must be at least 1") }
    }
}

/// Reads `HOMEWARD_*` variables for options not given on the command line.
struct EnvironmentReader {
    let values: [String: String]

    static func variable(for option: String) -> String {
        "HOMEWARD_" + option.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    func value<T: LosslessStringConvertible>(_ flag: T?, _ option: String) throws -> T? {
        if let flag { return flag }
        let name = Self.variable(for: option)
        guard let raw = values[name], !raw.isEmpty else { return nil }
        guard let parsed = T(raw) else { throw ValidationError("\(name)='\(raw)' is not a valid value for --\(option)") }
        return parsed
    }

    /// Replaces `setting` (its default) with the flag or variable for `option`, when one is given.
    func override<T: LosslessStringConvertible>(_ setting: inout T, _ flag: T?, _ option: String) throws {
        if let given = try value(flag, option) { setting = given }
    }
}

enum Environment {
    static var current: [String: String] { ProcessInfo.processInfo.environment }
}
