import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HomewardBench
import HomewardProtocol

/// A relay started on a filled store, as an operator starts one: how long until it answers its first sign-in, and
/// its resident memory once `connect` users are signed in, each on a WebSocket of their own. Run once per cache
/// mode, alternating (`--cache whole,connected`), so that modes measured in the same minutes compare.
struct RelayStart {
    /// The `homeward-relay` binary.
    let binary: String
    /// The SQLite store the city was filled into (`homeward.sqlite`, in the directory the relay gets as --data-dir).
    let storeFile: String
    let port: Int
    let connect: Int
    let extraArguments: [String]
    /// Seconds the connections stay open after the RSS is read (for a profiler), 0 for none.
    let hold: Int
    let env: BenchEnvironment
    /// Seconds to watch the relay after the `connect` users closed their connections (0: none).
    let leaveWait: Int
    /// The relay's plain-HTTP metrics port on 127.0.0.1 (0: off).
    let metricsPort: Int

    /// What one start measured.
    struct Result {
        let mode: String
        /// From launching the process to the first sign-in's `ok` (a `login` with the password).
        let firstSignIn: Duration
        /// Resident memory just after that sign-in, and after `connected` users signed in (3 s after the last).
        let residentAtFirstSignIn: Int
        let residentConnected: Int
        let connected: Int
        let failed: Int
        /// How long signing the `connected` users in took.
        let connectTime: Duration
    }

    /// Whether the binary knows `--cache`: a relay built before the connected-users cache caches everything, and is
    /// measured as `whole` without the flag.
    func knowsCacheOption() throws -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--help"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let help = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return help.contains("--cache")
    }

    func run(mode: String, knowsCache: Bool) async throws -> Result {
        guard knowsCache || mode == "whole" else {
            throw BenchError.failed("\(binary) has no --cache option, so it caches everything: it can only be measured as whole")
        }
        let dataDir = URL(fileURLWithPath: storeFile).deletingLastPathComponent().path
        let log = dataDir + "/relay-\(mode).log"
        // Limits that would refuse the benchmark's own sign-ins are raised; tokens of the filled city are a year old.
        let arguments = [
            "--host", "127.0.0.1", "--port", String(port), "--data-dir", dataDir, "--store", "sqlite",
            "--log-level", "notice", "--metrics-listen", metricsPort > 0 ? "127.0.0.1:\(metricsPort)" : "off", "--token-lifetime", "3650",
            "--max-unauthenticated-per-address", "100000", "--hello-failures-per-address", "0", "--auth-timeout", "60",
        ] + (knowsCache ? ["--cache", mode] : []) + extraArguments
        let started = ContinuousClock.now
        let relay = try ManagedProcess.launch(binary, arguments, log: log)
        defer { Self.stop(relay) }
        let first = try await firstSignIn(relay: relay, log: log)
        let firstSignIn = ContinuousClock.now - started
        guard let pid = relay.pid else { throw BenchError.failed("the relay exited; its log: \(log)") }
        let residentAtFirst = SystemInfo.residentBytes(pid) ?? 0
        print("\(mode): first sign-in answered \(CacheBench.ms(firstSignIn)) ms after launch, RSS \(residentAtFirst / 1_048_576) MiB")

        let connectStart = ContinuousClock.now
        let (env, port) = (env, port)
        let opened = try await mapConcurrently(connect, width: 64) { index -> BenchSocket? in
            // user0 signed in first, with the password; the others with their tokens, as returning apps do.
            try? await HomewardSignIn.connect(env, port: port, source: env.source(index),
                                              .hello(token: City.token(index + 1)))
        }
        let connectTime = ContinuousClock.now - connectStart
        var sockets = opened.compactMap { $0 }
        let connectedCount = sockets.count
        defer { for socket in sockets { socket.close() } }
        try await Task.sleep(for: .seconds(3))
        let resident = SystemInfo.residentBytes(pid) ?? 0
        print("\(mode): \(sockets.count) users signed in (\(connect - sockets.count) failed) in \(CacheBench.ms(connectTime)) ms, "
            + "RSS \(resident / 1_048_576) MiB\(cacheGauges())")
        if hold > 0, relay.pid != nil {
            print("\(mode): holding the connections \(hold) s; relay PID \(pid)")
            try await Task.sleep(for: .seconds(hold))
        }
        if leaveWait > 0 {
            // They leave; the first user stays signed in.
            for socket in sockets { socket.close() }
            sockets = []
            let left = ContinuousClock.now
            while ContinuousClock.now - left < .seconds(leaveWait) {
                try await Task.sleep(for: .seconds(min(5, leaveWait)))
                print("\(mode): \(CacheBench.ms(ContinuousClock.now - left)) ms after they left: RSS "
                    + "\((SystemInfo.residentBytes(pid) ?? 0) / 1_048_576) MiB\(cacheGauges())")
            }
        }
        // Stopped with everyone still connected, as an operator's `systemctl stop` finds it.
        if let stopTime = Self.stop(relay) {
            print("\(mode): stopped \(CacheBench.ms(stopTime)) ms after SIGTERM with \(sockets.count + 1) connections open")
        }
        first.close()
        return Result(mode: mode, firstSignIn: firstSignIn, residentAtFirstSignIn: residentAtFirst, residentConnected: resident,
                      connected: connectedCount, failed: connect - connectedCount, connectTime: connectTime)
    }

    /// The relay's resident and evicted users from its metrics (empty without --metrics-port).
    private func cacheGauges() -> String {
        guard metricsPort > 0, let text = Self.httpGet(port: metricsPort, path: "/metrics") else { return "" }
        let wanted = ["homeward_cache_resident_users", "homeward_cache_evictions_total"]
        let values = text.split(separator: "\n").filter { line in wanted.contains { line.hasPrefix($0 + " ") } }
        return values.isEmpty ? "" : ", " + values.joined(separator: ", ")
    }

    /// A plain HTTP/1.0 GET on 127.0.0.1, blocking, whole answer (a subprocess such as curl is no option with
    /// thousands of descriptors open: Foundation's `Process` crashed there).
    private static func httpGet(port: Int, path: String) -> String? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return nil }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard send(fd, request, request.count, 0) == request.count else { return nil }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            answer += buffer[0..<count]
        }
        return String(decoding: answer, as: UTF8.self)
    }

    /// SIGTERM, and SIGKILL when the relay is still there 30 s later: a relay still loading a whole store (or
    /// stopping slowly) must not hold the next mode's port and memory. Returns how long it took to exit (nil: it
    /// had exited already, or was killed).
    @discardableResult
    static func stop(_ relay: ManagedProcess) -> Duration? {
        guard let pid = relay.pid else { return nil }
        let start = ContinuousClock.now
        kill(pid, SIGTERM)
        let deadline = start + .seconds(30)
        while relay.pid != nil, ContinuousClock.now < deadline { usleep(20_000) }
        guard relay.pid != nil else { return ContinuousClock.now - start }
        print("the relay did not stop within 30 s of SIGTERM: killed")
        kill(pid, SIGKILL)
        relay.terminate()
        return nil
    }

    /// Tries to sign user0 in every 20 ms until the relay answers: nothing listens until it has loaded its cache.
    private func firstSignIn(relay: ManagedProcess, log: String) async throws -> BenchSocket {
        let deadline = ContinuousClock.now + .seconds(300)
        while true {
            do {
                return try await HomewardSignIn.connect(env, port: port, source: env.source(0),
                                                        .login(username: City.username(0), password: City.password))
            } catch {
                guard relay.pid != nil else {
                    throw BenchError.failed("the relay exited before answering: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
                }
                guard ContinuousClock.now < deadline else { throw BenchError.failed("no sign-in answered within 300 s: \(error)") }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// The results as a markdown table, with the load average at the end of the run.
    static func table(_ results: [Result], users: Int) -> String {
        let rows = results.map { result in
            let perUser = Double(result.residentConnected) / Double(max(1, result.connected)) / 1024
            let added = Double(result.residentConnected - result.residentAtFirstSignIn) / Double(max(1, result.connected)) / 1024
            return "| \(result.mode) | \(CacheBench.ms(result.firstSignIn)) | \(result.residentAtFirstSignIn / 1_048_576) | "
                + "\(result.residentConnected / 1_048_576) | \(result.connected) (\(result.failed) failed) | "
                + String(format: "%.1f | %.1f", perUser, added) + " | \(CacheBench.ms(result.connectTime)) |"
        }
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
        return """

            | cache, \(users) users in the store | first sign-in after launch (ms) | RSS then (MiB) | RSS connected (MiB) | users connected | RSS per connected user (KiB) | added per connected user (KiB) | signing them in (ms) |
            |---|---:|---:|---:|---:|---:|---:|---:|
            \(rows.joined(separator: "\n"))

            load average at the end: \(load)
            """
    }
}
