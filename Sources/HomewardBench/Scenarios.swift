import Foundation
import Histogram
import NIOCore

/// Latency summary in milliseconds.
public struct Latency: Sendable {
    public var p50 = 0.0, p99 = 0.0, p999 = 0.0, max = 0.0
    public var count = 0

    init(_ histogram: Histogram<UInt64>) {
        guard histogram.totalCount > 0 else { return }
        p50 = Double(histogram.valueAtPercentile(50)) / 1000
        p99 = Double(histogram.valueAtPercentile(99)) / 1000
        p999 = Double(histogram.valueAtPercentile(99.9)) / 1000
        max = Double(histogram.max) / 1000
        count = Int(histogram.totalCount)
    }

    var json: [String: Any] { ["p50Ms": p50, "p99Ms": p99, "p999Ms": p999, "maxMs": max, "count": count] }
}

func log(_ text: String) {
    FileHandle.standardError.write(Data("[bench \(String(format: "%7.1f", BenchClock.seconds() - 1))s] \(text)\n".utf8))
}

// MARK: Fan-out

public struct FanoutConfig: Sendable {
    public var walkers = 50
    public var observers = 10
    public var rates: [Double] = [2, 5, 10, 20, 40, 80, 160]
    public var stepSeconds = 3.0
    public init() {}
}

public struct FanoutStep: Sendable {
    public var hz: Double
    public var sent: Int
    public var offeredPerSecond: Double
    public var deliveredPerSecond: Double
    public var lost: Int
    public var latency: Latency
    /// Broker CPU time per delivered position, microseconds, summed over all its processes (a cluster's
    /// relays); nil when a pid is unknown.
    public var brokerCPUMicrosPerDelivery: Double?
    /// The driver's `cpuBreakdown`, microseconds per delivered position per group.
    public var cpuBreakdown: [(name: String, micros: Double)] = []

    var json: [String: Any] {
        ["hz": hz, "brokerCpuMicrosPerDelivery": brokerCPUMicrosPerDelivery ?? NSNull(),
         "cpuBreakdownMicrosPerDelivery": Dictionary(cpuBreakdown.map { ($0.name, $0.micros) }) { a, _ in a }, "sent": sent, "offeredPerSecond": offeredPerSecond.rounded(), "deliveredPerSecond": deliveredPerSecond.rounded(),
         "lost": lost, "latency": latency.json]
    }
}

public struct FanoutResult: Sendable {
    public var broker: String
    public var steps: [FanoutStep]
    /// The step that delivered the most.
    public var best: FanoutStep
    public var half: FanoutStep?
    public var lostTotal: Int { steps.reduce(0) { $0 + $1.lost } }

    var json: [String: Any] {
        ["broker": broker, "steps": steps.map(\.json), "saturationDeliveredPerSecond": best.deliveredPerSecond.rounded(),
         "halfSaturation": half?.json ?? NSNull(), "lostTotal": lostTotal]
    }
}

public enum FanoutScenario {
    public static func run(_ driver: any BrokerDriver, _ config: FanoutConfig) async throws -> FanoutResult {
        let sink = DeliverySink()
        log("\(driver.name): fan-out setup, \(config.walkers) walkers x \(config.observers) observers")
        let rig = try await driver.makeFanout(walkers: config.walkers, observers: config.observers, sink: sink)
        defer { rig.close() }
        try await Task.sleep(for: .milliseconds(500))
        var steps: [FanoutStep] = []
        for hz in config.rates {
            // Marks the start of the measured interval for anything watching the log (a profiler, say).
            log("\(driver.name): \(hz) Hz: step started")
            let step = await runStep(rig, hz: hz, seconds: config.stepSeconds, observers: config.observers, sink: sink,
                                     pids: driver.cpuPIDs, breakdown: driver.cpuBreakdown)
            steps.append(step)
            log("\(driver.name): \(hz) Hz: offered \(Int(step.offeredPerSecond))/s delivered \(Int(step.deliveredPerSecond))/s "
                + "p50 \(step.latency.p50) ms p99 \(step.latency.p99) ms lost \(step.lost), "
                + "broker CPU \(step.brokerCPUMicrosPerDelivery.map { String(format: "%.2f", $0) } ?? "?") us/delivery"
                + step.cpuBreakdown.map { String(format: "; %@ %.2f", $0.name, $0.micros) }.joined())
            let saturated = step.deliveredPerSecond < 0.9 * step.offeredPerSecond || step.latency.p99 > 500
                || Double(step.lost) > 0.05 * Double(step.sent * config.observers)
            if saturated { break }
        }
        let best = steps.max { $0.deliveredPerSecond < $1.deliveredPerSecond }!
        // p99 at half the saturation rate.
        let halfHz = best.deliveredPerSecond / 2 / Double(config.walkers * max(1, config.observers))
        var half: FanoutStep?
        if halfHz > 0.1 {
            let step = await runStep(rig, hz: halfHz, seconds: config.stepSeconds, observers: config.observers, sink: sink,
                                     pids: driver.cpuPIDs)
            log("\(driver.name): half saturation \(String(format: "%.1f", halfHz)) Hz: delivered \(Int(step.deliveredPerSecond))/s "
                + "p99 \(step.latency.p99) ms")
            half = step
        }
        return FanoutResult(broker: driver.name, steps: steps, best: best, half: half)
    }

    static func runStep(_ rig: FanoutRig, hz: Double, seconds: Double, observers: Int, sink: DeliverySink,
                        pids: [Int32], breakdown: [(name: String, pids: [Int32])] = []) async -> FanoutStep {
        sink.reset()
        let cpuBefore = SystemInfo.cpuSeconds(pids)
        let groupsBefore = breakdown.map { SystemInfo.cpuSeconds($0.pids) }
        let intervalNanos = Int64(1e9 / hz)
        let interval = TimeAmount.nanoseconds(intervalNanos)
        var tasks: [RepeatedTask] = []
        let started = BenchClock.seconds()
        for publisher in rig.publishers {
            // The walker's position number, counted on the loop its repeated task runs on.
            let sequenceNumber = NIOLoopBoundBox.makeBoxSendingValue(0, eventLoop: publisher.eventLoop)
            let offset = TimeAmount.nanoseconds(Int64.random(in: 0..<max(1, intervalNanos)))
            tasks.append(publisher.eventLoop.scheduleRepeatedTask(initialDelay: offset, delay: interval) { _ in
                sequenceNumber.value += 1
                publisher.publish(sequence: sequenceNumber.value)
                sink.sent()
            })
        }
        try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
        for task in tasks { task.cancel() }
        let elapsed = BenchClock.seconds() - started
        let atEnd = sink.snapshot()
        let cpuAfter = SystemInfo.cpuSeconds(pids)
        let groupsAfter = breakdown.map { SystemInfo.cpuSeconds($0.pids) }
        // Let what is in flight arrive before counting losses.
        let drainUntil = BenchClock.seconds() + 3
        while BenchClock.seconds() < drainUntil {
            let now = sink.snapshot()
            if now.received >= now.sent * observers { break }
            try? await Task.sleep(for: .milliseconds(50))
        }
        let final = sink.snapshot()
        let deliveries = Double(max(1, atEnd.received))
        let groups = breakdown.indices.compactMap { index -> (name: String, micros: Double)? in
            guard let before = groupsBefore[index], let after = groupsAfter[index] else { return nil }
            return (breakdown[index].name, (after - before) * 1e6 / deliveries)
        }
        var step = FanoutStep(hz: hz, sent: final.sent, offeredPerSecond: Double(atEnd.sent * observers) / elapsed,
                          deliveredPerSecond: Double(atEnd.received) / elapsed,
                          lost: max(0, final.sent * observers - final.received), latency: Latency(final.latency),
                          brokerCPUMicrosPerDelivery: cpuBefore.flatMap { before in
                              cpuAfter.map { ($0 - before) * 1e6 / deliveries }
                          })
        step.cpuBreakdown = groups
        return step
    }
}

// MARK: Idle capacity

public struct IdlePoint: Sendable {
    public var connections: Int
    public var residentBytes: Int
    public var bytesPerConnection: Double
    public var openSeconds: Double
    var json: [String: Any] {
        ["connections": connections, "residentBytes": residentBytes, "bytesPerConnection": bytesPerConnection.rounded(),
         "openSeconds": openSeconds]
    }
}

public struct IdleResult: Sendable {
    public var broker: String
    public var baseline: Int
    public var points: [IdlePoint]
    public var failed: Int
    var json: [String: Any] {
        ["broker": broker, "baselineResidentBytes": baseline, "points": points.map(\.json), "failedConnections": failed]
    }
}

public enum IdleScenario {
    public static func run(_ driver: any BrokerDriver, env: BenchEnvironment, counts: [Int]) async throws -> IdleResult {
        try await driver.prepareConnections()
        guard let pid = driver.pid else { throw BenchError.failed("\(driver.name): no pid to measure") }
        try await Task.sleep(for: .seconds(2))
        let baseline = SystemInfo.residentBytes(pid) ?? 0
        log("\(driver.name): idle baseline RSS \(baseline / 1024) KiB")
        var sockets: [BenchSocket] = []
        var points: [IdlePoint] = []
        var failed = 0
        defer { for socket in sockets { socket.close() } }
        for count in counts.sorted() where count > sockets.count {
            let started = BenchClock.seconds()
            let first = sockets.count
            let opened = try await mapConcurrently(count - first, width: 128) { index -> Result<BenchSocket, any Error> in
                do { return .success(try await driver.openIdle(source: env.source(first + index))) } catch { return .failure(error) }
            }
            sockets += opened.compactMap { try? $0.get() }
            let failures = opened.compactMap { outcome -> (any Error)? in if case .failure(let error) = outcome { error } else { nil } }
            failed += failures.count
            logFailures(driver.name, failures)
            let openSeconds = BenchClock.seconds() - started
            try await Task.sleep(for: .seconds(3))
            let resident = SystemInfo.residentBytes(pid) ?? 0
            let point = IdlePoint(connections: sockets.count, residentBytes: resident,
                                  bytesPerConnection: Double(resident - baseline) / Double(max(1, sockets.count)),
                                  openSeconds: openSeconds)
            log("\(driver.name): \(sockets.count) idle connections (\(failed) failed): RSS \(resident / 1024) KiB, "
                + "\(Int(point.bytesPerConnection)) B/connection")
            points.append(point)
        }
        for socket in sockets { socket.close() }
        sockets = []
        try await Task.sleep(for: .seconds(3))
        return IdleResult(broker: driver.name, baseline: baseline, points: points, failed: failed)
    }
}

// MARK: Connect storm

public struct StormResult: Sendable {
    public var broker: String
    public var connections: Int
    public var failed: Int
    public var perSecond: Double
    public var latency: Latency
    /// Broker CPU time per connection opened, milliseconds (all its processes): on a machine shared with
    /// other work, steadier than connections/s.
    public var brokerCPUMillisPerConnection: Double?
    var json: [String: Any] {
        ["broker": broker, "connections": connections, "failed": failed, "perSecond": perSecond.rounded(), "latency": latency.json,
         "brokerCpuMillisPerConnection": brokerCPUMillisPerConnection ?? NSNull()]
    }
}

public enum StormScenario {
    public static func run(_ driver: any BrokerDriver, env: BenchEnvironment, connections: Int,
                           concurrency: Int) async throws -> StormResult {
        try await driver.prepareConnections()
        let histogram = DeliverySink()
        let cpuBefore = SystemInfo.cpuSeconds(driver.cpuPIDs)
        let started = BenchClock.seconds()
        let outcomes = try await mapConcurrently(connections, width: concurrency) { index -> (any Error)? in
            let begin = BenchClock.micros()
            let socket: BenchSocket
            do { socket = try await driver.openIdle(source: env.source(index)) } catch { return error }
            let took = BenchClock.micros() - begin
            histogram.record(took)
            socket.close()
            return nil
        }
        let elapsed = BenchClock.seconds() - started
        let cpuAfter = SystemInfo.cpuSeconds(driver.cpuPIDs)
        let failures = outcomes.compactMap { $0 }
        logFailures(driver.name, failures)
        let ok = connections - failures.count
        let result = StormResult(broker: driver.name, connections: connections, failed: connections - ok,
                                 perSecond: Double(ok) / elapsed, latency: Latency(histogram.snapshot().latency),
                                 brokerCPUMillisPerConnection: cpuBefore.flatMap { before in
                                     cpuAfter.map { ($0 - before) * 1e3 / Double(max(1, ok)) }
                                 })
        log("\(driver.name): storm \(ok)/\(connections) in \(String(format: "%.2f", elapsed)) s = \(Int(result.perSecond))/s")
        try await Task.sleep(for: .seconds(2))
        return result
    }
}

/// Logs why connections failed to open, the most frequent reasons first, so that a failure count in a
/// report can be traced to timeouts, refusals or resets (and to the relay's log of the same minutes).
func logFailures(_ broker: String, _ failures: [any Error]) {
    guard !failures.isEmpty else { return }
    var counts: [String: Int] = [:]
    for failure in failures { counts[String(describing: failure), default: 0] += 1 }
    let top = counts.sorted { $0.value > $1.value }.prefix(5).map { "\($0.value) × \($0.key)" }
    log("\(broker): \(failures.count) connections failed: " + top.joined(separator: "; "))
}

extension DeliverySink {
    /// Records a raw latency sample (microseconds), for scenarios that time things themselves.
    func record(_ micros: UInt64) {
        recordSample(micros)
    }
}

// MARK: Alarm

public struct AlarmPoint: Sendable {
    public var recipients: Int
    public var raised: Int
    public var incomplete: Int
    public var latency: Latency
    var json: [String: Any] {
        ["recipients": recipients, "raised": raised, "incomplete": incomplete, "latency": latency.json]
    }
}

public struct AlarmResult: Sendable {
    public var broker: String
    public var points: [AlarmPoint]
    var json: [String: Any] { ["broker": broker, "points": points.map(\.json)] }
}

public enum AlarmScenario {
    public static func run(_ driver: any BrokerDriver, recipients: [Int], raises: Int) async throws -> AlarmResult {
        var points: [AlarmPoint] = []
        for count in recipients {
            log("\(driver.name): alarm setup, \(count) recipients")
            let rig = try await driver.makeAlarm(recipients: count)
            try await Task.sleep(for: .milliseconds(300))
            for _ in 0..<2 { _ = try await rig.raise() }  // warm-up
            let samples = DeliverySink()
            var incomplete = 0
            for _ in 0..<raises {
                if let micros = try await rig.raise() { samples.record(micros) } else { incomplete += 1 }
                try await Task.sleep(for: .milliseconds(20))
            }
            await rig.close()
            let point = AlarmPoint(recipients: count, raised: raises, incomplete: incomplete,
                                   latency: Latency(samples.snapshot().latency))
            log("\(driver.name): alarm to \(count): p50 \(point.latency.p50) ms p99 \(point.latency.p99) ms, \(incomplete) incomplete")
            points.append(point)
        }
        return AlarmResult(broker: driver.name, points: points)
    }
}
