import Foundation

/// What a push service's (or webhook's) answer means for the message (RFC 8030 section 5 and 8.4).
public enum DeliveryOutcome: Sendable, Equatable {
    /// 2xx (201 Created from a push service): accepted, done.
    case delivered(status: Int)
    /// 404 or 410: the subscription no longer exists; delete it and do not retry.
    case gone(status: Int)
    /// 429, 5xx, or no answer at all: try again, not before `after` seconds when the service said so.
    case retry(status: Int?, after: TimeInterval?)
    /// Anything else (400, 401, 403, 413, ...): the message will never be accepted; drop it.
    case failed(status: Int)

    /// Classifies a status and its `Retry-After` header (delta-seconds or an HTTP-date).
    public static func classify(status: Int, retryAfter: String?, now: Date = Date()) -> DeliveryOutcome {
        switch status {
        case 200...299: .delivered(status: status)
        case 404, 410: .gone(status: status)
        case 429, 500...599: .retry(status: status, after: retryAfter.flatMap { retryDelay($0, now: now) })
        default: .failed(status: status)
        }
    }

    /// Seconds to wait from a `Retry-After` value (RFC 9110 section 10.2.3), or nil when it is neither
    /// form. A date in the past means now.
    public static func retryDelay(_ value: String, now: Date) -> TimeInterval? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed) { return seconds >= 0 ? TimeInterval(seconds) : nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}
