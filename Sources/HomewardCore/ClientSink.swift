import HomewardProtocol

/// One client connection as the core sees it: somewhere to send messages.
///
/// Implementations must be cheap to call from any thread and must keep the order of calls.
public protocol ClientSink: AnyObject, Sendable {
    func send(_ message: EncodedMessage)
    /// Closes the connection with a WebSocket close code.
    func close(_ code: CloseCode, reason: String)
}
