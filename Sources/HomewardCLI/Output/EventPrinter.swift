import HomewardClient
import HomewardProtocol

/// Prints events as they arrive: one aligned line each for people, or the relay's JSON.
///
/// Remembers each sender's previous position so that a line can say how far they moved.
final class EventPrinter {
    private let console: Console
    private var previous: [String: Position] = [:]

    init(console: Console) {
        self.console = console
    }

    func print(_ event: RelayEvent) {
        if console.json {
            console.line(JSONWriter.string(event.json))
        } else if let text = describe(event) {
            console.line(text)
        }
    }

    /// A change of our own connection: a JSON line for scripts (they may need to know that a
    /// reconnect happened), a note on stderr for people, since it is not something the relay said.
    func printConnection(_ event: RelayEvent) {
        if console.json { console.line(JSONWriter.string(event.json)) } else { console.note(describe(event) ?? "") }
    }

    /// The human line for an event; nil for ones not worth a line.
    func describe(_ event: RelayEvent) -> String? {
        let time = HumanFormat.now()
        func line(_ label: String, _ text: String) -> String { "\(time)  \(HumanFormat.label(label))\(text)" }
        switch event.kind {
        case .event(let relayed):
            return describe(relayed, line: line)
        case .requestFailed(let error):
            return line("error", "\(error.code.rawValue): \(error.message)")
        case .connection(let change):
            return line("relay", describe(change))
        case .other(let type):
            return line(type.isEmpty ? "?" : type, JSONWriter.string(event.json.withoutEnvelope))
        }
    }

    /// The human line for an event of the contract.
    private func describe(_ event: Event, line: (String, String) -> String) -> String {
        switch event {
        case .position(let from, let position):
            return line("pos", positionText(from: from, position))
        case .friendRequest(let from):
            return line("friend", "\(display(from)) asks to be your friend (homeward friends accept \(from.username))")
        case .friendAdded(let user):
            return line("friend", "you and \(display(user)) are now friends")
        case .friendDeclined(let username):
            return line("friend", "\(HumanFormat.shown(username)) declined your friend request")
        case .friendRemoved(let username):
            return line("friend", "\(HumanFormat.shown(username)) removed you as a friend")
        case .presence(let username, let online, _):
            return line("presence", "\(username) is \(online ? "online" : "offline")")
        case .sessionInvite(let session):
            let note = session.note.map { " \"\(HumanFormat.shown($0))\"" } ?? ""
            return line("invite", "\(display(session.owner)) asks you to follow their walk\(note) (homeward follow \(session.owner.username))")
        case .sessionAccepted(_, let by):
            return line("session", "\(by) is following you")
        case .sessionDeclined(_, let by):
            return line("session", "\(by) declined to follow you")
        case .sessionLeft(_, let by):
            return line("session", "\(by) stopped following you")
        case .alarmAcknowledged(_, let by):
            return line("alarm", "\(HumanFormat.shown(by)) acknowledged the alarm")
        case .sessionEnded(let id, let reason):
            return line("session", "session \(HumanFormat.shown(id)) ended (\(HumanFormat.shown(reason)))")
        case .sessionLost(let id, let last, let since):
            var text = "lost contact with the walker of session \(id)"
            if let since { text += " since \(HumanFormat.time(since))" }
            if let last { text += "; last seen at \(HumanFormat.coordinate(last.lat, last.lon))" }
            return line("LOST", text)
        case .sessionResumed(let id):
            return line("session", "contact with the walker of session \(id) is back")
        case .alarm(let alarm, let repeatCount):
            var text = "PANIC from \(display(alarm.from)): \"\(HumanFormat.shown(alarm.text))\""
            if let position = alarm.position {
                text += " at \(HumanFormat.coordinate(position.lat, position.lon))"
                if let acc = position.acc { text += " ±" + HumanFormat.metres(acc) }
            }
            if alarm.isAutomatic { text += " (raised by the relay: missed check-in)" }
            if let repeatCount { text += " (repeat \(repeatCount))" }
            text += "  id \(alarm.id); homeward ack \(alarm.id)"
            return line("ALARM", text)
        case .alarmAcked(let id, let by):
            return line("alarm", "\(by) acknowledged alarm \(id)")
        case .alarmCancelled(let id, let reason):
            return line("alarm", "alarm \(HumanFormat.shown(id)) cancelled (\(HumanFormat.shown(reason)))")
        }
    }

    func positionText(from sender: String, _ position: Position) -> String {
        var text = "\(HumanFormat.label(sender, width: 12))\(HumanFormat.coordinate(position.lat, position.lon))"
        let details = HumanFormat.details(position)
        if !details.isEmpty { text += "  " + details }
        if let last = previous[sender] {
            let moved = Geodesy.distance(Coordinate(lat: last.lat, lon: last.lon), Coordinate(lat: position.lat, lon: position.lon))
            text += "  moved " + HumanFormat.metres(moved)
        }
        text += "  (fix \(HumanFormat.time(position.ts)))"
        previous[sender] = position
        return text
    }

    func describe(_ change: RelayEvent.ConnectionChange) -> String {
        switch change {
        case .disconnected(let closure): return "disconnected: \(closure)"
        case .reconnecting(let attempt, let delay):
            return "reconnecting (attempt \(attempt)) in \(String(format: "%.1f", delay.seconds)) s"
        case .reconnected: return "reconnected and signed in again"
        case .signedOut(let reason): return "reconnected, but signed out: \(reason)"
        case .gaveUp: return "gave up reconnecting"
        }
    }

    private func display(_ user: User) -> String {
        HumanFormat.shown(user.name == user.username ? user.username : "\(user.name) (\(user.username))")
    }
}
