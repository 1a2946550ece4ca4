import NIOCore

/// A message serialised once, ready to be written to any number of connections.
public struct EncodedMessage: Sendable {
    /// The same text as one unmasked, final WebSocket text frame (RFC 6455 section 5.2). A relay's
    /// frames are the same for every recipient, so a fan-out frames once and every connection
    /// writes these very bytes, header and payload in one buffer: one TLS record per delivery.
    public let framed: ByteBuffer
    /// Set for a `pos` event: the sender, so that a newer position from them may replace this one in a slow queue.
    public let positionFrom: String?
    /// The `type` member, for metrics.
    public let type: String
    private let headerLength: Int

    /// The JSON text: `framed` without its header, sharing its storage.
    public var bytes: ByteBuffer {
        framed.getSlice(at: framed.readerIndex + headerLength, length: framed.readableBytes - headerLength)!
    }

    public init(_ message: JSONValue, positionFrom: String? = nil) {
        let payload = JSONWriter.encode(message)
        self.framed = Self.textFrame(payload)
        self.headerLength = framed.readableBytes - payload.readableBytes
        self.positionFrom = positionFrom
        self.type = message["type"]?.stringValue ?? "unknown"
    }

    /// A message that is already JSON text (encoded once elsewhere, such as by another relay), framed here.
    /// The caller vouches that `payload` is the JSON of a message of type `type`.
    public init(jsonText payload: ByteBuffer, type: String, positionFrom: String? = nil) {
        self.framed = Self.textFrame(payload)
        self.headerLength = framed.readableBytes - payload.readableBytes
        self.positionFrom = positionFrom
        self.type = type
    }

    static func textFrame(_ payload: ByteBuffer) -> ByteBuffer {
        let length = payload.readableBytes
        var frame = ByteBuffer()
        frame.reserveCapacity(length + 10)
        frame.writeInteger(UInt8(0x81))  // FIN, text
        if length < 126 {
            frame.writeInteger(UInt8(length))
        } else if length <= Int(UInt16.max) {
            frame.writeInteger(UInt8(126))
            frame.writeInteger(UInt16(length))
        } else {
            frame.writeInteger(UInt8(127))
            frame.writeInteger(UInt64(length))
        }
        frame.writeImmutableBuffer(payload)
        return frame
    }
}
