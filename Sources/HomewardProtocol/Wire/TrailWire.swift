/// The path of an active walk as the relay keeps it in memory (feature `trail`): in an observer's
/// `session.accept` reply, a share-link viewer's `watch` reply, and the reply to `friend.trail`.
public struct TrailInfo: Sendable, Equatable {
    public var sessionId: String
    /// When the relay began recording this walk: nothing before it is kept. Later than the session's
    /// `startedAt` when the relay restarted (or the walker moved to another relay) during the walk.
    public var since: Int64
    /// Oldest first. On the wire each is `[lat, lon, ts]`, to keep a long trail small.
    public var points: [Position]

    public init(sessionId: String, since: Int64, points: [Position]) {
        self.sessionId = sessionId
        self.since = since
        self.points = points
    }

    public var json: JSONValue {
        .object([("sessionId", .string(sessionId)), ("since", .int(since)),
                 ("points", .array(points.map { .array([.number($0.lat), .number($0.lon), .int($0.ts)]) }))])
    }

    public init?(json: JSONValue?) {
        guard let json, let sessionId = json.string("sessionId"), let since = json.int64("since") else { return nil }
        var points: [Position] = []
        for case .array(let triple) in json.array("points") {
            guard triple.count == 3, let lat = triple[0].numberValue, let lon = triple[1].numberValue,
                  let ts = JSONValue.object([("ts", triple[2])]).int64("ts") else { return nil }
            points.append(Position(lat: lat, lon: lon, ts: ts))
        }
        self.init(sessionId: sessionId, since: since, points: points)
    }
}

/// `friend.trail {username}`: the trail of that user's active walk (`null` when they have none, or none is
/// recorded), for someone who receives their positions now.
public struct FriendTrailReply: ReplyBody, Equatable {
    public var username: String
    public var trail: TrailInfo?

    public init(username: String, trail: TrailInfo?) {
        self.username = username
        self.trail = trail
    }

    public var fields: [(String, JSONValue)] {
        [("username", .string(username)), ("trail", trail?.json ?? .null)]
    }

    public init?(json: JSONValue) {
        guard let username = json.string("username") else { return nil }
        self.init(username: username, trail: TrailInfo(json: json.object("trail")))
    }
}
