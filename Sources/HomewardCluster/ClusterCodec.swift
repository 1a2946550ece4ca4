import HomewardCore
import HomewardProtocol
import NIOCore

/// How change notices and presence messages look on the bus: JSON objects, written with the relay's own
/// writer and read with its parser (depth-limited), so a bad message from the bus is refused, not trusted.
/// Public for `homeward-cache-bench`, which measures what a relay spends on a notice.
public enum ClusterCodec {
    enum DecodingError: Error, CustomStringConvertible {
        case malformed(String)
        var description: String {
            switch self {
            case .malformed(let what): "malformed bus message: \(what)"
            }
        }
    }

    public static func encode(_ notice: ChangeNotice) -> ByteBuffer {
        let members: [(String, JSONValue)] = [
            ("node", .string(notice.node)),
            ("events", .array(notice.events.map { JSONValue.object([("to", .strings($0.recipients)), ("event", $0.message)]) })),
            ("closeViewers", .strings(notice.closeViewers)),
            ("revokedTokens", .strings(notice.revokedTokens)),
        ]
        let payload = JSONWriter.encode(.object(members + Self.members(of: notice.commits)))
        // A notice past nats-server's `max_payload` (1 MiB by default) would be dropped, events and all; one
        // this large (a mass expiry after downtime) is cheaper to reload than to apply anyway.
        guard notice.commits != nil, payload.readableBytes > maxPayloadWithCommits else { return payload }
        return JSONWriter.encode(.object(members))
    }

    /// Past this many bytes a notice goes without its commits: the other relays reload instead.
    static let maxPayloadWithCommits = 256 * 1024

    public static func decodeNotice(_ payload: ByteBuffer) throws -> ChangeNotice {
        let json = try parse(payload)
        guard let node = json.string("node") else { throw DecodingError.malformed("a notice without node") }
        var notice = ChangeNotice(node: node, closeViewers: json.array("closeViewers").compactMap(\.stringValue),
                                  revokedTokens: json.array("revokedTokens").compactMap(\.stringValue), commits: commits(in: json))
        for event in json.array("events") {
            guard case .array(let to)? = event["to"], let message = event["event"], case .object = message else {
                throw DecodingError.malformed("an event without to or event")
            }
            notice.events.append(.init(recipients: to.compactMap(\.stringValue), message: message))
        }
        return notice
    }

    /// A presence message (`hw.presence`, and a snapshot as the answer on `hw.presence.sync.<node>`):
    /// `{"kind": "delta"|"heartbeat"|"snapshot", "node", "epoch", "seq", ...}` with `joined` and `left`
    /// (username to milliseconds) in a delta, `positions` (username to `LastPosition`) in a heartbeat and a
    /// snapshot, `"notices": "per-user"` in the heartbeat of a relay publishing its notices per user (older relays
    /// ignore it), and `online` in a snapshot.
    public static func encode(_ message: PresenceMessage) -> ByteBuffer {
        func head(_ kind: String, _ node: String, _ epoch: String, _ seq: Int64) -> [(String, JSONValue)] {
            [("kind", .string(kind)), ("node", .string(node)), ("epoch", .string(epoch)), ("seq", .int(seq))]
        }
        func positions(_ positions: [String: LastPosition]) -> (String, JSONValue) {
            ("positions", .object(positions.sorted { $0.key < $1.key }.map { ($0.key, encode($0.value)) }))
        }
        switch message {
        case .delta(let delta):
            return JSONWriter.encode(.object(head("delta", delta.node, delta.epoch, delta.seq) + [
                ("joined", .strings(delta.joined)),
                ("left", .object(delta.left.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.int($0.value)) })),
            ]))
        case .heartbeat(let heartbeat):
            // Only `per-user` is stated: a heartbeat without it is from a relay with `all` or of the version before.
            let mode: [(String, JSONValue)] = heartbeat.noticesPerUser ? [("notices", .string("per-user"))] : []
            return JSONWriter.encode(.object(head("heartbeat", heartbeat.node, heartbeat.epoch, heartbeat.seq)
                                             + [positions(heartbeat.positions)] + mode))
        case .snapshot(let snapshot):
            return JSONWriter.encode(.object(head("snapshot", snapshot.node, snapshot.epoch, snapshot.seq)
                                             + [("online", .strings(snapshot.online)), positions(snapshot.positions)]))
        }
    }

    public static func decodePresence(_ payload: ByteBuffer) throws -> PresenceMessage {
        let json = try parse(payload)
        guard let kind = json.string("kind"), let node = json.string("node"), let epoch = json.string("epoch"),
              case .int(let seq)? = json["seq"], seq >= 0 else {
            throw DecodingError.malformed("a presence message without kind, node, epoch or seq")
        }
        func names(_ key: String) throws -> [String] {
            guard case .array(let list)? = json[key] else { throw DecodingError.malformed("a presence \(kind) without \(key)") }
            let names = list.compactMap(\.stringValue)
            guard names.count == list.count else { throw DecodingError.malformed("a presence \(kind) with a name that is not a string") }
            return names
        }
        func positions() -> [String: LastPosition] {
            var positions: [String: LastPosition] = [:]
            if case .object(let members)? = json["positions"] {
                // One that cannot be read is left out (never taken for a position hidden from nobody).
                for (username, object) in members {
                    if let last = try? decodeLastPosition(object), !last.isEmpty { positions[username] = last }
                }
            }
            return positions
        }
        switch kind {
        case "delta":
            guard case .object(let members)? = json["left"] else { throw DecodingError.malformed("a presence delta without left") }
            var left: [String: Int64] = [:]
            for (username, time) in members {
                guard case .int(let ms) = time else { throw DecodingError.malformed("a presence delta with a bad time") }
                left[username] = ms
            }
            return .delta(PresenceDelta(node: node, epoch: epoch, seq: seq, joined: try names("joined"), left: left))
        case "heartbeat":
            return .heartbeat(PresenceHeartbeat(node: node, epoch: epoch, seq: seq, positions: positions(),
                                                noticesPerUser: json.string("notices") == "per-user"))
        case "snapshot":
            return .snapshot(PresenceSnapshot(node: node, epoch: epoch, seq: seq, online: try names("online"), positions: positions()))
        default:
            throw DecodingError.malformed("a presence message of kind \(kind)")
        }
    }

    /// A position (`hw.pos.<walker>`): the `pos` event's text alone (an object, written without a newline)
    /// when the walker has no pause; else a header naming the restriction (`{"only": [names]}` or
    /// `{"allBut": [names]}`), a newline, then the event's text. The event is encoded once, by its relay.
    static func encode(_ message: EncodedMessage, restriction: PositionRestriction?) -> ByteBuffer {
        guard let restriction else { return message.bytes }
        var payload = JSONWriter.encode(encode(restriction))
        payload.writeInteger(UInt8(ascii: "\n"))
        var text = message.bytes
        payload.writeBuffer(&text)
        return payload
    }

    /// The restriction (nil for a plain position) and the event's text of a position. A header that cannot
    /// be read is refused, never taken for a plain position: it may be a pause's.
    static func decodePosition(_ payload: ByteBuffer) throws -> (restriction: PositionRestriction?, text: ByteBuffer) {
        let bytes = payload.readableBytesView
        guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) else { return (nil, payload) }
        let headerLength = newline - bytes.startIndex
        guard let head = payload.getSlice(at: payload.readerIndex, length: headerLength),
              let text = payload.getSlice(at: payload.readerIndex + headerLength + 1,
                                          length: payload.readableBytes - headerLength - 1),
              text.readableBytesView.first == UInt8(ascii: "{") else {
            throw DecodingError.malformed("a position without its event after the header")
        }
        return (try decodeRestriction(try parse(head)), text)
    }

    /// A restriction: `{"only": [names]}` or `{"allBut": [names]}`.
    static func encode(_ restriction: PositionRestriction) -> JSONValue {
        switch restriction {
        case .only(let names): .object([("only", .strings(names.sorted()))])
        case .allBut(let names): .object([("allBut", .strings(names.sorted()))])
        }
    }

    static func decodeRestriction(_ json: JSONValue) throws -> PositionRestriction {
        guard case .object(let members) = json, members.count == 1, case .array(let list) = members[0].1 else {
            throw DecodingError.malformed("a position restriction that is not one list")
        }
        let names = list.compactMap(\.stringValue)
        guard names.count == list.count else { throw DecodingError.malformed("a position restriction with a name that is not a string") }
        switch members[0].0 {
        case "only": return .only(Set(names))
        case "allBut": return .allBut(Set(names))
        default: throw DecodingError.malformed("a position restriction with \(members[0].0)")
        }
    }

    /// A walker's last positions (`LastPosition`): `{"position": p, "restriction": r, "unrestricted": p}`,
    /// each member absent when nil (`unrestricted` also when it is `position` itself).
    static func encode(_ last: LastPosition) -> JSONValue {
        var members: [(String, JSONValue)] = []
        if let latest = last.latest { members.append(("position", latest.json)) }
        if let restriction = last.restriction {
            members.append(("restriction", encode(restriction)))
            if let unrestricted = last.unrestricted { members.append(("unrestricted", unrestricted.json)) }
        }
        return .object(members)
    }

    static func decodeLastPosition(_ json: JSONValue) throws -> LastPosition {
        guard case .object = json else { throw DecodingError.malformed("last positions that are not an object") }
        func position(_ name: String) throws -> Position? {
            guard let value = json[name] else { return nil }
            guard case .object = value, let position = try? Position(from: value, now: 0) else {
                throw DecodingError.malformed("a bad \(name) in last positions")
            }
            return position
        }
        let restriction = try json["restriction"].map(decodeRestriction)
        return LastPosition(latest: try position("position"), restriction: restriction, unrestricted: try position("unrestricted"))
    }

    /// A request for a walker's last position (`hw.last.<walker>`), naming whom it is for.
    static func encodeLastPositionRequest(for askers: [String]) -> ByteBuffer {
        JSONWriter.encode(.object([("for", .strings(askers))]))
    }

    static func decodeLastPositionRequest(_ payload: ByteBuffer) throws -> [String] {
        guard case .array(let list)? = try parse(payload)["for"] else { throw DecodingError.malformed("a last-position request without for") }
        let askers = list.compactMap(\.stringValue)
        guard askers.count == list.count else { throw DecodingError.malformed("a last-position request with a name that is not a string") }
        return askers
    }

    static func encode(_ answer: LastPositionAnswer) -> ByteBuffer {
        JSONWriter.encode(.object([
            ("last", encode(answer.last)),
            ("hidden", .strings(answer.hiddenFrom.sorted())),
        ] + trailMember(answer.trail)))
    }

    static func decodeLastPositionAnswer(_ payload: ByteBuffer) throws -> LastPositionAnswer {
        let json = try parse(payload)
        guard case .array(let hidden)? = json["hidden"], let last = json["last"] else {
            throw DecodingError.malformed("a last-position answer without last or hidden")
        }
        let names = hidden.compactMap(\.stringValue)
        guard names.count == hidden.count else { throw DecodingError.malformed("a last-position answer with a name that is not a string") }
        var answer = LastPositionAnswer(last: try decodeLastPosition(last), hiddenFrom: Set(names))
        answer.trail = try json["trail"].map(decodeTrail)
        return answer
    }

    private static func parse(_ payload: ByteBuffer) throws -> JSONValue {
        do { return try JSONParser.parse(payload.readableBytesView) } catch {
            throw DecodingError.malformed("not JSON (\(error))")
        }
    }
}
