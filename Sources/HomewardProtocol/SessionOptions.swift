/// What `session.start` may ask for.
public struct SessionOptions: Sendable, Equatable {
    /// The longest a session may be set to last, or a check-in deadline may lie ahead.
    public static let maxHorizonMillis: Int64 = 7 * 24 * 3600 * 1000

    public var invite: [String]?
    public var note: String?
    /// Unix ms by which the owner must check in, else the relay raises an alarm for them.
    public var checkInBy: Int64?
    public var destination: Destination?
    /// Seconds until the session ends by itself.
    public var ttl: Int64?

    public init(invite: [String]? = nil, note: String? = nil, checkInBy: Int64? = nil,
                destination: Destination? = nil, ttl: Int64? = nil) {
        self.invite = invite
        self.note = note
        self.checkInBy = checkInBy
        self.destination = destination
        self.ttl = ttl
    }

    static func checkInDeadline(_ fields: Fields, now: Int64) throws(ProtocolError) -> Int64? {
        guard let deadline = try fields.integer("checkInBy", in: Int64.min...Int64.max) else { return nil }
        guard deadline > now, deadline - now <= maxHorizonMillis else {
            throw .badRequest("checkInBy must lie in the future and at most 7 days ahead")
        }
        return deadline
    }
}
