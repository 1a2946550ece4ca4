import Foundation

/// A table per scenario: one row per figure, one column per broker, then the ratios
/// homeward/nats and homeward/mosquitto (or homeward-openssl/homeward-nio-ssl) from the same run.
public struct ReportTable: Sendable {
    public struct Row: Sendable {
        var metric: String
        var values: [String: Double]
        var better: String  // "higher" or "lower"
        var decimals: Int
    }

    public var title: String
    public var rows: [Row] = []
    public var brokers: [String]

    public init(title: String, brokers: [String]) {
        self.title = title
        self.brokers = brokers
    }

    public mutating func add(_ metric: String, better: String, decimals: Int = 0, _ values: [String: Double]) {
        rows.append(Row(metric: metric, values: values, better: better, decimals: decimals))
    }

    static func format(_ value: Double?, decimals: Int) -> String {
        guard let value, value.isFinite else { return "–" }
        return String(format: "%.\(decimals)f", value)
    }

    /// The broker the ratio columns divide: `homeward`, or with the two TLS libraries side by side and no
    /// `homeward`, `homeward-openssl`.
    var reference: String? {
        ["homeward", "homeward-openssl"].first { brokers.contains($0) }
    }

    public var markdown: String {
        let peers = brokers.filter { $0 != reference }
        var header = ["metric"] + brokers
        if let reference { header += peers.map { "\(reference)/\($0)" } }
        var lines = ["### \(title)", "", "| " + header.joined(separator: " | ") + " |",
                     "|" + header.map { $0 == "metric" ? "---" : "---:" }.joined(separator: "|") + "|"]
        for row in rows {
            var cells = ["\(row.metric) (\(row.better) is better)"]
            cells += brokers.map { Self.format(row.values[$0], decimals: row.decimals) }
            if let reference {
                for peer in peers {
                    if let mine = row.values[reference], let theirs = row.values[peer], theirs != 0 {
                        cells.append(String(format: "%.2f", mine / theirs))
                    } else {
                        cells.append("–")
                    }
                }
            }
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Everything one run measured.
public struct BenchReport: Sendable {
    public var brokers: [String]
    public var fanout: [FanoutResult] = []
    public var fanoutConfig: FanoutConfig?
    public var idle: [IdleResult] = []
    public var storm: [StormResult] = []
    public var alarm: [AlarmResult] = []
    public var writes: [WritesResult] = []
    public var writesConfig = WritesConfig()
    /// The delay the PostgreSQL proxy added each way during the writes, milliseconds.
    public var writesDelayMs = 0.0
    public var command: String
    public let machine = SystemInfo.machine()
    public let date = ISO8601DateFormatter().string(from: Date())

    public init(brokers: [String], command: String) {
        self.brokers = brokers
        self.command = command
    }

    public var tables: [ReportTable] {
        var tables: [ReportTable] = []
        if !fanout.isEmpty {
            let shape = fanoutConfig.map { "\($0.walkers) walkers x \($0.observers) observers, ramp \($0.rates.map { String(format: "%g", $0) }.joined(separator: "/")) Hz, \(String(format: "%g", $0.stepSeconds)) s steps" } ?? ""
            var table = ReportTable(title: "Fan-out (\(shape))", brokers: brokers)
            func values(_ pick: (FanoutResult) -> Double?) -> [String: Double] {
                var out: [String: Double] = [:]
                for result in fanout { out[result.broker] = pick(result) }
                return out
            }
            table.add("saturation: delivered positions/s", better: "higher", values { $0.best.deliveredPerSecond })
            table.add("saturation: walker rate (Hz)", better: "higher", decimals: 1, values { $0.best.hz })
            table.add("saturation: broker CPU per delivery (µs)", better: "lower", decimals: 2, values { $0.best.brokerCPUMicrosPerDelivery })
            table.add("saturation: p50 latency (ms)", better: "lower", decimals: 2, values { $0.best.latency.p50 })
            table.add("saturation: p99 latency (ms)", better: "lower", decimals: 2, values { $0.best.latency.p99 })
            table.add("saturation: p99.9 latency (ms)", better: "lower", decimals: 2, values { $0.best.latency.p999 })
            table.add("saturation: max latency (ms)", better: "lower", decimals: 2, values { $0.best.latency.max })
            table.add("half saturation: delivered positions/s", better: "higher", values { $0.half?.deliveredPerSecond })
            table.add("half saturation: p50 latency (ms)", better: "lower", decimals: 2, values { $0.half?.latency.p50 })
            table.add("half saturation: p99 latency (ms)", better: "lower", decimals: 2, values { $0.half?.latency.p99 })
            table.add("half saturation: p99.9 latency (ms)", better: "lower", decimals: 2, values { $0.half?.latency.p999 })
            table.add("half saturation: max latency (ms)", better: "lower", decimals: 2, values { $0.half?.latency.max })
            table.add("lost deliveries, whole ramp", better: "lower", values { Double($0.lostTotal) })
            table.add("lost deliveries, half saturation", better: "lower", values { $0.half.map { Double($0.lost) } })
            tables.append(table)
        }
        if !idle.isEmpty {
            var table = ReportTable(title: "Idle capacity: resident memory per authenticated idle TLS connection", brokers: brokers)
            let counts = Array(Set(idle.flatMap { $0.points.map(\.connections) })).sorted()
            table.add("baseline RSS (MiB)", better: "lower", decimals: 1,
                      Dictionary(uniqueKeysWithValues: idle.map { ($0.broker, Double($0.baseline) / 1_048_576) }))
            for count in counts {
                var perConnection: [String: Double] = [:]
                var total: [String: Double] = [:]
                for result in idle {
                    if let point = result.points.first(where: { $0.connections == count }) {
                        perConnection[result.broker] = point.bytesPerConnection / 1024
                        total[result.broker] = Double(point.residentBytes) / 1_048_576
                    }
                }
                table.add("KiB per connection at \(count)", better: "lower", decimals: 1, perConnection)
                table.add("RSS at \(count) (MiB)", better: "lower", decimals: 1, total)
            }
            table.add("connections that failed to open", better: "lower",
                      Dictionary(uniqueKeysWithValues: idle.map { ($0.broker, Double($0.failed)) }))
            tables.append(table)
        }
        if !storm.isEmpty {
            let total = storm.first?.connections ?? 0
            var table = ReportTable(title: "Connect storm: TLS handshake + upgrade + authentication (\(total) connections)",
                                    brokers: brokers)
            func values(_ pick: (StormResult) -> Double) -> [String: Double] {
                Dictionary(uniqueKeysWithValues: storm.map { ($0.broker, pick($0)) })
            }
            table.add("connections/s", better: "higher", values { $0.perSecond })
            table.add("p50 time to authenticated (ms)", better: "lower", decimals: 2, values { $0.latency.p50 })
            table.add("p99 time to authenticated (ms)", better: "lower", decimals: 2, values { $0.latency.p99 })
            table.add("broker CPU per connection (ms)", better: "lower", decimals: 2, values { $0.brokerCPUMillisPerConnection ?? .nan })
            table.add("failed", better: "lower", values { Double($0.failed) })
            tables.append(table)
        }
        if !alarm.isEmpty {
            var table = ReportTable(title: "Alarm: raise until every online recipient has it", brokers: brokers)
            let counts = Array(Set(alarm.flatMap { $0.points.map(\.recipients) })).sorted()
            for count in counts {
                for (label, pick) in [("p50", { (l: Latency) in l.p50 }), ("p99", { (l: Latency) in l.p99 }),
                                      ("max", { (l: Latency) in l.max })] {
                    var values: [String: Double] = [:]
                    for result in alarm {
                        if let point = result.points.first(where: { $0.recipients == count }) { values[result.broker] = pick(point.latency) }
                    }
                    table.add("K=\(count): \(label) (ms)", better: "lower", decimals: 2, values)
                }
                var incomplete: [String: Double] = [:]
                for result in alarm {
                    if let point = result.points.first(where: { $0.recipients == count }) { incomplete[result.broker] = Double(point.incomplete) }
                }
                table.add("K=\(count): alarms not delivered to all", better: "lower", incomplete)
            }
            tables.append(table)
        }
        return tables
    }

    public var rampMarkdown: String {
        guard !fanout.isEmpty else { return "" }
        var lines = ["### Fan-out ramp, every step (the last row per broker is the half-saturation run)", "",
                     "nominal/s is walkers x observers x Hz; offered/s is what the load generator managed to send (x observers). "
                         + "Where offered falls short of nominal, the load generator, not the broker, was the limit.", "",
                     "| broker | walker Hz | nominal/s | offered/s | delivered/s | p50 ms | p99 ms | p99.9 ms | max ms | lost | broker CPU µs/delivery |",
                     "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        let perHz = Double((fanoutConfig?.walkers ?? 0) * (fanoutConfig?.observers ?? 0))
        for result in fanout {
            for step in result.steps + (result.half.map { [$0] } ?? []) {
                lines.append("| \(result.broker) " + String(format: "| %.1f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %d | %.2f |",
                                    step.hz, step.hz * perHz, step.offeredPerSecond, step.deliveredPerSecond, step.latency.p50,
                                    step.latency.p99, step.latency.p999, step.latency.max, step.lost,
                                    step.brokerCPUMicrosPerDelivery ?? Double.nan))
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    public var markdown: String {
        var text = "Run \(date) on \(machine).\n\nCommand: `\(command)`\n\nRatios are homeward divided by the peer, from this same run.\n\n"
        for table in tables { text += table.markdown + "\n" }
        if !writes.isEmpty { text += WritesResult.table(writes, config: writesConfig, delayMs: writesDelayMs) + "\n" }
        text += rampMarkdown
        return text
    }

    public var json: String {
        let object: [String: Any] = [
            "date": date, "machine": machine, "command": command, "brokers": brokers,
            "fanout": fanout.map(\.json), "idle": idle.map(\.json), "storm": storm.map(\.json), "alarm": alarm.map(\.json),
            "writes": writes.map(\.json),
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
