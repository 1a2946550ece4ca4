import Foundation
import Histogram

/// The simulator's book of what was sent and what arrived, shared by every walker and watcher.
///
/// Each position carries its walker's sequence number in `alt` (the relay passes `alt` through
/// untouched and accepts any finite number), so every delivery can be matched to its send. Send
/// times are kept here, in the same process, on the monotonic clock: latency is exact to the
/// microsecond and immune to wall-clock steps, unlike the millisecond `ts` also sent.
final class SimulationLedger: @unchecked Sendable {
    struct Totals: Sendable {
        var sent = 0
        var delivered = 0
        var duplicates = 0
        var outOfOrder = 0
        var errors = 0
        var reconnects = 0
        var alarmsRaised = 0
        var alarmDeliveries = 0
        var firstSend: ContinuousClock.Instant?
        var lastDelivery: ContinuousClock.Instant?
    }

    let walkers: Int
    let watchersPerWalker: Int
    let positionsPerWalker: Int

    private let lock = NSLock()
    private var totals = Totals()
    /// [walker][seq]: when it was handed to the socket.
    private var sendTimes: [[ContinuousClock.Instant?]]
    /// [watcher][seq]: how many times it arrived (saturating).
    private var arrivals: [[UInt8]]
    private var highestSeen: [Int]
    private var lastReceived: [Bool]
    private var alarmsSeen: Set<String> = []
    private var alarmRaisedAt: [String: ContinuousClock.Instant] = [:]
    private var latency = Histogram<UInt64>(highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: .three)
    private var alarmLatency = Histogram<UInt64>(highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: .three)

    init(walkers: Int, watchersPerWalker: Int, positionsPerWalker: Int) {
        self.walkers = walkers
        self.watchersPerWalker = watchersPerWalker
        self.positionsPerWalker = positionsPerWalker
        sendTimes = Array(repeating: Array(repeating: nil, count: positionsPerWalker), count: walkers)
        let watchers = walkers * watchersPerWalker
        arrivals = Array(repeating: Array(repeating: 0, count: positionsPerWalker), count: watchers)
        highestSeen = Array(repeating: -1, count: watchers)
        lastReceived = Array(repeating: positionsPerWalker == 0, count: watchers)
        latency.autoResize = true
        alarmLatency.autoResize = true
    }

    /// Watchers are numbered walker by walker: walker w has watchers w*K ..< (w+1)*K.
    func walker(ofWatcher watcher: Int) -> Int { watcher / watchersPerWalker }

    func recordSend(walker: Int, seq: Int, at instant: ContinuousClock.Instant) {
        lock.withLock {
            sendTimes[walker][seq] = instant
            totals.sent += 1
            if totals.firstSend == nil { totals.firstSend = instant }
        }
    }

    /// Books one `pos` that watcher `watcher` received with sequence number `seq`.
    func recordDelivery(watcher: Int, seq: Int, at instant: ContinuousClock.Instant) {
        let walker = walker(ofWatcher: watcher)
        lock.withLock {
            totals.delivered += 1
            totals.lastDelivery = instant
            guard seq >= 0, seq < positionsPerWalker else {
                totals.errors += 1  // not a sequence number this run sent
                return
            }
            let count = arrivals[watcher][seq]
            if count > 0 { totals.duplicates += 1 }
            arrivals[watcher][seq] = count == .max ? count : count + 1
            if seq < highestSeen[watcher] { totals.outOfOrder += 1 }
            highestSeen[watcher] = max(highestSeen[watcher], seq)
            if seq == positionsPerWalker - 1 { lastReceived[watcher] = true }
            if count == 0, let sent = sendTimes[walker][seq] {
                _ = latency.record(Self.microseconds(instant - sent))
            }
        }
    }

    func recordAlarmRaised(_ alarmId: String, at instant: ContinuousClock.Instant) {
        lock.withLock {
            totals.alarmsRaised += 1
            alarmRaisedAt[alarmId] = instant
        }
    }

    /// Books an `alarm` event; the relay repeats unacknowledged alarms and re-sends them after
    /// a reconnect, so only the first arrival per watcher counts.
    func recordAlarmDelivery(watcher: Int, alarmId: String, at instant: ContinuousClock.Instant) {
        lock.withLock {
            guard alarmsSeen.insert("\(watcher)/\(alarmId)").inserted else { return }
            totals.alarmDeliveries += 1
            if let raised = alarmRaisedAt[alarmId] { _ = alarmLatency.record(Self.microseconds(instant - raised)) }
        }
    }

    func recordError() { lock.withLock { totals.errors += 1 } }
    func recordReconnect() { lock.withLock { totals.reconnects += 1 } }

    var snapshot: Totals { lock.withLock { totals } }

    /// Whether every watcher has the last position of its walker: the run's end has arrived.
    var everyWatcherHasTheLastPosition: Bool { lock.withLock { lastReceived.allSatisfy { $0 } } }

    /// Positions that were sent but that a watcher never received, over all watchers.
    var lost: Int {
        lock.withLock {
            var missing = 0
            for (watcher, counts) in arrivals.enumerated() {
                let sent = sendTimes[walker(ofWatcher: watcher)]
                for seq in counts.indices where counts[seq] == 0 && sent[seq] != nil { missing += 1 }
            }
            return missing
        }
    }

    var latencyHistogram: Histogram<UInt64> { lock.withLock { latency } }
    var alarmLatencyHistogram: Histogram<UInt64> { lock.withLock { alarmLatency } }

    private static func microseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        let micros = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        return UInt64(max(0, micros))
    }
}
