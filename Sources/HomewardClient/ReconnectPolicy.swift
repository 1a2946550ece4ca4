/// How the client retries after losing its connection: capped exponential backoff with jitter.
///
/// Jitter spreads the reconnects of many clients that lost the relay at the same moment (a
/// relay restart), so they do not all come back in the same millisecond.
public struct ReconnectPolicy: Sendable, Equatable {
    public var isEnabled: Bool
    public var initialDelay: Duration
    public var maximumDelay: Duration
    public var multiplier: Double
    /// The fraction of each delay that is random: 0.5 waits between half and all of it.
    public var jitter: Double
    /// Attempts before giving up after a loss; nil retries until `close()`.
    public var maximumAttempts: Int?

    public init(isEnabled: Bool = true, initialDelay: Duration = .milliseconds(250), maximumDelay: Duration = .seconds(30),
                multiplier: Double = 2, jitter: Double = 0.5, maximumAttempts: Int? = nil) {
        self.isEnabled = isEnabled
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.multiplier = multiplier
        self.jitter = min(max(jitter, 0), 1)
        self.maximumAttempts = maximumAttempts
    }

    public static let disabled = ReconnectPolicy(isEnabled: false)

    /// The capped delay before attempt `attempt` (0-based), without jitter.
    public func baseDelay(forAttempt attempt: Int) -> Duration {
        let initial = initialDelay.seconds
        let cap = maximumDelay.seconds
        // pow grows fast; compare in seconds to avoid overflowing Duration.
        let grown = initial * pow(multiplier, Double(max(0, min(attempt, 64))))
        return .seconds(min(grown, cap))
    }

    /// The delay before attempt `attempt`, with `unit` (in [0, 1)) choosing the jitter.
    public func delay(forAttempt attempt: Int, unit: Double) -> Duration {
        let base = baseDelay(forAttempt: attempt).seconds
        return .seconds(base * (1 - jitter * min(max(unit, 0), 1)))
    }

    public func delay(forAttempt attempt: Int) -> Duration {
        delay(forAttempt: attempt, unit: Double.random(in: 0..<1))
    }
}

extension Duration {
    /// The duration in seconds, as a Double.
    public var seconds: Double {
        let (whole, fraction) = components
        return Double(whole) + Double(fraction) / 1e18
    }
}

private func pow(_ base: Double, _ exponent: Double) -> Double {
    var result = 1.0
    var remaining = Int(exponent)
    var factor = base
    // Exponentiation by squaring: the exponent is a small whole number, no libm needed.
    while remaining > 0 {
        if remaining & 1 == 1 { result *= factor }
        factor *= factor
        remaining >>= 1
    }
    return result
}
