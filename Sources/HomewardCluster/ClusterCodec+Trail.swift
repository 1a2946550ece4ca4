import HomewardCore
import HomewardProtocol

/// A walk's trail in the walker's relay's answer to `hw.last`: `{"sessionId", "since", "runs": [{"restriction"?,
/// "points": [[lat, lon, ts, receivedAt]]}]}`, consecutive points under the same restriction in one run, so that
/// a pause's names are written once per stretch and not once per point.
extension ClusterCodec {
    /// The answer's `trail` member, none without a trail.
    static func trailMember(_ trail: SessionTrail?) -> [(String, JSONValue)] {
        guard let trail else { return [] }
        return [("trail", encode(trail))]
    }

    static func encode(_ trail: SessionTrail) -> JSONValue {
        var runs: [(restriction: PositionRestriction?, points: [JSONValue])] = []
        for point in trail.allPoints {
            let row = JSONValue.array([.number(point.position.lat), .number(point.position.lon),
                                       .int(point.position.ts), .int(point.receivedAt)])
            if let last = runs.indices.last, runs[last].restriction == point.restriction {
                runs[last].points.append(row)
            } else {
                runs.append((point.restriction, [row]))
            }
        }
        var encodedRuns: [JSONValue] = []
        for run in runs {
            var members: [(String, JSONValue)] = []
            if let restriction = run.restriction {
                let encoded: JSONValue = encode(restriction)
                members.append(("restriction", encoded))
            }
            members.append(("points", .array(run.points)))
            encodedRuns.append(.object(members))
        }
        return .object([("sessionId", .string(trail.sessionId)), ("since", .int(trail.since)), ("runs", .array(encodedRuns))])
    }

    static func decodeTrail(_ json: JSONValue) throws -> SessionTrail {
        guard let sessionId = json.string("sessionId"), let since = json.int64("since"), case .array(let runs)? = json["runs"] else {
            throw DecodingError.malformed("a trail without sessionId, since or runs")
        }
        var points: [TrailPoint] = []
        for run in runs {
            let restriction = try run["restriction"].map(decodeRestriction)
            guard case .array(let rows)? = run["points"] else { throw DecodingError.malformed("a trail run without points") }
            for case .array(let row) in rows {
                guard row.count == 4, let lat = row[0].numberValue, let lon = row[1].numberValue,
                      (-90...90).contains(lat), (-180...180).contains(lon),
                      case .int(let ts) = row[2], case .int(let receivedAt) = row[3] else {
                    throw DecodingError.malformed("a bad trail point")
                }
                points.append(TrailPoint(position: Position(lat: lat, lon: lon, ts: ts), restriction: restriction, receivedAt: receivedAt))
            }
        }
        return SessionTrail(sessionId: sessionId, since: since, points: points)
    }
}
