import HomewardClient
import HomewardProtocol

/// The human lines of the friends' map events (issue 15).
extension EventPrinter {
    func describeFriendsMap(_ event: Event, line: (String, String) -> String) -> String {
        switch event {
        case .friendSharing(let username, let sharing):
            return line("share", "\(HumanFormat.shown(username)) \(sharing ? "now shares" : "stopped sharing") their location with you")
        case .locationResumed(let from):
            return line("pause", "your pause\(from.map { " for \(HumanFormat.shown($0))" } ?? "") ended; sharing again")
        case .meet(let meeting):
            var text = "\(display(meeting.from)) proposes to meet at \"\(HumanFormat.shown(meeting.name))\" "
                + "\(HumanFormat.coordinate(meeting.lat, meeting.lon)) at \(HumanFormat.time(meeting.time))"
            text += "  id \(meeting.id); homeward meet accept \(meeting.id)"
            return line("meet", text)
        case .meetResponse(let id, let by, let response):
            return line("meet", "\(HumanFormat.shown(by)) \(HumanFormat.shown(response)) meeting \(HumanFormat.shown(id))")
        case .meetCancelled(let id):
            return line("meet", "meeting \(HumanFormat.shown(id)) was cancelled")
        case .meetDelivered(let id, let to, let at):
            return line("meet", "meeting \(HumanFormat.shown(id)) reached \(HumanFormat.shown(to)) at \(HumanFormat.time(at))")
        case .message(let message):
            var text = "\(HumanFormat.shown(message.from)): \(HumanFormat.shown(message.text))"
            if let delivered = message.deliveredAt, delivered - message.queuedAt > 1000 {
                text += "  (sent \(HumanFormat.time(message.queuedAt)))"
            }
            return line("msg", text + "  id \(message.id)")
        case .messageDelivered(let id, let to, let at):
            return line("msg", "message \(HumanFormat.shown(id)) reached \(HumanFormat.shown(to)) at \(HumanFormat.time(at))")
        case .messageRead(let id, let by, let at):
            return line("msg", "\(HumanFormat.shown(by)) read message \(HumanFormat.shown(id)) at \(HumanFormat.time(at))")
        default:
            return line(event.type, JSONWriter.string(event.json.withoutEnvelope))
        }
    }
}
