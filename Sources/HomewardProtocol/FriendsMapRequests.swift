/// What the friends' map requests (issue 15) carry, and how their fields are validated.
public struct MeetingProposal: Sendable, Equatable {
    /// The longest ahead a meeting may be set, and how far in the past its time may lie (a "now" from a
    /// phone whose clock is a little behind).
    public static let maxAheadMillis: Int64 = 30 * 24 * 3600 * 1000
    public static let maxPastMillis: Int64 = 3600 * 1000
    public static let nameLimit = 100
    public static let inviteLimit = 50

    public var to: [String]
    public var lat: Double
    public var lon: Double
    public var name: String
    public var time: Int64

    public init(to: [String], lat: Double, lon: Double, name: String, time: Int64) {
        self.to = to
        self.lat = lat
        self.lon = lon
        self.name = name
        self.time = time
    }

    init(_ fields: Fields, now: Int64) throws(ProtocolError) {
        guard let to = try fields.usernames("to"), !to.isEmpty else { throw .badRequest("to must name at least one friend") }
        guard to.count <= Self.inviteLimit else { throw .badRequest("to has more than \(Self.inviteLimit) entries") }
        let time = try fields.integer("time", in: Int64.min...Int64.max)
        guard let time else { throw .badRequest("time is required") }
        guard time >= now - Self.maxPastMillis, time <= now + Self.maxAheadMillis else {
            throw .badRequest("time must lie at most 30 days ahead and at most an hour in the past")
        }
        self.init(to: to, lat: try fields.requiredNumber("lat", in: -90...90), lon: try fields.requiredNumber("lon", in: -180...180),
                  name: try FreeText.validate(fields.requiredString("name", maxLength: Self.nameLimit), field: "name"),
                  time: time)
    }
}

/// Free text one user writes for another's screen (meeting names, messages): not empty, and without the
/// control and bidirectional characters display names refuse (`DisplayText.isUnsafeInName`).
public enum FreeText {
    public static let messageLimit = 1000

    public static func validate(_ text: String, field: String) throws(ProtocolError) -> String {
        guard !text.isEmpty else { throw .badRequest("\(field) must not be empty") }
        guard !text.unicodeScalars.contains(where: DisplayText.isUnsafeInName) else {
            throw .badRequest("\(field) must not contain control characters or bidirectional overrides")
        }
        return text
    }
}

extension Request {
    /// `location.pause`'s end: in the future and at most 7 days ahead (like a check-in deadline).
    static func pauseEnd(_ fields: Fields, now: Int64) throws(ProtocolError) -> Int64? {
        guard let until = try fields.integer("until", in: Int64.min...Int64.max) else { return nil }
        guard until > now, until - now <= SessionOptions.maxHorizonMillis else {
            throw .badRequest("until must lie in the future and at most 7 days ahead")
        }
        return until
    }

    /// The friends' map requests, or nil when `type` is none of them.
    static func friendsMap(type: String, fields: Fields, now: Int64) throws(ProtocolError) -> Request? {
        switch type {
        case "share.always": return .shareAlways(with: try fields.usernames("with"))
        case "friend.location": return .friendLocation(username: try fields.username("username"))
        case "friend.trail": return .friendTrail(username: try fields.username("username"))
        case "location.pause":
            let from = try fields.has("from") ? fields.username("from") : nil
            return .locationPause(from: from, until: try pauseEnd(fields, now: now))
        case "location.resume":
            return .locationResume(from: try fields.has("from") ? fields.username("from") : nil)
        case "meet.propose": return .meetPropose(try MeetingProposal(fields, now: now))
        case "meet.accept": return .meetAccept(meetingId: try fields.identifier("meetingId"))
        case "meet.decline": return .meetDecline(meetingId: try fields.identifier("meetingId"))
        case "meet.cancel": return .meetCancel(meetingId: try fields.identifier("meetingId"))
        case "meet.list": return .meetList
        case "msg.send":
            let text = try fields.requiredString("text", maxLength: FreeText.messageLimit)
            return .msgSend(to: try fields.username("to"), text: try FreeText.validate(text, field: "text"))
        case "msg.read": return .msgRead(messageId: try fields.identifier("messageId"))
        default: return nil
        }
    }
}
