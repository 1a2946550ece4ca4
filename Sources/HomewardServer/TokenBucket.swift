import NIOCore

/// A per-connection request rate limit: `rate` per second with bursts of `burst`.
struct TokenBucket {
    let rate: Double
    let burst: Double
    private var tokens: Double
    private var updated: NIODeadline

    init(rate: Double, burst: Double, now: NIODeadline = .now()) {
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.updated = now
    }

    mutating func take(now: NIODeadline = .now()) -> Bool {
        let elapsed = Double((now - updated).nanoseconds) / 1e9
        tokens = min(burst, tokens + elapsed * rate)
        updated = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
