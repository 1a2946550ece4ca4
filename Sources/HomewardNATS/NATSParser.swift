import Foundation
import NIOCore

/// One protocol message from the server.
public enum NATSServerOp: Sendable, Equatable {
    case info(NATSServerInfo)
    case message(NATSMessage)
    case ping
    case pong
    case ok
    /// `-ERR 'text'`, with the quotes removed.
    case error(String)
}

/// Streaming parser of what a NATS server sends. Bytes come in chunks that need not align with
/// protocol messages (TCP segments, WebSocket frames): `append` them, then call `next()` until nil.
/// A `MSG` payload is taken by its byte count, never by searching for CRLF, so payloads may contain
/// CRLF. No I/O here, so tests feed it any split of the stream.
public struct NATSParser: Sendable {
    /// A control line longer than this without its CRLF is an error (the server's own limit is 4 KiB;
    /// INFO with many cluster URLs can be longer).
    public var maxControlLine: Int
    /// A `MSG` announcing a larger payload is an error before any of it is buffered.
    public var maxPayload: Int

    private var buffer = ByteBuffer()
    /// Readable bytes already searched for a newline without finding one.
    private var scanned = 0
    /// The control line of a `MSG`/`HMSG` whose payload has not fully arrived.
    private var pendingMessage: PendingMessage?

    private struct PendingMessage {
        var subject: String
        var subscriptionID: UInt64
        var replyTo: String?
        var headerBytes: Int
        var totalBytes: Int
    }

    public init(maxControlLine: Int = 64 * 1024, maxPayload: Int = 64 * 1024 * 1024) {
        self.maxControlLine = maxControlLine
        self.maxPayload = maxPayload
    }

    /// Bytes received but not yet returned as messages.
    public var bufferedBytes: Int { buffer.readableBytes }

    public mutating func append(_ bytes: ByteBuffer) {
        if buffer.readableBytes == 0 {
            // Adopt the chunk instead of copying it: the common case of whole messages per read.
            buffer = bytes
        } else {
            var bytes = bytes
            buffer.writeBuffer(&bytes)
        }
    }

    /// The next complete message, or nil until more bytes arrive. After an error the stream is unusable.
    public mutating func next() throws(NATSError) -> NATSServerOp? {
        if pendingMessage == nil {
            guard let line = nextLine() else {
                if buffer.readableBytes > maxControlLine { throw .protocolError("control line longer than \(maxControlLine) bytes") }
                return nil
            }
            if let op = try parseControlLine(line) { return op }
        }
        return try nextPayload()
    }

    /// The next line without its CR LF, consumed from the buffer.
    private mutating func nextLine() -> ByteBuffer? {
        let view = buffer.readableBytesView
        guard let newline = view.dropFirst(scanned).firstIndex(of: UInt8(ascii: "\n")) else {
            scanned = view.count
            return nil
        }
        scanned = 0
        let length = newline - view.startIndex
        var line = buffer.readSlice(length: length)!
        buffer.moveReaderIndex(forwardBy: 1)
        if line.readableBytesView.last == UInt8(ascii: "\r") { line.moveWriterIndex(to: line.writerIndex - 1) }
        return line
    }

    /// Returns the message for every line except `MSG`/`HMSG`, whose payload `nextPayload` reads.
    private mutating func parseControlLine(_ line: ByteBuffer) throws(NATSError) -> NATSServerOp? {
        let fields = Self.fields(of: line)
        guard let first = fields.first else { throw .protocolError("empty control line") }
        switch Self.operation(first) {
        case "MSG":
            // MSG <subject> <sid> [reply-to] <#bytes>
            guard fields.count == 4 || fields.count == 5 else { throw .protocolError("malformed MSG: \(String(buffer: line))") }
            let size = try Self.number(fields[fields.count - 1], in: line)
            pendingMessage = PendingMessage(subject: String(buffer: fields[1]), subscriptionID: try Self.number(fields[2], in: line),
                                            replyTo: fields.count == 5 ? String(buffer: fields[3]) : nil,
                                            headerBytes: 0, totalBytes: try checkedSize(size))
            return nil
        case "HMSG":
            // HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>
            guard fields.count == 5 || fields.count == 6 else { throw .protocolError("malformed HMSG: \(String(buffer: line))") }
            let headerBytes = try Self.number(fields[fields.count - 2], in: line)
            let total = try checkedSize(try Self.number(fields[fields.count - 1], in: line))
            guard headerBytes <= UInt64(total) else { throw .protocolError("HMSG header size exceeds total: \(String(buffer: line))") }
            pendingMessage = PendingMessage(subject: String(buffer: fields[1]), subscriptionID: try Self.number(fields[2], in: line),
                                            replyTo: fields.count == 6 ? String(buffer: fields[3]) : nil,
                                            headerBytes: Int(headerBytes), totalBytes: total)
            return nil
        case "PING": return .ping
        case "PONG": return .pong
        case "+OK": return .ok
        case "-ERR":
            var text = line
            text.moveReaderIndex(forwardBy: 4)
            let message = String(buffer: text).trimmingCharacters(in: .whitespaces)
            return .error(message.count >= 2 && message.hasPrefix("'") && message.hasSuffix("'") ? String(message.dropFirst().dropLast()) : message)
        case "INFO":
            var json = line
            json.moveReaderIndex(forwardBy: 4)
            do {
                return .info(try JSONDecoder().decode(NATSServerInfo.self, from: Data(json.readableBytesView)))
            } catch {
                throw .protocolError("INFO is not a JSON object: \(error)")
            }
        default:
            throw .protocolError("unknown operation '\(String(buffer: first).uppercased().prefix(32))'")
        }
    }

    /// The operations there are, spelled as the protocol does; the server may send them in any case.
    private static let operations = ["MSG", "HMSG", "PING", "PONG", "+OK", "-ERR", "INFO"]

    /// The operation `field` names, uppercase, or "" for none. Byte by byte, so that reading a `MSG` (one per
    /// position a relay hears) does not make a `String` of the field and an uppercased copy of it. (These are
    /// small strings, held inline, so returning one allocates nothing.)
    static func operation(_ field: ByteBuffer) -> String {
        let bytes = field.readableBytesView
        for operation in operations where operation.utf8.count == bytes.count {
            let matches = zip(operation.utf8, bytes).allSatisfy { expected, byte in
                byte == expected || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") && byte - 32 == expected)
            }
            if matches { return operation }
        }
        return ""
    }

    private func checkedSize(_ size: UInt64) throws(NATSError) -> Int {
        guard size <= UInt64(maxPayload) else { throw .protocolError("payload of \(size) bytes exceeds the limit of \(maxPayload)") }
        return Int(size)
    }

    private mutating func nextPayload() throws(NATSError) -> NATSServerOp? {
        guard let pending = pendingMessage else { return nil }
        guard buffer.readableBytes >= pending.totalBytes + 2 else { return nil }
        let headers = pending.headerBytes > 0 ? buffer.readSlice(length: pending.headerBytes) : nil
        let payload = buffer.readSlice(length: pending.totalBytes - pending.headerBytes)!
        guard buffer.readInteger(as: UInt8.self) == UInt8(ascii: "\r"), buffer.readInteger(as: UInt8.self) == UInt8(ascii: "\n") else {
            throw .protocolError("payload of \(pending.subject) not followed by CRLF")
        }
        pendingMessage = nil
        if buffer.readableBytes == 0 { buffer = ByteBuffer() }
        return .message(NATSMessage(subject: pending.subject, subscriptionID: pending.subscriptionID, replyTo: pending.replyTo,
                                    headers: headers, payload: payload))
    }

    /// Fields separated by runs of spaces or tabs.
    static func fields(of line: ByteBuffer) -> [ByteBuffer] {
        var fields: [ByteBuffer] = []
        let view = line.readableBytesView
        var start: Int?
        for index in view.indices {
            let byte = view[index]
            if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                if let begin = start { fields.append(line.getSlice(at: begin, length: index - begin)!) }
                start = nil
            } else if start == nil {
                start = index
            }
        }
        if let begin = start { fields.append(line.getSlice(at: begin, length: view.endIndex - begin)!) }
        return fields
    }

    /// A decimal field; at most 18 digits so that it cannot overflow.
    static func number(_ field: ByteBuffer, in line: ByteBuffer) throws(NATSError) -> UInt64 {
        let digits = field.readableBytesView
        guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
            throw .protocolError("expected a number, got '\(String(buffer: field))' in '\(String(buffer: line))'")
        }
        return digits.reduce(0) { $0 * 10 + UInt64($1 - 48) }
    }
}
