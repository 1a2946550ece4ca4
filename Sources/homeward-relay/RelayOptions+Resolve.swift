import ArgumentParser
import Foundation
import HomewardCore
import HomewardServer
import Logging

extension RelayOptions {
    struct Settings {
        static let defaultLogLevel = Logger.Level.info

        var relay: RelayConfiguration
        var logLevel: Logger.Level
    }

    /// The configuration: each option's flag, else its `HOMEWARD_*` variable, else its default.
    func resolve(environment env: Environment) throws -> Settings {
        var config = RelayConfiguration()
        try env.override(&config.host, host, Self.host)
        try env.override(&config.port, port, Self.port)
        try env.override(&config.dataDirectory, dataDir, Self.dataDir)
        if let text = try env.value(store, Self.store) {
            do { config.store = try StoreSetting(parsing: text) } catch { throw ValidationError(error.description) }
        }
        if let text = try env.value(bus, Self.bus) {
            do { config.bus = try BusSetting(parsing: text) } catch { throw ValidationError(error.description) }
        }
        if let name = try env.value(cache, Self.cache) {
            guard let mode = CacheMode(rawValue: name) else { throw ValidationError("cache must be whole or connected, not '\(name)'") }
            config.cache = mode
        }
        if let name = try env.value(changeNotices, Self.changeNotices) {
            guard let subjects = ChangeNoticeSubjects(rawValue: name) else {
                throw ValidationError("change-notices must be all or per-user, not '\(name)'")
            }
            config.changeNotices = subjects
        }
        if let seconds = try env.value(cacheGrace, Self.cacheGrace) {
            guard seconds >= 1, seconds <= 7 * 86_400 else { throw ValidationError("cache-grace must be at least 1 and at most 604800 seconds") }
            config.relayLimits.cacheEvictionGrace = Int64(seconds * 1000)
        }
        try env.override(&config.nodeID, nodeID, Self.nodeID)
        if let seconds = try env.value(storeTimeout, Self.storeTimeout) {
            guard seconds > 0, seconds <= 3600 else { throw ValidationError("store-timeout must be more than 0 and at most 3600 seconds") }
            config.postgresTimeouts = .init(connect: .milliseconds(Int64(seconds * 1000)), query: .milliseconds(Int64(seconds * 1000)))
        }
        config.tlsCertificatePath = try env.value(tlsCert, Self.tlsCert)
        config.tlsPrivateKeyPath = try env.value(tlsKey, Self.tlsKey)
        if let name = try env.value(tlsBackend, Self.tlsBackend) {
            guard let backend = TLSBackend(name) else { throw ValidationError("tls-backend must be openssl or nio-ssl, not '\(name)'") }
            config.tlsBackend = backend
        }
        config.kernelTLS = try env.value(ktls ? true : nil, Self.ktls) ?? false
        if let delay = try env.value(testNoticeDelayMs, Self.testNoticeDelayMs) {
            guard (0...60_000).contains(delay) else { throw ValidationError("test-notice-delay-ms must be 0 to 60000") }
            config.testNoticeDelay = .milliseconds(delay)
        }
        try env.override(&config.eventLoopThreads, threads, Self.threads)
        try resolveLimits(&config, env)
        if let url = try env.value(publicURL, Self.publicURL) {
            guard url.hasPrefix("https://") || url.hasPrefix("http://"), url.count > "https://".count else {
                throw ValidationError("public-url must be an http:// or https:// URL, e.g. https://homeward.example.org")
            }
            config.publicURL = url
        }
        try resolveMetricsAndOrigins(&config, env)
        try env.override(&config.shares.minimumTTL, shareMinTTL, Self.shareMinTTL)
        try resolveWeb(&config.web, env)
        try push.apply(to: &config.push, env)
        let levelName = try env.value(logLevel, Self.logLevel) ?? Settings.defaultLogLevel.rawValue
        guard let level = Logger.Level(rawValue: levelName) else {
            throw ValidationError("unknown log level '\(levelName)'")
        }
        try validate(config)
        return Settings(relay: config, logLevel: level)
    }
}

extension RelayOptions {
    private func resolveLimits(_ config: inout RelayConfiguration, _ env: Environment) throws {
        try env.override(&config.limits.maxMessageBytes, maxMessageBytes, Self.maxMessageBytes)
        if let seconds = try env.value(authTimeout, Self.authTimeout) { config.limits.authenticationTimeout = try Self.checked(seconds, Self.authTimeout) }
        try env.override(&config.limits.requestsPerSecond, rateLimit, Self.rateLimit)
        if let seconds = try env.value(pingInterval, Self.pingInterval) { config.limits.pingInterval = try Self.checked(seconds, Self.pingInterval) }
        if let seconds = try env.value(idleTimeout, Self.idleTimeout) { config.limits.idleTimeout = try Self.checked(seconds, Self.idleTimeout) }
        try env.override(&config.limits.maxOutboundBacklog, maxBacklog, Self.maxBacklog)
        try env.override(&config.limits.maxOutboundBacklogBytes, maxBacklogBytes, Self.maxBacklogBytes)
        try env.override(&config.limits.controlFramesPerSecond, controlFrameRate, Self.controlFrameRate)
        try env.override(&config.limits.maxUnauthenticatedPerAddress, maxUnauthenticatedPerAddress, Self.maxUnauthenticatedPerAddress)
        if let text = try env.value(proxyProtocolFrom, Self.proxyProtocolFrom) {
            do { config.proxyProtocolFrom = try IPAddressRange.parseList(text) } catch { throw ValidationError("--proxy-protocol-from: \(error)") }
        }
        try env.override(&config.relayLimits.maxConnectionsPerUser, maxConnectionsPerUser, Self.maxConnectionsPerUser)
        try env.override(&config.relayLimits.loginFailuresPerUsername, loginFailuresPerUser, Self.loginFailuresPerUser)
        try env.override(&config.relayLimits.loginFailuresPerAddress, loginFailuresPerAddress, Self.loginFailuresPerAddress)
        try env.override(&config.relayLimits.registrationsPerAddress, registrationsPerAddress, Self.registrationsPerAddress)
        try env.override(&config.relayLimits.helloFailuresPerAddress, helloFailuresPerAddress, Self.helloFailuresPerAddress)
        if let days = try env.value(tokenLifetime, Self.tokenLifetime) {
            guard days > 0, days <= 3650 else { throw ValidationError("token-lifetime must be more than 0 and at most 3650 days") }
            config.relayLimits.tokenLifetime = Int64(days * Self.millisecondsPerDay)
        }
        try env.override(&config.passwordIterations, pbkdf2Iterations, Self.pbkdf2Iterations)
        if let grace = try env.value(lostContactGrace, Self.lostContactGrace) {
            config.safety.lostContactGrace = Int64(try Self.checked(grace, Self.lostContactGrace) * 1000)
        }
        if let interval = try env.value(alarmRepeatInterval, Self.alarmRepeatInterval) {
            config.safety.alarmRepeatInterval = Int64(try Self.checked(interval, Self.alarmRepeatInterval) * 1000)
        }
        try env.override(&config.safety.alarmRepeatMax, alarmRepeatMax, Self.alarmRepeatMax)
        try env.override(&config.relayLimits.watchFailuresPerAddress, watchFailuresPerAddress, Self.watchFailuresPerAddress)
    }

    /// The longest a seconds option may be: these become whole milliseconds or nanoseconds (Int64), where
    /// infinity, NaN or a huge number would stop the relay with a trap instead of this message.
    static let maximumSeconds = 604_800.0

    /// `seconds`, given for `option`, when it is more than 0 and at most a week.
    private static func checked(_ seconds: Double, _ option: RelayOption<Double>) throws -> Double {
        guard seconds > 0, seconds <= maximumSeconds else {
            throw ValidationError("\(option.name) must be more than 0 and at most \(Int(maximumSeconds)) seconds (a week)")
        }
        return seconds
    }

    private func resolveMetricsAndOrigins(_ config: inout RelayConfiguration, _ env: Environment) throws {
        let listen = try env.value(metricsListen, Self.metricsListen) ?? RelayConfiguration.defaultMetricsListen.description
        if listen == "off" {
            config.metricsListen = nil
        } else {
            guard let address = ListenAddress(parsing: listen) else {
                throw ValidationError("metrics-listen must be HOST:PORT ([HOST]:PORT for IPv6) or off, e.g. 127.0.0.1:9464")
            }
            config.metricsListen = address
        }
        if let token = try env.value(metricsToken, Self.metricsToken) {
            guard token.count >= 16, token.allSatisfy({ $0.isASCII && !$0.isWhitespace && !$0.isNewline }) else {
                throw ValidationError("metrics-token must be at least 16 printable ASCII characters without spaces")
            }
            config.metricsToken = token
        }
        if let list = try env.value(allowedOrigins, Self.allowedOrigins) {
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

    private func resolveWeb(_ web: inout WebConfiguration, _ env: Environment) throws {
        web.webRoot = try env.value(webRoot, Self.webRoot) ?? WebConfiguration.defaultWebRoot()
        if let directory = try env.value(leafletDir, Self.leafletDir) { web.leafletDirectory = directory }
        web.vectorTilesPath = try env.value(mapTilesMBTiles, Self.mapTilesMBTiles)
        let attribution = try env.value(mapAttribution, Self.mapAttribution)
        if let template = try env.value(mapTiles, Self.mapTiles) {
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
        for rate in [config.limits.requestsPerSecond, config.limits.controlFramesPerSecond] {
            guard rate > 0, rate.isFinite else { throw ValidationError("rate-limit and control-frame-rate must be positive numbers") }
        }
        guard config.safety.alarmRepeatMax >= 0 else { throw ValidationError("alarm-repeat-max must be at least 0") }
        guard config.limits.maxOutboundBacklog >= 1, config.limits.maxOutboundBacklogBytes >= config.limits.maxMessageBytes else {
            throw ValidationError("max-backlog must be at least 1 and max-backlog-bytes at least max-message-bytes")
        }
        guard config.limits.maxUnauthenticatedPerAddress >= 1 else {
            throw ValidationError("max-unauthenticated-per-address must be at least 1")
        }
        guard config.relayLimits.registrationsPerAddress >= 0 else { throw ValidationError("registrations-per-address must be at least 0") }
        guard config.relayLimits.helloFailuresPerAddress >= 0 else { throw ValidationError("hello-failures-per-address must be at least 0") }
        guard config.passwordIterations >= PasswordHasher.minimumIterations else {
            throw ValidationError("pbkdf2-iterations must be at least \(PasswordHasher.minimumIterations)")
        }
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
        // Each event loop holds three descriptors (epoll, eventfd, timerfd), and NIO traps when it cannot open them:
        // 256 loops stay within the usual soft limit of 1024 open files.
        guard (1...256).contains(config.eventLoopThreads) else { throw ValidationError("threads must be at least 1 and at most 256") }
        guard config.relayLimits.maxConnectionsPerUser >= 1 else { throw ValidationError("max-connections-per-user must be at least 1") }
    }
}
