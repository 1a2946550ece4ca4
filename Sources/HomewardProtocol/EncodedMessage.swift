import NIOCore

/// A message serialised once, ready to be written to any number of connections.
public struct EncodedMessage: Sendable {
    public let bytes: ByteBuffer
    /// Set for a `pos` event: the sender, so that a newer position from them may replace this one in a slow queue.
    public let positionFrom: String?
    /// The `type` member, for metrics.
    public let type: String

    public init(_ message: JSONValue, positionFrom: String? = nil) {
        self.bytes = JSONWriter.encode(message)
        self.positionFrom = positionFrom
        self.type = message["type"]?.stringValue ?? "unknown"
    }
}
