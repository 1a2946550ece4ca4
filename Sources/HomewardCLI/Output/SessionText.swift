import HomewardClient
import HomewardProtocol

/// How sessions look in output.
enum SessionText {
    static func json(_ session: FollowMeSession) -> JSONValue {
        [
            "sessionId": .string(session.id), "owner": session.owner.json, "note": .optional(session.note),
            "startedAt": .int(session.startedAt), "observers": .strings(session.observers), "invited": .strings(session.invited),
        ]
    }

    static func summary(_ session: FollowMeSession) -> String {
        var text = "session \(session.id) of \(session.owner.username), started \(HumanFormat.time(session.startedAt))"
        if let note = session.note { text += ", \"\(note)\"" }
        let waiting = session.invited.filter { !session.observers.contains($0) }
        text += "; following: " + (session.observers.isEmpty ? "nobody yet" : session.observers.joined(separator: ", "))
        if !waiting.isEmpty { text += "; invited: " + waiting.joined(separator: ", ") }
        return text
    }
}
