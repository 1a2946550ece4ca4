import Foundation
import HomewardProtocol
import NIOCore
import Synchronization

// MARK: Writes: disjoint pairs of friends, each user writing as fast as the relay acknowledges

public struct WritesConfig: Sendable {
    /// Pairs of friends; no pair shares anything with another.
    public var pairs = 24
    /// Seconds of writing.
    public var seconds = 15.0
    /// Seconds of `friend.list` reads afterwards (0: none).
    public var readSeconds = 5.0
    /// How long a request may take before it counts as unanswered.
    public var requestTimeout = 30.0
    public init() {}
}

public struct WritesResult: Sendable {
    public var broker: String
    public var clients: Int
    public var seconds: Double
    /// `ok` replies to writes within the measured time.
    public var acknowledged: Int
    public var latency: Latency
    /// Error replies (and unanswered requests, as "timeout"), by code.
    public var errors: [String: Int]
    /// Acknowledged writes of the slowest client, and of the median one.
    public var perClientMinimum: Int
    public var perClientMedian: Int
    /// Clients that got no write acknowledged at all.
    public var starved: Int
    public var reads: Int
    public var readSeconds: Double
    public var readLatency: Latency
    public var readErrors: [String: Int]
    /// Statements that reached PostgreSQL through the delay proxy while the reads ran (nil without PostgreSQL).
    public var statementsDuringReads: Int?
    public var statementsDuringWrites: Int?
    /// CPU time per acknowledged write while the writes ran, microseconds, for each process that took part
    /// (`WritesScenario.processes`): where a write's cost goes when the cores, not the store, limit the rate.
    public var cpuPerWrite: [(name: String, micros: Double)] = []
    /// Messages nats-server sent each relay (change notices, presence) while the writes ran, per acknowledged write, and
    /// those each relay published (`BusTraffic`); empty without a bus.
    public var busPerWrite: [(name: String, received: Double, published: Double)] = []

    public var writesPerSecond: Double { Double(acknowledged) / max(seconds, 0.001) }
    public var readsPerSecond: Double { Double(reads) / max(readSeconds, 0.001) }

    var json: [String: Any] {
        ["broker": broker, "clients": clients, "seconds": seconds, "acknowledged": acknowledged,
         "writesPerSecond": writesPerSecond.rounded(), "latency": latency.json, "errors": errors,
         "perClientMinimum": perClientMinimum, "perClientMedian": perClientMedian, "starvedClients": starved,
         "reads": reads, "readsPerSecond": readsPerSecond.rounded(), "readLatency": readLatency.json, "readErrors": readErrors,
         "postgresStatementsDuringReads": statementsDuringReads ?? NSNull(),
         "postgresStatementsDuringWrites": statementsDuringWrites ?? NSNull(),
         "cpuMicrosPerWrite": Dictionary(cpuPerWrite.map { ($0.name, $0.micros) }) { a, _ in a },
         "busMessagesPerWrite": Dictionary(busPerWrite.map { ($0.name, ["received": $0.received, "published": $0.published]) }) { a, _ in a }]
    }
}

/// What one client got, counted on its own task.
struct ClientTally: Sendable {
    var acknowledged = 0
    var errors: [String: Int] = [:]
    var samples: [UInt64] = []
}

public enum WritesScenario {
    /// A user of a pair: its link, its partner, and the session it has going (if any).
    final class Writer: Sendable {
        let link: HomewardLink
        let partner: String
        /// Where the writer is in its cycle. Only the writer's own task touches it, one request at a time, so
        /// the lock is never contended; it makes that checked rather than assumed.
        private let cycle = Mutex(Cycle())

        private struct Cycle {
            var session: String?
            var step = 0
        }

        init(link: HomewardLink, partner: String) {
            self.link = link
            self.partner = partner
        }

        /// The next write of the cycle start → end → pause → resume (a session left over from a failed end is
        /// ended first; after a failed start there is nothing to end).
        func next() -> Request {
            cycle.withLock { cycle in
                switch cycle.step {
                case 0 where cycle.session != nil, 1 where cycle.session != nil:
                    cycle.step = 2
                    return .sessionEnd(sessionId: cycle.session!)
                case 0:
                    cycle.step = 1
                    return .sessionStart(SessionOptions(invite: [partner]))
                case 1, 2:
                    cycle.step = 3
                    return .locationPause(from: partner, until: nil)
                default:
                    cycle.step = 0
                    return .locationResume(from: partner)
                }
            }
        }

        func took(_ request: Request, reply: JSONValue) {
            guard reply["type"] == "ok" else { return }
            cycle.withLock { cycle in
                switch request {
                case .sessionStart: cycle.session = reply["session"]?["sessionId"]?.stringValue
                case .sessionEnd: cycle.session = nil
                default: break
                }
            }
        }
    }

    /// `pairs` pairs of friends, connected round robin to `driver`'s relays (partners on different relays
    /// when there are several), write for `seconds`, then every one reads `friend.list` for `readSeconds`.
    public static func run(_ driver: HomewardDriver, _ config: WritesConfig, proxy: DelayProxy?) async throws -> WritesResult {
        log("\(driver.name): writes setup, \(config.pairs) pairs")
        let users = try await mapConcurrently(config.pairs * 2, width: 16) { index in
            let user = try await driver.registered(source: index, node: index % driver.nodeCount)
            return (link: user.link, username: user.username)
        }
        try await forEachConcurrently(config.pairs, width: 8) { pair in
            try await driver.befriend(users[2 * pair], users[2 * pair + 1])
        }
        let writers = users.indices.map { index in
            Writer(link: users[index].link, partner: users[index ^ 1].username)
        }
        defer { for user in users { user.link.socket.close() } }
        try await Task.sleep(for: .milliseconds(500))

        let statementsBefore = proxy?.statements
        let processes = Self.processes(of: driver)
        let cpuBefore = processes.map { CPUSample(pids: $0.pids()) }
        let busBefore = driver.nodes.count > 1 ? BusTraffic.sample() : [:]
        let (tallies, writeSeconds) = await measure(writers.count, seconds: config.seconds, timeout: config.requestTimeout) { index in
            let writer = writers[index]
            let request = writer.next()
            return (request, { reply in writer.took(request, reply: reply) })
        } link: { writers[$0].link }
        let statementsAfterWrites = proxy?.statements
        let cpuAfter = processes.map { CPUSample(pids: $0.pids()) }
        let busAfter = driver.nodes.count > 1 ? BusTraffic.sample() : [:]
        // What is in flight when the time is up is not counted, but must be answered before reads start.
        try await Task.sleep(for: .milliseconds(200))

        var result = summarise(driver.name, tallies, seconds: writeSeconds)
        result.statementsDuringWrites = difference(statementsBefore, statementsAfterWrites)
        result.cpuPerWrite = processes.indices.map { index in
            (processes[index].name, cpuAfter[index].seconds(since: cpuBefore[index]) * 1e6 / Double(max(1, result.acknowledged)))
        }
        result.busPerWrite = busAfter.keys.sorted().map { name in
            let after = busAfter[name]!, before = busBefore[name] ?? (0, 0)
            let writes = Double(max(1, result.acknowledged))
            return (name, Double(after.received - before.received) / writes, Double(after.published - before.published) / writes)
        }
        if !result.busPerWrite.isEmpty {
            log("\(driver.name): bus messages per acknowledged write, received / published: "
                + result.busPerWrite.map { String(format: "%@ %.2f / %.2f", $0.name, $0.received, $0.published) }.joined(separator: "; "))
        }
        log("\(driver.name): CPU per acknowledged write (us): "
            + result.cpuPerWrite.map { String(format: "%@ %.1f", $0.name, $0.micros) }.joined(separator: "; "))
        log("\(driver.name): \(result.acknowledged) writes acknowledged in \(String(format: "%.1f", writeSeconds)) s = "
            + "\(Int(result.writesPerSecond))/s, p50 \(result.latency.p50) ms p99 \(result.latency.p99) ms, errors \(result.errors), "
            + "per client min \(result.perClientMinimum) median \(result.perClientMedian)")

        if config.readSeconds > 0 {
            let readsBefore = proxy?.statements
            let (reads, readSeconds) = await measure(writers.count, seconds: config.readSeconds, timeout: config.requestTimeout) { _ in
                (Request.friendList, { _ in })
            } link: { writers[$0].link }
            let readsAfter = proxy?.statements
            let summary = summarise(driver.name, reads, seconds: readSeconds)
            result.reads = summary.acknowledged
            result.readSeconds = readSeconds
            result.readLatency = summary.latency
            result.readErrors = summary.errors
            result.statementsDuringReads = difference(readsBefore, readsAfter)
            log("\(driver.name): \(result.reads) friend.list in \(String(format: "%.1f", readSeconds)) s = \(Int(result.readsPerSecond))/s, "
                + "p99 \(summary.latency.p99) ms, PostgreSQL statements meanwhile \(result.statementsDuringReads.map(String.init) ?? "n/a")")
        }
        return result
    }

    /// The processes whose CPU a write costs: each relay, the cluster's nats-server and PostgreSQL (with its
    /// backends, found anew at each sample), and this tool (the load generator, and the PostgreSQL proxy).
    static func processes(of driver: HomewardDriver) -> [(name: String, pids: @Sendable () -> [Int32])] {
        let relays = driver.nodes.enumerated().map { index, node in
            let pid = node.process.pid
            return (name: driver.nodes.count == 1 ? "relay" : "relay n\(index + 1)", pids: { @Sendable () -> [Int32] in pid.map { [$0] } ?? [] })
        }
        let helpers = driver.helpers.map { helper in
            (name: helper.name, pids: { @Sendable () -> [Int32] in SystemInfo.withChildren(helper.pid) })
        }
        let me = getpid()
        return relays + helpers + [(name: "load generator and proxy", pids: { @Sendable () -> [Int32] in [me] })]
    }

    /// CPU seconds used so far by each of a group's processes.
    struct CPUSample {
        var byPID: [Int32: Double] = [:]

        init(pids: [Int32]) {
            for pid in pids { byPID[pid] = SystemInfo.cpuSeconds(pid) }
        }

        /// What the group used since `earlier`: a process that appeared since counts from nothing, one that ended
        /// since is left out (its last figures are gone with it).
        func seconds(since earlier: CPUSample) -> Double {
            byPID.reduce(0) { total, entry in total + max(0, entry.value - (earlier.byPID[entry.key] ?? 0)) }
        }
    }

    static func difference(_ before: Int?, _ after: Int?) -> Int? {
        guard let before, let after else { return nil }
        return after - before
    }

    /// Every client sends what `next` gives it, one request in flight, until `seconds` pass; returns each
    /// client's tally and the measured time. Replies after the end are not counted.
    static func measure(_ clients: Int, seconds: Double, timeout: Double,
                        next: @escaping @Sendable (Int) -> (Request, @Sendable (JSONValue) -> Void),
                        link: @escaping @Sendable (Int) -> HomewardLink) async -> ([ClientTally], Double) {
        let started = BenchClock.seconds()
        let end = started + seconds
        let tallies = await withTaskGroup(of: ClientTally.self) { group in
            for index in 0..<clients {
                group.addTask {
                    var tally = ClientTally()
                    while BenchClock.seconds() < end {
                        let (request, took) = next(index)
                        let begin = BenchClock.micros()
                        let reply = await link(index).exchange(request, timeout: timeout)
                        guard BenchClock.seconds() <= end else { break }
                        took(reply)
                        tally.samples.append(BenchClock.micros() - begin)
                        if reply["type"] == "ok" {
                            tally.acknowledged += 1
                        } else {
                            tally.errors[reply["code"]?.stringValue ?? "?", default: 0] += 1
                        }
                    }
                    return tally
                }
            }
            var all: [ClientTally] = []
            for await tally in group { all.append(tally) }
            return all
        }
        return (tallies, min(seconds, BenchClock.seconds() - started))
    }

    static func summarise(_ broker: String, _ tallies: [ClientTally], seconds: Double) -> WritesResult {
        let samples = DeliverySink()
        var errors: [String: Int] = [:]
        for tally in tallies {
            for sample in tally.samples { samples.record(sample) }
            errors.merge(tally.errors, uniquingKeysWith: +)
        }
        let counts = tallies.map(\.acknowledged).sorted()
        return WritesResult(broker: broker, clients: tallies.count, seconds: seconds, acknowledged: counts.reduce(0, +),
                            latency: Latency(samples.snapshot().latency), errors: errors, perClientMinimum: counts.first ?? 0,
                            perClientMedian: counts.isEmpty ? 0 : counts[counts.count / 2], starved: counts.filter { $0 == 0 }.count,
                            reads: 0, readSeconds: 0, readLatency: Latency(samples.snapshot().latency), readErrors: [:])
    }
}

extension WritesResult {
    static func table(_ results: [WritesResult], config: WritesConfig, delayMs: Double) -> String {
        var lines = [
            "### Writes: \(config.pairs) disjoint pairs of friends, one request in flight per connection "
                + "(session.start/end, location.pause/resume), \(String(format: "%g", config.seconds)) s; "
                + "then friend.list for \(String(format: "%g", config.readSeconds)) s; PostgreSQL behind a proxy adding "
                + "\(String(format: "%g", delayMs)) ms each way",
            "",
            "| configuration | acknowledged writes/s | p50 ms | p99 ms | errors | per client: min / median writes | clients with none | friend.list reads/s | read p99 ms | PostgreSQL statements per write | per read |",
            "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
        ]
        for result in results {
            let errors = (result.errors.merging(result.readErrors, uniquingKeysWith: +)).sorted { $0.key < $1.key }
                .map { "\($0.value) `\($0.key)`" }.joined(separator: ", ")
            func per(_ statements: Int?, _ count: Int) -> String {
                guard let statements else { return "–" }
                return String(format: "%.2f", Double(statements) / Double(max(1, count)))
            }
            lines.append("| \(WritesResult.label(result.broker)) | \(Int(result.writesPerSecond.rounded())) | "
                + String(format: "%.1f | %.1f", result.latency.p50, result.latency.p99)
                + " | \(errors.isEmpty ? "none" : errors) | \(result.perClientMinimum) / \(result.perClientMedian) | \(result.starved) | "
                + "\(Int(result.readsPerSecond.rounded())) | " + String(format: "%.1f", result.readLatency.p99)
                + " | \(per(result.statementsDuringWrites, result.acknowledged)) | \(per(result.statementsDuringReads, result.reads)) |")
        }
        let withCPU = results.filter { !$0.cpuPerWrite.isEmpty }
        if !withCPU.isEmpty {
            lines += ["", "CPU time per acknowledged write while the writes ran (µs), per process:", "",
                      "| configuration | process | µs per write |", "|---|---|---:|"]
            for result in withCPU {
                for process in result.cpuPerWrite {
                    lines.append("| \(WritesResult.label(result.broker)) | \(process.name) | " + String(format: "%.1f", process.micros) + " |")
                }
                let total = result.cpuPerWrite.reduce(0) { $0 + $1.micros }
                lines.append("| \(WritesResult.label(result.broker)) | **all** | " + String(format: "%.1f", total) + " |")
            }
        }
        let withBus = results.filter { !$0.busPerWrite.isEmpty }
        if !withBus.isEmpty {
            lines += ["", "Bus messages per acknowledged write while the writes ran, per relay (nats-server's `/connz`):", "",
                      "| configuration | relay | received | published |", "|---|---|---:|---:|"]
            for result in withBus {
                for relay in result.busPerWrite {
                    lines.append("| \(WritesResult.label(result.broker)) | \(relay.name) | " + String(format: "%.2f | %.2f", relay.received, relay.published) + " |")
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func label(_ broker: String) -> String {
        switch broker {
        case "homeward": return "one relay, SQLite"
        case "homeward-pg": return "one relay, PostgreSQL"
        case "homeward-cluster": return "three relays, PostgreSQL + NATS"
        default: return broker
        }
    }
}

/// What nats-server (the cluster's bus, `bench/peers.sh`) counts per relay connection: the messages it sent the relay and
/// those the relay published, read from its monitoring endpoint (`/connz`) with curl. Empty when it cannot be read.
enum BusTraffic {
    static let connz = "http://127.0.0.1:\(ProcessInfo.processInfo.environment["BUS_MONITOR_PORT"] ?? "18222")/connz?limit=1024"

    /// Per relay ("n1", "n2"…, from its client name `homeward-relay NODE`): messages received and published so far.
    static func sample() -> [String: (received: Int, published: Int)] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["-s", "--max-time", "2", connz]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return [:] }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let connections = json["connections"] as? [[String: Any]] else { return [:] }
        var traffic: [String: (received: Int, published: Int)] = [:]
        for connection in connections {
            guard let name = connection["name"] as? String, name.hasPrefix("homeward-relay ") else { continue }
            let node = String(name.dropFirst("homeward-relay ".count))
            traffic[node] = ((connection["out_msgs"] as? Int) ?? 0, (connection["in_msgs"] as? Int) ?? 0)
        }
        return traffic
    }
}
