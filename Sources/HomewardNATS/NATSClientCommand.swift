import Foundation
import NIOCore

/// What the client sends in `CONNECT`. `verbose` and `pedantic` stay off (no `+OK` per message),
/// and so do headers: this client neither sends nor asks for them.
public struct NATSConnectOptions: Sendable, Equatable, Encodable {
    public var verbose = false
    public var pedantic = false
    public var tlsRequired = false
    public var headers = false
    public var name: String?
    public var lang = "swift"
    public var version = "homeward"
    /// 1: the server may send INFO again later (cluster changes); the parser accepts it at any time.
    public var `protocol` = 1
    public var echo = true
    public var user: String?
    public var pass: String?

    public init(name: String? = nil, user: String? = nil, pass: String? = nil) {
        self.name = name
        self.user = user
        self.pass = pass
    }

    enum CodingKeys: String, CodingKey {
        case verbose, pedantic, headers, name, lang, version, `protocol`, echo, user, pass
        case tlsRequired = "tls_required"
    }
}

/// One protocol message from the client, written into a buffer with `write(into:)`.
public enum NATSClientCommand: Sendable, Equatable {
    case connect(NATSConnectOptions)
    case publish(subject: String, replyTo: String?, payload: ByteBuffer)
    case subscribe(subject: String, queueGroup: String?, subscriptionID: UInt64)
    /// With `maxMessages` the server removes the subscription after that many messages in total.
    case unsubscribe(subscriptionID: UInt64, maxMessages: Int?)
    case ping
    case pong

    public func write(into buffer: inout ByteBuffer) {
        switch self {
        case .connect(let options):
            buffer.writeStaticString("CONNECT ")
            // JSONEncoder cannot fail on this struct of strings, numbers and booleans.
            buffer.writeBytes(try! JSONEncoder().encode(options))
            buffer.writeStaticString("\r\n")
        case .publish(let subject, let replyTo, let payload):
            // Field by field rather than `writeLine`: a relay writes one for every position it publishes.
            buffer.writeStaticString("PUB ")
            buffer.writeString(subject)
            if let replyTo {
                buffer.writeInteger(UInt8(ascii: " "))
                buffer.writeString(replyTo)
            }
            buffer.writeInteger(UInt8(ascii: " "))
            buffer.writeString(String(payload.readableBytes))
            buffer.writeStaticString("\r\n")
            buffer.writeImmutableBuffer(payload)
            buffer.writeStaticString("\r\n")
        case .subscribe(let subject, let queueGroup, let id):
            Self.writeLine(["SUB", subject, queueGroup, String(id)], into: &buffer)
        case .unsubscribe(let id, let maxMessages):
            Self.writeLine(["UNSUB", String(id), maxMessages.map(String.init)], into: &buffer)
        case .ping:
            buffer.writeStaticString("PING\r\n")
        case .pong:
            buffer.writeStaticString("PONG\r\n")
        }
    }

    /// A control line: the fields that are present, separated by one space, then CRLF.
    private static func writeLine(_ fields: [String?], into buffer: inout ByteBuffer) {
        var first = true
        for case let field? in fields {
            if !first { buffer.writeInteger(UInt8(ascii: " ")) }
            buffer.writeString(field)
            first = false
        }
        buffer.writeStaticString("\r\n")
    }

    /// The command in a buffer of its own.
    public func encoded(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var size = 16
        if case .publish(let subject, let replyTo, let payload) = self {
            size += subject.utf8.count + (replyTo?.utf8.count ?? 0) + payload.readableBytes + 24
        }
        var buffer = allocator.buffer(capacity: size)
        write(into: &buffer)
        return buffer
    }
}
