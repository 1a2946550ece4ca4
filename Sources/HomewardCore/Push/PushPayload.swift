import HomewardProtocol

/// Makes an event fit one Web Push message. A push body is at most 4096 bytes (what push services
/// accept), and RFC 8291's one record leaves 4096 - 86 (header) - 16 (tag) - 1 (delimiter) = 3993
/// bytes for the event's JSON. An event that would not fit is shortened, never dropped:
/// 1. lists of usernames (`invited`, `observers`, `acked`) keep their first entries, and
///    `<list>More` says how many were left out;
/// 2. then free text (`text`, `note`, `reason`) is cut at a character boundary, ends with "…", and
///    `<field>Truncated: true` says so;
/// 3. an event still too long (no such fields to shorten) keeps its `type` and ids only, with
///    `truncated: true`: the app fetches the rest when it opens.
/// The WebSocket event is unchanged; only the push carries the shortened copy.
public enum PushPayload {
    public static let maxBytes = 3993

    static let lists = ["invited", "observers", "acked"]
    static let texts = ["text", "note", "reason"]
    static let ids = ["alarmId", "sessionId", "repeat"]

    /// The event's JSON bytes, shortened as above when longer than `limit`.
    public static func fit(_ event: JSONValue, limit: Int = maxBytes) -> [UInt8] {
        var current = event
        if let bytes = encoded(current, within: limit) { return bytes }
        for name in lists {
            guard let count = listCount(name, in: current) else { continue }
            // The most entries that fit, or none.
            if let kept = largest(upTo: count, where: { encoded(keeping($0, of: name, in: current), within: limit) != nil }) {
                return Array(JSONWriter.string(keeping(kept, of: name, in: current)).utf8)
            }
            current = keeping(0, of: name, in: current)
        }
        for name in texts {
            guard let text = textValue(name, in: current) else { continue }
            let characters = Array(text)
            if let kept = largest(upTo: characters.count, where: { encoded(cutting(name, to: characters, $0, in: current), within: limit) != nil }) {
                return Array(JSONWriter.string(cutting(name, to: characters, kept, in: current)).utf8)
            }
            current = cutting(name, to: characters, 0, in: current)
        }
        return Array(JSONWriter.string(bare(event)).utf8)
    }

    private static func encoded(_ value: JSONValue, within limit: Int) -> [UInt8]? {
        let bytes = Array(JSONWriter.string(value).utf8)
        return bytes.count <= limit ? bytes : nil
    }

    /// The largest n in 0...upper for which `fits(n)` holds (it holds for every smaller n too), or nil.
    private static func largest(upTo upper: Int, where fits: (Int) -> Bool) -> Int? {
        guard fits(0) else { return nil }
        var (low, high) = (0, upper)
        while low < high {
            let middle = (low + high + 1) / 2
            if fits(middle) { low = middle } else { high = middle - 1 }
        }
        return low
    }

    // The fields live at the top of the event or in its one nested object (`alarm`, `session`).

    private static func listCount(_ name: String, in event: JSONValue) -> Int? {
        var count: Int?
        _ = rewrite(event) { members in
            if let index = members.firstIndex(where: { $0.0 == name }), case .array(let items) = members[index].1 { count = items.count }
        }
        return count
    }

    private static func textValue(_ name: String, in event: JSONValue) -> String? {
        var text: String?
        _ = rewrite(event) { members in
            if let index = members.firstIndex(where: { $0.0 == name }), case .string(let value) = members[index].1 { text = value }
        }
        return text
    }

    private static func keeping(_ kept: Int, of name: String, in event: JSONValue) -> JSONValue {
        rewrite(event) { members in
            guard let index = members.firstIndex(where: { $0.0 == name }), case .array(let items) = members[index].1,
                  kept < items.count else { return }
            members[index].1 = .array(Array(items.prefix(kept)))
            members.append((name + "More", .int(Int64(items.count - kept))))
        }
    }

    private static func cutting(_ name: String, to characters: [Character], _ kept: Int, in event: JSONValue) -> JSONValue {
        rewrite(event) { members in
            guard let index = members.firstIndex(where: { $0.0 == name }), case .string = members[index].1 else { return }
            members[index].1 = .string(String(characters.prefix(kept)) + "…")
            members.append((name + "Truncated", true))
        }
    }

    /// Applies `change` to the members of the event and of each object nested one level down.
    private static func rewrite(_ event: JSONValue, _ change: (inout [(String, JSONValue)]) -> Void) -> JSONValue {
        guard case .object(var members) = event else { return event }
        change(&members)
        for index in members.indices {
            guard case .object(var inner) = members[index].1 else { continue }
            change(&inner)
            members[index].1 = .object(inner)
        }
        return .object(members)
    }

    /// `type`, the ids, and `truncated: true`.
    private static func bare(_ event: JSONValue) -> JSONValue {
        guard case .object(let members) = event else { return ["truncated": true] }
        var kept = members.filter { $0.0 == "type" || ids.contains($0.0) }
        for (name, value) in members {
            guard case .object(let inner) = value else { continue }
            let innerIds = inner.filter { ids.contains($0.0) }
            if !innerIds.isEmpty { kept.append((name, .object(innerIds))) }
        }
        kept.append(("truncated", true))
        return .object(kept)
    }
}
