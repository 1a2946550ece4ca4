import HomewardClient
import HomewardProtocol

/// How sessions look in output.
enum SessionText {
    static func json(_ session: FollowMeSession) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("sessionId", .string(session.id)), ("owner", session.owner.json), ("note", .optional(session.note)),
            ("startedAt", .int(session.startedAt)), ("observers", .strings(session.observers)), ("invited", .strings(session.invited)),
        ]
        if let checkInBy = session.checkInBy { members.append(("checkInBy", .int(checkInBy))) }
        if let destination = session.destination { members.append(("destination", destination.json)) }
        if let expiresAt = session.expiresAt { members.append(("expiresAt", .int(expiresAt))) }
        return .object(members)
    }

    static func summary(_ session: FollowMeSession) -> String {
        var text = "session \(session.id) of \(session.owner.username), started \(HumanFormat.time(session.startedAt))"
        if let note = session.note { text += ", \"\(HumanFormat.shown(note))\"" }
        let waiting = session.invited.filter { !session.observers.contains($0) }
        text += "; following: " + (session.observers.isEmpty ? "nobody yet" : session.observers.joined(separator: ", "))
        if !waiting.isEmpty { text += "; invited: " + waiting.joined(separator: ", ") }
        return text + safety(session)
    }

    /// The safety extensions a session has, as a suffix for a summary line ("" when none).
    static func safety(_ session: FollowMeSession) -> String {
        var text = ""
        if let checkInBy = session.checkInBy { text += "; check in by \(HumanFormat.time(checkInBy))" }
        if let destination = session.destination {
            text += "; ends on arrival within \(HumanFormat.metres(destination.radius)) of \(HumanFormat.coordinate(destination.lat, destination.lon))"
        }
        if let expiresAt = session.expiresAt { text += "; expires \(HumanFormat.time(expiresAt))" }
        return text
    }
}
