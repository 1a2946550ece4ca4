import HomewardCore
import HomewardProtocol
import NIOCore

/// How change notices and presence digests look on the bus: JSON objects, written with the relay's own
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

    /// A position for some only (`hw.pos.<walker>` of a walker with pauses): the audience as a JSON array of
    /// names, a newline, then the `pos` event's text. A plain position is the event's text alone (an object).
    static func encode(_ message: EncodedMessage, onlyTo audience: Set<String>) -> ByteBuffer {
        var payload = JSONWriter.encode(.strings(audience.sorted()))
        payload.writeInteger(UInt8(ascii: "\n"))
        var text = message.bytes
        payload.writeBuffer(&text)
        return payload
    }

    /// The audience and the event's text of a position for some only; nil for a plain position.
    static func restrictedPosition(_ payload: ByteBuffer) -> (audience: [String], text: ByteBuffer)? {
        guard payload.readableBytesView.first == UInt8(ascii: "["),
              let newline = payload.readableBytesView.firstIndex(of: UInt8(ascii: "\n")),
              let head = payload.getSlice(at: payload.readerIndex, length: newline - payload.readerIndex),
              case .array(let names)? = try? JSONParser.parse(head.readableBytesView),
              let text = payload.getSlice(at: newline + 1, length: payload.writerIndex - newline - 1) else { return nil }
        return (names.compactMap(\.stringValue), text)
    }

    private static func parse(_ payload: ByteBuffer) throws -> JSONValue {
        do { return try JSONParser.parse(payload.readableBytesView) } catch {
            throw DecodingError.malformed("not JSON (\(error))")
        }
    }
}
