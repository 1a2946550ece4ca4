import CoreMetrics
import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import HomewardTestSupport
import Logging
import Synchronization
import XCTest

/// Refused writes (another relay wrote first) are an operator's business: counted in `/metrics` and told in a
/// warning at most once per `WriteContention.reportInterval`, summing up the interval.
final class WriteContentionTests: XCTestCase {
    /// What `WriteContention` asked to run later, run by hand.
    final class ScheduledWork: Sendable {
        private let works = Mutex<[@Sendable () -> Void]>([])
        var count: Int { works.withLock { $0.count } }
        func add(_ work: @escaping @Sendable () -> Void) { works.withLock { $0.append(work) } }
        func runAll() {
            for work in works.withLock({ $0 }) { work() }
        }
    }

    private func contention(clock: ManualClock, metrics: RecordingMetrics, log: LogRecorder,
                            scheduled: ScheduledWork) -> WriteContention {
        WriteContention(metrics: metrics, logger: log.logger, clock: clock.function) { _, work in scheduled.add(work) }
    }

    private static func refused(_ count: Int, retries: Int, gaveUp: Bool = false, ms: Int = 5) -> WriteContention.Attempt {
        WriteContention.Attempt(refusals: count, retries: retries, gaveUp: gaveUp, deciding: .milliseconds(ms))
    }

    func testTheFirstRefusalWarnsAtOnceAndTheRestOfTheIntervalInOneLineWhenItEnds() throws {
        let clock = ManualClock()
        let metrics = RecordingMetrics()
        let log = LogRecorder()
        let scheduled = ScheduledWork()
        let contention = contention(clock: clock, metrics: metrics, log: log, scheduled: scheduled)

        contention.record(Self.refused(1, retries: 1))
        XCTAssertEqual(log.lines(at: .warning).count, 1, "the first refusal after a quiet time is told at once")
        XCTAssertTrue(log.lines(at: .warning)[0].contains("refused=1"), log.lines(at: .warning)[0])

        for _ in 0..<40 {
            clock.advance(by: 100)
            contention.record(Self.refused(2, retries: 2, ms: 30))
        }
        contention.record(Self.refused(3, retries: 2, gaveUp: true, ms: 5000))
        XCTAssertEqual(log.lines(at: .warning).count, 1, "no more than one line per interval")
        XCTAssertEqual(scheduled.count, 1, "one summary is due at the interval's end")

        clock.advance(by: WriteContention.reportInterval)
        scheduled.runAll()
        XCTAssertEqual(log.lines(at: .warning).count, 2)
        let summary = log.lines(at: .warning)[1]
        for expected in ["refused=83", "requests=41", "retries=82", "given-up=1", "slowest-ms=5000"] {
            XCTAssertTrue(summary.contains(expected), "\(expected) in: \(summary)")
        }

        XCTAssertEqual(metrics.counter("homeward_write_conflicts_total"), 84)
        XCTAssertEqual(metrics.counter("homeward_write_retries_total"), 83)
        XCTAssertEqual(metrics.counter("homeward_write_conflicts_unresolved_total"), 1)
        XCTAssertEqual(metrics.timerCount("homeward_write_redecide_seconds"), 42)
    }

    func testNoRefusalNoWarningAndNoMetric() {
        let clock = ManualClock()
        let metrics = RecordingMetrics()
        let log = LogRecorder()
        let scheduled = ScheduledWork()
        let contention = contention(clock: clock, metrics: metrics, log: log, scheduled: scheduled)
        contention.record(Self.refused(0, retries: 0))
        XCTAssertEqual(log.lines(at: .warning), [])
        XCTAssertEqual(metrics.counter("homeward_write_conflicts_total"), 0)
    }

    /// On a relay: a write refused once (another relay accepted the same session in between) is counted and warned of.
    func testARefusedAcceptOnARelayIsCountedAndWarned() async throws {
        let metrics = RecordingMetrics()
        let log = LogRecorder()
        let (harness, store) = try await threeFriendsOnACheckingStore(bus: RecordingBus(), logger: log.logger, metrics: metrics)
        let (alice, aliceAuth) = try await harness.connect("alice")
        let (bob, bobAuth) = try await harness.connect("bob")
        let started = try await harness.ok(.sessionStart(SessionOptions(invite: ["bob", "carol"])), as: aliceAuth, sink: alice)
        let id = try XCTUnwrap(started.field("session")?["sessionId"]?.stringValue)
        XCTAssertEqual(metrics.counter("homeward_write_conflicts_total"), 0)

        store.interleave([{ stored in
            guard var session = stored.sessions.first(where: { $0.id == id }) else { return [] }
            session.set(.accepted, for: "carol")
            return [.saveSession(session)]
        }])
        _ = try await harness.serve(.sessionAccept(sessionId: id), as: bobAuth, sink: bob).get()
        XCTAssertEqual(store.refused, 1)
        XCTAssertEqual(metrics.counter("homeward_write_conflicts_total"), 1)
        XCTAssertEqual(metrics.counter("homeward_write_retries_total"), 1)
        XCTAssertEqual(metrics.counter("homeward_write_conflicts_unresolved_total"), 0)
        XCTAssertEqual(metrics.timerCount("homeward_write_redecide_seconds"), 1)
        XCTAssertEqual(log.lines(at: .warning).count, 1, "\(log.lines(at: .warning))")
        XCTAssertTrue(log.lines(at: .warning).first?.contains("another relay wrote first") == true, "\(log.lines(at: .warning))")
    }
}

/// Counters and timers by label, for tests that check what `/metrics` would show.
final class RecordingMetrics: MetricsFactory, Sendable {
    private let counters = Mutex<[String: Int64]>([:])
    private let timers = Mutex<[String: Int]>([:])
    private let recorded = Mutex<[String: Double]>([:])

    func counter(_ label: String) -> Int64 { counters.withLock { $0[label] ?? 0 } }
    /// The last value a gauge (a recorder) took, if any.
    func gauge(_ label: String) -> Double? { recorded.withLock { $0[label] } }
    func timerCount(_ label: String) -> Int { timers.withLock { $0[label] ?? 0 } }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { Count(label: label, owner: self) }
    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        NOOPMetricsHandler.instance
    }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        Record(label: label, owner: self)
    }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Time(label: label, owner: self) }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}

    private final class Count: CounterHandler, Sendable {
        let label: String
        let owner: RecordingMetrics
        init(label: String, owner: RecordingMetrics) { (self.label, self.owner) = (label, owner) }
        func increment(by amount: Int64) { owner.counters.withLock { $0[label, default: 0] += amount } }
        func reset() { owner.counters.withLock { $0[label] = 0 } }
    }

    private final class Record: RecorderHandler, Sendable {
        let label: String
        let owner: RecordingMetrics
        init(label: String, owner: RecordingMetrics) { (self.label, self.owner) = (label, owner) }
        func record(_ value: Int64) { record(Double(value)) }
        func record(_ value: Double) { owner.recorded.withLock { $0[label] = value } }
    }

    private final class Time: TimerHandler, Sendable {
        let label: String
        let owner: RecordingMetrics
        init(label: String, owner: RecordingMetrics) { (self.label, self.owner) = (label, owner) }
        func recordNanoseconds(_ duration: Int64) { owner.timers.withLock { $0[label, default: 0] += 1 } }
    }
}
