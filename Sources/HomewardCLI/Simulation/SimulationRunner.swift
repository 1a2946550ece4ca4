import Foundation
import Synchronization
import HomewardClient
import HomewardProtocol
import Logging
import NIOCore
import NIOPosix

/// Plays the simulation: signs everyone up, makes friends and sessions, walks, counts, reports.
///
/// One process holds all W x (K + 1) connections on one event loop group. Walkers send on a
/// fixed schedule (start + n / rate) rather than sleeping between sends, so a slow moment does
/// not stretch the run; each walker's schedule is offset a little so the walkers do not all
/// send in the same millisecond.
final class SimulationRunner: Sendable {
    let plan: SimulationPlan
    let configuration: RelayClientConfiguration
    let console: Console
    let ledger: SimulationLedger
    private let group: MultiThreadedEventLoopGroup
    private let phase = LockedText("starting")
    private let connected = LockedCounter()

    init(plan: SimulationPlan, configuration: RelayClientConfiguration, console: Console) {
        self.plan = plan
        self.configuration = configuration
        self.console = console
        self.ledger = SimulationLedger(walkers: plan.walkers, watchersPerWalker: plan.watchersPerWalker,
                                       positionsPerWalker: plan.positionsPerWalker)
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: min(System.coreCount, 8))
    }

    /// A simulated user: its name and its connection.
    struct Participant: Sendable {
        let name: String
        let client: RelayClient
    }

    /// One participant's connection, logging as every command does (`HOMEWARD_LOG`), not on stderr by default.
    private func client() throws(RelayClientError) -> RelayClient {
        try RelayClient(configuration: configuration, eventLoopGroup: group, logger: CommandContext.clientLogger())
    }

    func run() async throws(CLIError) -> SimulationReport {
        let started = ContinuousClock.now
        let status = Task { await showStatus(started: started) }
        defer { status.cancel() }

        var walkers: [Participant] = []
        var watchers: [Participant] = []
        do {
            for walker in 0..<plan.walkers {
                walkers.append(Participant(name: plan.walkerName(walker), client: try client()))
                for watcher in 0..<plan.watchersPerWalker {
                    watchers.append(Participant(name: plan.watcherName(walker, watcher), client: try client()))
                }
            }
        } catch {
            throw CLIError(error)
        }
        let everyone = walkers + watchers
        // Subscribed before connecting, so that no delivery or reconnect goes uncounted.
        let listeners = watchers.enumerated().map { index, participant in
            Task { await self.listen(asWatcher: index, participant.client.events()) }
        } + walkers.map { participant in Task { await self.listen(asWalker: participant.client.events()) } }

        do {
            try await setUp(walkers: walkers, watchers: watchers, everyone: everyone)
            phase.set("walking")
            let walkStart = ContinuousClock.now
            try await walk(walkers)
            phase.set("draining")
            try await drain(walkers, after: walkStart)
            phase.set("cleaning up")
            await tearDown(walkers)
        } catch {
            for participant in everyone { await participant.client.close() }
            for listener in listeners { listener.cancel() }
            try? await group.shutdownGracefully()
            throw error
        }
        for participant in everyone { await participant.client.close() }
        for listener in listeners { listener.cancel() }
        try? await group.shutdownGracefully()
        status.cancel()
        console.endStatus()

        let totals = ledger.snapshot
        var window = 0.0
        if let first = totals.firstSend, let last = totals.lastDelivery { window = max(0, (last - first).seconds) }
        return SimulationReport(
            walkers: plan.walkers, watchersPerWalker: plan.watchersPerWalker, rate: plan.rate, duration: plan.duration,
            connections: plan.connections, totals: totals, expectedDeliveries: totals.sent * plan.watchersPerWalker,
            lost: ledger.lost, latency: ledger.latencyHistogram, alarmLatency: ledger.alarmLatencyHistogram,
            expectedAlarmDeliveries: totals.alarmsRaised * plan.watchersPerWalker, deliveryWindow: window,
            elapsed: (ContinuousClock.now - started).seconds, prefix: plan.prefix)
    }

    // MARK: Phases

    private func setUp(walkers: [Participant], watchers: [Participant], everyone: [Participant]) async throws(CLIError) {
        // Each connection signs up as soon as it is open, so at most --concurrency of them are ever waiting to sign
        // in: a relay closes connections past its --max-unauthenticated-per-address (64) from one address, and any
        // left unsigned for its --auth-timeout (10 s), which all of them opened first and then registered would meet.
        phase.set("connecting and registering")
        let signedUp = LockedCounter()
        try await forEach(everyone, limit: plan.setupConcurrency) { participant in
            try await participant.client.connect()
            self.connected.add(1)
            _ = try await participant.client.register(username: participant.name, password: self.plan.password)
            self.phase.set("registering \(signedUp.add(1))/\(everyone.count)")
        }
        phase.set("befriending and starting sessions")
        let perWalker = plan.watchersPerWalker
        try await forEach(Array(walkers.enumerated()), limit: plan.setupConcurrency) { index, walker in
            let mine = Array(watchers[(index * perWalker)..<((index + 1) * perWalker)])
            for watcher in mine {
                _ = try await walker.client.requestFriend(watcher.name)
                try await watcher.client.acceptFriend(walker.name)
            }
            let session = try await walker.client.startSession(SessionOptions(invite: mine.map(\.name), note: "homeward sim"))
            for watcher in mine { _ = try await watcher.client.acceptSession(session.id) }
        }
    }

    private func walk(_ walkers: [Participant]) async throws(CLIError) {
        let count = plan.positionsPerWalker
        let period = 1 / plan.rate
        let alarmPlan = plannedAlarms()
        let start = ContinuousClock.now + .milliseconds(100)
        try await forEach(Array(walkers.enumerated()), limit: walkers.count) { index, walker in
            let offset = period * Double(index) / Double(max(walkers.count, 1))
            let origin = Coordinate(lat: 57.70 + Double(index % 100) * 0.001, lon: 11.97 + Double(index / 100) * 0.001)
            var raisedAlarms: [String] = []
            for seq in 0..<count {
                let due = start + .seconds(offset + Double(seq) * period)
                try await ContinuousClock().sleep(until: due, tolerance: .microseconds(500))
                // Walk north at 1.4 m/s; the sequence number rides in `alt`.
                let point = Geodesy.destination(from: origin, bearing: 0, distance: 1.4 * Double(seq) * period)
                let position = Position(lat: point.lat, lon: point.lon, acc: 5, alt: Double(seq), spd: 1.4, hdg: 0,
                                        ts: Int64(Date().timeIntervalSince1970 * 1000))
                self.ledger.recordSend(walker: index, seq: seq, at: .now)
                await walker.client.send(position)
                for alarm in alarmPlan where alarm.walker == index && alarm.afterSeq == seq {
                    let raisedAt = ContinuousClock.now
                    let raised = try await walker.client.raiseAlarm(
                        AlarmRequest(text: "homeward sim alarm \(alarm.number)", lat: point.lat, lon: point.lon, acc: 5))
                    self.ledger.recordAlarmRaised(raised.alarm.id, at: raisedAt)
                    raisedAlarms.append(raised.alarm.id)
                }
            }
            for id in raisedAlarms { try await walker.client.cancelAlarm(id, reason: "simulation over") }
        }
    }

    /// Alarm n is raised by walker n mod W, spread evenly over the run.
    private func plannedAlarms() -> [(number: Int, walker: Int, afterSeq: Int)] {
        guard plan.alarms > 0, plan.walkers > 0 else { return [] }
        let count = plan.positionsPerWalker
        return (0..<plan.alarms).map { number in
            let seq = min(count - 1, (number + 1) * count / (plan.alarms + 1))
            return (number, number % plan.walkers, seq)
        }
    }

    private func drain(_ walkers: [Participant], after walkStart: ContinuousClock.Instant) async throws(CLIError) {
        // Requests on a connection are served in order: a ping answered means every position
        // before it has been fanned out by the relay.
        try await forEach(walkers, limit: walkers.count) { walker in try await walker.client.ping() }
        let deadline = ContinuousClock.now + .seconds(plan.drainTimeout)
        while !ledger.everyWatcherHasTheLastPosition || !alarmsArrived, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    private var alarmsArrived: Bool {
        let totals = ledger.snapshot
        return totals.alarmDeliveries >= totals.alarmsRaised * plan.watchersPerWalker
    }

    private func tearDown(_ walkers: [Participant]) async {
        for walker in walkers {
            if let own = try? await walker.client.sessionList().own { try? await walker.client.endSession(own.id) }
        }
    }

    // MARK: Listening

    private func listen(asWatcher index: Int, _ events: AsyncStream<RelayEvent>) async {
        for await event in events {
            switch event.kind {
            case .event(.position(_, let position)):
                ledger.recordDelivery(watcher: index, seq: position.alt.map { Int($0) } ?? -1, at: event.receivedAt)
            case .event(.alarm(let alarm, _)):
                ledger.recordAlarmDelivery(watcher: index, alarmId: alarm.id, at: event.receivedAt)
            default:
                count(event)
            }
        }
    }

    private func listen(asWalker events: AsyncStream<RelayEvent>) async {
        for await event in events { count(event) }
    }

    private func count(_ event: RelayEvent) {
        switch event.kind {
        case .requestFailed: ledger.recordError()
        case .connection(.disconnected): connected.add(-1)
        case .connection(.reconnected):
            ledger.recordReconnect()
            connected.add(1)
        case .connection(.signedOut):
            ledger.recordError()
            connected.add(1)
        default: break
        }
    }

    private func showStatus(started: ContinuousClock.Instant) async {
        while !Task.isCancelled {
            let totals = ledger.snapshot
            let elapsed = (ContinuousClock.now - started).seconds
            console.status(String(format: "%@  conn %d/%d  sent %d  delivered %d  errors %d  reconnects %d  %.1f s",
                                  phase.get(), connected.value, plan.connections, totals.sent, totals.delivered,
                                  totals.errors, totals.reconnects, elapsed))
            try? await Task.sleep(for: .milliseconds(250))
        }
    }

    // MARK: Helpers

    /// Runs `body` for every item, at most `limit` at once; the first failure cancels the rest.
    private func forEach<Item: Sendable>(_ items: [Item], limit: Int,
                                         _ body: @escaping @Sendable (Item) async throws -> Void) async throws(CLIError) {
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                var iterator = items.makeIterator()
                for _ in 0..<max(1, limit) {
                    guard let item = iterator.next() else { break }
                    group.addTask { try await body(item) }
                }
                while try await group.next() != nil {
                    if let item = iterator.next() { group.addTask { try await body(item) } }
                }
            }
        } catch let error as RelayClientError {
            throw CLIError(error)
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError(code: "sim", message: "\(error)", exitCode: CLIError.Status.local)
        }
    }
}

/// A counter shared between tasks.
final class LockedCounter: Sendable {
    private let count = Mutex(0)

    @discardableResult
    func add(_ delta: Int) -> Int { count.withLock { $0 += delta; return $0 } }
    var value: Int { count.withLock { $0 } }
}

/// A string shared between tasks.
final class LockedText: Sendable {
    private let text: Mutex<String>

    init(_ text: String) { self.text = Mutex(text) }
    func set(_ value: String) { text.withLock { $0 = value } }
    func get() -> String { text.withLock { $0 } }
}
