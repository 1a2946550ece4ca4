/// The life of one server-side TLS connection as a value: the handler reports what happened (bytes
/// arrived, OpenSSL's answer to a handshake step or a read, a write, flush or close from above, the
/// TCP connection ending) and performs the action it gets back. No I/O here, so tests drive every
/// path without a channel or OpenSSL.
///
///     handshaking ──completed──▶ open ──close requested──▶ closing ──peer's close_notify / timeout──▶ closed
///          │                      │ peer's close_notify: answer it, close        ▲
///          └─failed / TCP gone─▶ closed ◀──failed / TCP gone─────────────────────┘
public struct TLSConnectionStateMachine: Sendable {
    public enum State: Equatable, Sendable {
        case handshaking
        case open
        /// This side sent `close_notify` and waits (bounded) for the peer's.
        case closing
        case closed
    }

    public enum Action: Equatable, Sendable {
        case none
        /// Give the bytes to OpenSSL and take the next handshake step.
        case stepHandshake
        /// Give the bytes to OpenSSL and decrypt the records they complete.
        case decrypt
        /// The session is over: drop the bytes.
        case discardInput
        /// Send the handshake messages OpenSSL wrote so far.
        case sendHandshakeBytes
        /// Send the handshake's last messages, announce it, then send the writes held back by a flush that
        /// came too early (`flushWrites`), then decrypt any application data that came with the client's Finished.
        case completeHandshake(flushWrites: Bool)
        /// Send the alert OpenSSL queued, report the error, fail held writes, close the channel.
        case fail(TLSConnectionError)
        /// Send whatever OpenSSL wrote while reading (session tickets, key updates).
        case sendPending
        /// The peer closed the session: send the held writes, answer with `close_notify`, close the channel.
        case answerCloseNotify
        /// The peer answered this side's `close_notify`: close the channel.
        case finishClose
        /// Hold the write until a flush.
        case holdWrite
        /// Encrypt the held writes and send them.
        case encryptAndSend
        /// Fail this write: the session is closed.
        case failWrite(TLSConnectionError)
        /// Encrypt and send the held writes, send `close_notify`, start waiting for the peer's.
        case beginClose
        /// Close the channel now, with no TLS goodbye (nothing was established, or waiting took too long).
        case closeChannel
        /// A close is under way: complete this close's promise with it.
        case joinClose
        /// The TCP connection ended: fail held writes, report the error if any, pass the end on.
        case connectionLost(TLSConnectionError?)
    }

    public enum HandshakeStep: Equatable, Sendable {
        case completed
        case wantsMoreBytes
        case failed(TLSConnectionError)
    }

    public enum ReadOutcome: Equatable, Sendable {
        case wantsMoreBytes
        case closeNotify
        case failed(TLSConnectionError)
    }

    public private(set) var state: State = .handshaking
    /// A flush came while handshaking: the held writes go out as soon as the handshake completes.
    private var flushDeferred = false

    public init() {}

    public mutating func bytesReceived() -> Action {
        switch state {
        case .handshaking: return .stepHandshake
        case .open, .closing: return .decrypt
        case .closed: return .discardInput
        }
    }

    public mutating func handshakeStepped(_ step: HandshakeStep) -> Action {
        guard state == .handshaking else { return .none }
        switch step {
        case .completed:
            state = .open
            let flush = flushDeferred
            flushDeferred = false
            return .completeHandshake(flushWrites: flush)
        case .wantsMoreBytes:
            return .sendHandshakeBytes
        case .failed(let error):
            state = .closed
            return .fail(error)
        }
    }

    public mutating func decrypted(_ outcome: ReadOutcome) -> Action {
        switch (state, outcome) {
        case (.open, .wantsMoreBytes), (.closing, .wantsMoreBytes):
            return .sendPending
        case (.open, .closeNotify):
            state = .closed
            return .answerCloseNotify
        case (.closing, .closeNotify):
            state = .closed
            return .finishClose
        case (.open, .failed(let error)), (.closing, .failed(let error)):
            state = .closed
            return .fail(error)
        case (.handshaking, _), (.closed, _):
            return .none
        }
    }

    public mutating func writeRequested() -> Action {
        switch state {
        case .handshaking, .open: return .holdWrite
        case .closing, .closed: return .failWrite(.closed)
        }
    }

    public mutating func flushRequested() -> Action {
        switch state {
        case .handshaking:
            flushDeferred = true
            return .none
        case .open: return .encryptAndSend
        case .closing, .closed: return .none
        }
    }

    public mutating func closeRequested() -> Action {
        switch state {
        case .handshaking:
            state = .closed
            return .closeChannel
        case .open:
            state = .closing
            return .beginClose
        case .closing: return .joinClose
        case .closed: return .closeChannel
        }
    }

    public mutating func closeTimedOut() -> Action {
        guard state == .closing else { return .none }
        state = .closed
        return .closeChannel
    }

    public mutating func channelInactive() -> Action {
        let previous = state
        state = .closed
        switch previous {
        case .handshaking: return .connectionLost(.closedDuringHandshake)
        case .open: return .connectionLost(.uncleanShutdown)
        case .closing, .closed: return .connectionLost(nil)
        }
    }
}
