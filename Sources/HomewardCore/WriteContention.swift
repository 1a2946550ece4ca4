import Dispatch
import Logging
import Metrics
import Synchronization

/// Writes refused because the relay's cache was behind the store (another relay wrote first), and what
/// deciding them again cost: counted for `/metrics`, and told to the operator as at most one warning per
/// `reportInterval` that sums up the interval. Contention is invisible to clients until it costs them an
/// `internal`, so an operator has to see it rise before that.
///
/// The write path calls `record` once per request that met a refusal, whatever its end.
public final class WriteContention: Sendable {
    /// What one request met: `refusals` refused writes, of which `retries` were decided again, and whether it
    /// was given up (answered `internal`) after `deciding` (from its first refusal to its answer).
    public struct Attempt: Sendable {
        public var refusals: Int
        public var retries: Int
        public var gaveUp: Bool
        public var deciding: Duration

        public init(refusals: Int, retries: Int, gaveUp: Bool, deciding: Duration) {
            self.refusals = refusals
            self.retries = retries
            self.gaveUp = gaveUp
            self.deciding = deciding
        }
    }

    /// What happened since the last warning.
    struct Window {
        var requests = 0
        var refusals = 0
        var retries = 0
        var gaveUp = 0
        var slowest = Duration.zero
        var since: Int64?
        var nextReport: Int64 = .min
        var flushScheduled = false
    }

    /// At most one warning per this many milliseconds.
    public static let reportInterval: Int64 = 10_000

    private let conflicts: Counter
    private let retries: Counter
    private let unresolved: Counter
    private let deciding: Metrics.Timer
    private let logger: Logger
    private let clock: @Sendable () -> Int64
    /// Runs a closure after a delay in milliseconds: the warning for the rest of an interval when no
    /// further refusal comes to trigger it. Tests run it by hand.
    private let schedule: @Sendable (Int64, @escaping @Sendable () -> Void) -> Void
    private let window = Mutex(Window())

    public init(metrics: any MetricsFactory, logger: Logger, clock: @escaping @Sendable () -> Int64,
                schedule: @escaping @Sendable (Int64, @escaping @Sendable () -> Void) -> Void = WriteContention.afterDelay) {
        conflicts = Counter(label: "homeward_write_conflicts_total", factory: metrics)
        retries = Counter(label: "homeward_write_retries_total", factory: metrics)
        unresolved = Counter(label: "homeward_write_conflicts_unresolved_total", factory: metrics)
        deciding = Metrics.Timer(label: "homeward_write_redecide_seconds", factory: metrics)
        self.logger = logger
        self.clock = clock
        self.schedule = schedule
    }

    @Sendable public static func afterDelay(_ milliseconds: Int64, _ work: @escaping @Sendable () -> Void) {
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(milliseconds)), execute: work)
    }

    /// Counts one request's refusals; warns now if the last warning is `reportInterval` old, else makes sure
    /// one comes when it is.
    public func record(_ attempt: Attempt) {
        guard attempt.refusals > 0 else { return }
        conflicts.increment(by: attempt.refusals)
        if attempt.retries > 0 { retries.increment(by: attempt.retries) }
        if attempt.gaveUp { unresolved.increment() }
        deciding.recordNanoseconds(attempt.deciding.nanoseconds)
        let now = clock()
        let (report, wait) = window.withLock { window -> (Window?, Int64?) in
            window.requests += 1
            window.refusals += attempt.refusals
            window.retries += attempt.retries
            window.gaveUp += attempt.gaveUp ? 1 : 0
            window.slowest = max(window.slowest, attempt.deciding)
            if window.since == nil { window.since = now }
            if now >= window.nextReport { return (Self.take(&window, now: now), nil) }
            guard !window.flushScheduled else { return (nil, nil) }
            window.flushScheduled = true
            return (nil, window.nextReport - now)
        }
        if let report { warn(report, now: now) }
        if let wait { schedule(wait) { [weak self] in self?.flush() } }
    }

    /// The warning for what came since the last one, if anything did and the interval is over.
    func flush() {
        let now = clock()
        let report = window.withLock { window -> Window? in
            window.flushScheduled = false
            guard window.refusals > 0, now >= window.nextReport else { return nil }
            return Self.take(&window, now: now)
        }
        if let report { warn(report, now: now) }
    }

    private static func take(_ window: inout Window, now: Int64) -> Window {
        let report = window
        window = Window(nextReport: now + reportInterval, flushScheduled: window.flushScheduled)
        return report
    }

    private func warn(_ report: Window, now: Int64) {
        let seconds = Double(max(now - (report.since ?? now), 1000)) / 1000
        logger.warning("writes refused because another relay wrote first; decided again", metadata: [
            "refused": "\(report.refusals)", "requests": "\(report.requests)", "retries": "\(report.retries)",
            "given-up": "\(report.gaveUp)", "refused-per-second": "\(Self.format(Double(report.refusals) / seconds))",
            "slowest-ms": "\(report.slowest.milliseconds)", "interval-s": "\(Self.format(seconds))",
        ])
    }

    private static func format(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}

extension Duration {
    fileprivate var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    fileprivate var milliseconds: Int64 { nanoseconds / 1_000_000 }
}
