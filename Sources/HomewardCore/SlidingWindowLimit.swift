/// At most `limit` events per key (a username or a client address) within a sliding `window` of
/// milliseconds: failed logins, hellos and watches, registrations, searches, messages. A limit of 0
/// (or less) limits nothing.
struct SlidingWindowLimit {
    private var events: [String: [Int64]] = [:]
    let limit: Int
    let window: Int64

    init(limit: Int, window: Int64) {
        self.limit = limit
        self.window = window
    }

    /// Whether `key` has had `limit` events within the window before `now`.
    func isLimited(_ key: String, now: Int64) -> Bool {
        limit > 0 && (events[key]?.filter { now - $0 < window }.count ?? 0) >= limit
    }

    /// Counts one event of `key` at `now`.
    mutating func record(_ key: String, now: Int64) {
        guard limit > 0 else { return }
        var recent = (events[key] ?? []).filter { now - $0 < window }
        recent.append(now)
        events[key] = recent
        if events.count > 100_000 { events = events.filter { $0.value.contains { now - $0 < window } } }
    }

    /// Forgets `key`'s events (a successful login clears its username's failures).
    mutating func reset(_ key: String) { events[key] = nil }
}
