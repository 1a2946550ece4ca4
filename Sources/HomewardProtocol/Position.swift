/// A position report, validated against the contract's ranges.
public struct Position: Sendable, Equatable {
    public var lat: Double
    public var lon: Double
    public var acc: Double?
    public var alt: Double?
    public var spd: Double?
    public var hdg: Double?
    public var batt: Double?
    /// Unix milliseconds.
    public var ts: Int64

    public init(lat: Double, lon: Double, acc: Double? = nil, alt: Double? = nil, spd: Double? = nil,
                hdg: Double? = nil, batt: Double? = nil, ts: Int64) {
        self.lat = lat
        self.lon = lon
        self.acc = acc
        self.alt = alt
        self.spd = spd
        self.hdg = hdg
        self.batt = batt
        self.ts = ts
    }

    /// The members of a position object, optionally headed by `type` and `from` as in a `pos` event.
    public func jsonMembers() -> [(String, JSONValue)] {
        var members: [(String, JSONValue)] = [("lat", .number(lat)), ("lon", .number(lon))]
        if let acc { members.append(("acc", .number(acc))) }
        if let alt { members.append(("alt", .number(alt))) }
        if let spd { members.append(("spd", .number(spd))) }
        if let hdg { members.append(("hdg", .number(hdg))) }
        if let batt { members.append(("batt", .number(batt))) }
        members.append(("ts", .int(ts)))
        return members
    }

    public var json: JSONValue { .object(jsonMembers()) }

    /// Reads a position from `object`; `now` fills a missing `ts`.
    public init(from object: JSONValue, now: Int64) throws(ProtocolError) {
        let fields = Fields(object)
        lat = try fields.requiredNumber("lat", in: -90...90)
        lon = try fields.requiredNumber("lon", in: -180...180)
        acc = try fields.number("acc", in: 0...Double.greatestFiniteMagnitude)
        alt = try fields.number("alt", in: -Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude)
        spd = try fields.number("spd", in: 0...Double.greatestFiniteMagnitude)
        hdg = try fields.number("hdg", in: 0...360)
        if let hdg, hdg >= 360 { throw .badRequest("hdg must be in [0, 360)") }
        batt = try fields.number("batt", in: 0...100)
        ts = try fields.timestamp("ts") ?? now
    }
}
