import Foundation
import HomewardProtocol

/// How values look to people: local wall-clock times, metres, degrees.
enum HumanFormat {
    /// "21:04:05" in local time for today, "2025-11-22 21:04" for another day.
    static func time(_ milliseconds: Int64, now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) -> String {
        var seconds = time_t(milliseconds / 1000)
        var moment = tm()
        localtime_r(&seconds, &moment)
        var today = tm()
        var current = time_t(now / 1000)
        localtime_r(&current, &today)
        let sameDay = moment.tm_year == today.tm_year && moment.tm_yday == today.tm_yday
        if sameDay {
            return String(format: "%02d:%02d:%02d", moment.tm_hour, moment.tm_min, moment.tm_sec)
        }
        return String(format: "%04d-%02d-%02d %02d:%02d", moment.tm_year + 1900, moment.tm_mon + 1, moment.tm_mday,
                      moment.tm_hour, moment.tm_min)
    }

    static func now() -> String { time(nowMillis()) }

    static func nowMillis() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// "8 m", "1234 m": always metres, rounded to whole metres (GPS is not better than that).
    static func metres(_ value: Double) -> String {
        "\(Int(value.rounded())) m"
    }

    /// "3 s ago", "5 min ago", "2 h ago", "4 d ago".
    static func ago(_ milliseconds: Int64, now: Int64 = nowMillis()) -> String {
        let seconds = max(0, (now - milliseconds) / 1000)
        switch seconds {
        case ..<60: return "\(seconds) s ago"
        case ..<3600: return "\(seconds / 60) min ago"
        case ..<86_400: return "\(seconds / 3600) h ago"
        default: return "\(seconds / 86_400) d ago"
        }
    }

    static func coordinate(_ lat: Double, _ lon: Double) -> String {
        String(format: "%.6f, %.6f", lat, lon)
    }

    /// The optional parts of a position, e.g. "±8 m  1.4 m/s  hdg 45°  batt 80%".
    static func details(_ position: Position) -> String {
        var parts: [String] = []
        if let acc = position.acc { parts.append("±" + metres(acc)) }
        if let spd = position.spd { parts.append(String(format: "%.1f m/s", spd)) }
        if let hdg = position.hdg { parts.append("hdg \(Int(hdg.rounded()) % 360)°") }
        if let alt = position.alt { parts.append("alt " + metres(alt)) }
        if let batt = position.batt { parts.append("batt \(Int(batt.rounded()))%") }
        return parts.joined(separator: "  ")
    }

    /// Text another user wrote (a name, a note, an alarm text, a reason), made safe to print: control
    /// characters (ESC would start a terminal escape sequence, CR would overwrite the line, NUL would
    /// hide the rest) and bidirectional controls (which reorder what follows) are shown as `\u001B`.
    static func shown(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: DisplayText.isUnsafeInName) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            if DisplayText.isUnsafeInName(scalar) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                result += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// A fixed-width label column so that event lines line up.
    static func label(_ text: String, width: Int = 10) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}
