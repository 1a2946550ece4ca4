import HomewardCore
import HomewardProtocol
import NIOCore

/// How change notices and presence digests look on the bus: JSON objects, written with the relay's own
/// writer and read with its parser (depth-limited), so a bad message from the bus is refused, not trusted.
enum ClusterCodec {
    enum DecodingError: Error, CustomStringConvertible {
        case malformed(String)
        var description: String {
            switch self {
            case .malformed(let what): "malformed bus message: \(what)"
            }
        }
    }

    static func encode(_ notice: ChangeNotice) -> ByteBuffer {
        JSONWriter.encode(.object([
            ("node", .string(notice.node)),
            ("events", .array(notice.events.map { JSONValue.object([("to", .strings($0.recipients)), ("event", $0.message)]) })),
            ("closeViewers", .strings(notice.closeViewers)),
            ("revokedTokens", .strings(notice.revokedTokens)),
        ]))
    }

    static func decodeNotice(_ payload: ByteBuffer) throws -> ChangeNotice {
        let json = try parse(payload)
        guard let node = json.string("node") else { throw DecodingError.malformed("a notice without node") }
        var notice = ChangeNotice(node: node, closeViewers: json.array("closeViewers").compactMap(\.stringValue),
                                  revokedTokens: json.array("revokedTokens").compactMap(\.stringValue))
        for event in json.array("events") {
            guard case .array(let to)? = event["to"], let message = event["event"], case .object = message else {
                throw DecodingError.malformed("an event without to or event")
            }
            notice.events.append(.init(recipients: to.compactMap(\.stringValue), message: message))
        }
        return notice
    }

    static func encode(_ digest: PresenceDigest) -> ByteBuffer {
        JSONWriter.encode(.object([
            ("node", .string(digest.node)),
            ("online", .strings(digest.online)),
            ("full", .bool(digest.full)),
            ("lastSeen", .object(digest.lastSeen.map { ($0.key, JSONValue.int($0.value)) })),
            ("positions", .object(digest.positions.map { ($0.key, JSONValue.object($0.value.jsonMembers())) })),
        ]))
    }

    static func decodeDigest(_ payload: ByteBuffer) throws -> PresenceDigest {
        let json = try parse(payload)
        guard let node = json.string("node"), case .array(let online)? = json["online"] else {
            throw DecodingError.malformed("a digest without node or online")
        }
        var digest = PresenceDigest(node: node, online: online.compactMap(\.stringValue))
        if case .bool(let full)? = json["full"] { digest.full = full }
        if case .object(let members)? = json["lastSeen"] {
            for (username, time) in members { if case .int(let ms) = time { digest.lastSeen[username] = ms } }
        }
        if case .object(let members)? = json["positions"] {
            for (username, object) in members {
                if let position = try? Position(from: object, now: 0) { digest.positions[username] = position }
            }
        }
        return digest
    }

    private static func parse(_ payload: ByteBuffer) throws -> JSONValue {
        do { return try JSONParser.parse(payload.readableBytesView) } catch {
            throw DecodingError.malformed("not JSON (\(error))")
        }
    }
}
