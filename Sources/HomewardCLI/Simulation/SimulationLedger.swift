import Foundation
import Histogram
import Synchronization

/// The simulator's book of what was sent and what arrived, shared by every walker and watcher.
///
/// Each position carries its walker's sequence number in `alt` (the relay passes `alt` through
/// untouched and accepts any finite number), so every delivery can be matched to its send. Send
/// times are kept here, in the same process, on the monotonic clock: latency is exact to the
/// microsecond and immune to wall-clock steps, unlike the millisecond `ts` also sent.
final class SimulationLedger: Sendable {
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

    /// Everything recorded, behind one lock: walkers and watchers record from their own tasks.
    private let book: Mutex<Book>

    private struct Book {
        var totals = Totals()
        /// [walker][seq]: when it was handed to the socket.
        var sendTimes: [[ContinuousClock.Instant?]]
        /// [watcher][seq]: how many times it arrived (saturating).
        var arrivals: [[UInt8]]
        var highestSeen: [Int]
        var lastReceived: [Bool]
        var alarmsSeen: Set<String> = []
        var alarmRaisedAt: [String: ContinuousClock.Instant] = [:]
        var latency = Histogram<UInt64>(highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: .three)
        var alarmLatency = Histogram<UInt64>(highestTrackableValue: 120_000_000, numberOfSignificantValueDigits: .three)
    }

    init(walkers: Int, watchersPerWalker: Int, positionsPerWalker: Int) {
        self.walkers = walkers
        self.watchersPerWalker = watchersPerWalker
        self.positionsPerWalker = positionsPerWalker
        let watchers = walkers * watchersPerWalker
        var book = Book(sendTimes: Array(repeating: Array(repeating: nil, count: positionsPerWalker), count: walkers),
                        arrivals: Array(repeating: Array(repeating: 0, count: positionsPerWalker), count: watchers),
                        highestSeen: Array(repeating: -1, count: watchers),
                        lastReceived: Array(repeating: positionsPerWalker == 0, count: watchers))
        book.latency.autoResize = true
        book.alarmLatency.autoResize = true
        self.book = Mutex(book)
    }

    /// Watchers are numbered walker by walker: walker w has watchers w*K ..< (w+1)*K.
    func walker(ofWatcher watcher: Int) -> Int { watcher / watchersPerWalker }

    func recordSend(walker: Int, seq: Int, at instant: ContinuousClock.Instant) {
        book.withLock { book in
            book.sendTimes[walker][seq] = instant
            book.totals.sent += 1
            if book.totals.firstSend == nil { book.totals.firstSend = instant }
        }
    }

    /// Books one `pos` that watcher `watcher` received with sequence number `seq`.
    func recordDelivery(watcher: Int, seq: Int, at instant: ContinuousClock.Instant) {
        let walker = walker(ofWatcher: watcher)
        let positionsPerWalker = positionsPerWalker
        book.withLock { book in
            book.totals.delivered += 1
            book.totals.lastDelivery = instant
            guard seq >= 0, seq < positionsPerWalker else {
                book.totals.errors += 1  // not a sequence number this run sent
                return
            }
            let count = book.arrivals[watcher][seq]
            if count > 0 { book.totals.duplicates += 1 }
            book.arrivals[watcher][seq] = count == .max ? count : count + 1
            if seq < book.highestSeen[watcher] { book.totals.outOfOrder += 1 }
            book.highestSeen[watcher] = max(book.highestSeen[watcher], seq)
            if seq == positionsPerWalker - 1 { book.lastReceived[watcher] = true }
            if count == 0, let sent = book.sendTimes[walker][seq] {
                _ = book.latency.record(Self.microseconds(instant - sent))
            }
        }
    }

    func recordAlarmRaised(_ alarmId: String, at instant: ContinuousClock.Instant) {
        book.withLock { book in
            book.totals.alarmsRaised += 1
            book.alarmRaisedAt[alarmId] = instant
        }
    }

    /// Books an `alarm` event; the relay repeats unacknowledged alarms and re-sends them after
    /// a reconnect, so only the first arrival per watcher counts.
    func recordAlarmDelivery(watcher: Int, alarmId: String, at instant: ContinuousClock.Instant) {
        book.withLock { book in
            guard book.alarmsSeen.insert("\(watcher)/\(alarmId)").inserted else { return }
            book.totals.alarmDeliveries += 1
            if let raised = book.alarmRaisedAt[alarmId] { _ = book.alarmLatency.record(Self.microseconds(instant - raised)) }
        }
    }

    func recordError() { book.withLock { $0.totals.errors += 1 } }
    func recordReconnect() { book.withLock { $0.totals.reconnects += 1 } }

    var snapshot: Totals { book.withLock { $0.totals } }

    /// Whether every watcher has the last position of its walker: the run's end has arrived.
    var everyWatcherHasTheLastPosition: Bool { book.withLock { $0.lastReceived.allSatisfy { $0 } } }

    /// Positions that were sent but that a watcher never received, over all watchers.
    var lost: Int {
        book.withLock { book in
            var missing = 0
            for (watcher, counts) in book.arrivals.enumerated() {
                let sent = book.sendTimes[walker(ofWatcher: watcher)]
                for seq in counts.indices where counts[seq] == 0 && sent[seq] != nil { missing += 1 }
            }
            return missing
        }
    }

    var latencyHistogram: Histogram<UInt64> { book.withLock { $0.latency } }
    var alarmLatencyHistogram: Histogram<UInt64> { book.withLock { $0.alarmLatency } }

    private static func microseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        let micros = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        return UInt64(max(0, micros))
    }
}
