/// Counts failed logins per key in a sliding window. A limit of 0 (or less) blocks nothing.
struct LoginThrottle {
    private var failures: [String: [Int64]] = [:]
    let limit: Int
    let window: Int64

    init(limit: Int, window: Int64) {
        self.limit = limit
        self.window = window
    }

    func isBlocked(_ key: String, now: Int64) -> Bool {
        limit > 0 && (failures[key]?.filter { now - $0 < window }.count ?? 0) >= limit
    }

    mutating func recordFailure(_ key: String, now: Int64) {
        guard limit > 0 else { return }
        var recent = (failures[key] ?? []).filter { now - $0 < window }
        recent.append(now)
        failures[key] = recent
        if failures.count > 100_000 { failures = failures.filter { $0.value.contains { now - $0 < window } } }
    }

    mutating func reset(_ key: String) { failures[key] = nil }
}
