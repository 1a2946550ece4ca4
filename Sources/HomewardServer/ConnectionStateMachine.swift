import HomewardCore
import HomewardProtocol
import NIOCore

/// The protocol logic of one client connection, as a value: every input (a request, a control frame,
/// a reply from the relay, a timer, the channel closing) returns what the handler must do, and no
/// I/O happens in here, so unit tests drive it directly. `WebSocketConnection` performs the actions.
/// (The shape follows NIO's `NIOTypedHTTPServerUpgraderStateMachine` and async-http-client's
/// `HTTP1ConnectionStateMachine`.)
///
/// The TLS handshake and HTTP upgrade happen before this exists (`HandshakeTimer` bounds them);
/// from then on a connection waits for sign-in, is signed in (and may sign out again), and closes.
/// A connection that sends `watch {token}` instead becomes a share link's viewer (protocol 1.1): it
/// only receives, every request it sends gets `forbidden`, and a failed `watch` closes it with 1008.
struct ConnectionStateMachine {
    /// What to do with one request now.
    enum RequestAction: Equatable {
        /// Nothing now: the request waits its turn, or the connection is closing.
        case none
        case replyOK(RequestID?)
        case replyError(ProtocolError, RequestID?)
        /// Fan the position out as `from` (the hot path, on this event loop), then answer `id`.
        case publish(Position, from: String, id: RequestID?)
        /// Hand the request to the relay; `served` takes its result.
        case serve(Request, auth: Authentication?, id: RequestID?)
    }

    /// What to do with the relay's answer to the request in flight.
    struct Served {
        /// The reply's members or its error; nil when the connection is closing and nothing is sent.
        var reply: Result<[(String, JSONValue)], ProtocolError>?
        /// Signed in by this request: stop the sign-in timer, release the unauthenticated slot.
        var signedIn = false
        /// Signed out by `logout`: the sign-in timer starts again.
        var signedOut = false
        var close: (code: CloseCode, reason: String)?
        /// The channel closed while this sign-in was with the relay: the relay must forget it again.
        var detach: Authentication?
        /// The same for a `watch` that succeeded after the channel closed: the viewer key to forget.
        var detachViewer: String?
    }

    enum ControlAction: Equatable {
        case none
        case close(CloseCode, String)
    }

    enum KeepaliveAction: Equatable {
        case none
        case ping
        case close(CloseCode, String)
    }

    /// Who the connection is signed in as: nil until a sign-in succeeds, and again after `logout`.
    /// Kept while closing, so that the relay is told to forget exactly this connection when it is gone.
    private(set) var auth: Authentication?
    /// Set once `watch` succeeds: the share link's viewer key (`ShareLink.viewerKey`). Never cleared
    /// before the channel closes (`channelClosed` hands it out once): a viewer stays a viewer.
    private(set) var viewer: String?
    /// A close frame went out or the channel is gone: nothing more is served.
    private(set) var isClosing = false
    /// A request is with the relay; its answer is still to come (`served`).
    var isServing: Bool { busy }
    /// A request is with the relay. Others wait in `waiting`, so replies come back in request order and
    /// a request sent right after `login` is served as the signed-in user.
    private var busy = false
    /// The request with the relay is a `watch`: its failure closes the connection.
    private var watching = false
    /// The viewer key to forget once the channel is gone (`viewerClosed`).
    private var closedViewer: String?
    // Requests only wait while another is being served, which most connections never see; the default
    // capacity (16) would be allocated for every idle connection. It doubles when it has to.
    private var waiting = CircularBuffer<IncomingRequest>(initialCapacity: 1)
    private var authFailures = 0
    private var requests: TokenBucket
    /// Pings and pongs from the client, limited apart from requests: answering a ping costs a write,
    /// and a client that floods them gets closed rather than answered.
    private var controlFrames: TokenBucket
    /// The payload of the latest ping not answered yet. RFC 6455 5.5.3 lets an endpoint answer only the
    /// most recent ping, so a burst of pings costs one pong.
    private var unansweredPing: ByteBuffer?
    private var lastHeard: NIODeadline
    private let limits: ConnectionLimits

    init(limits: ConnectionLimits, now: NIODeadline = .now()) {
        self.limits = limits
        requests = TokenBucket(rate: limits.requestsPerSecond, burst: limits.requestsPerSecond * 2, now: now)
        controlFrames = TokenBucket(rate: limits.controlFramesPerSecond, burst: limits.controlFramesPerSecond * 2, now: now)
        lastHeard = now
    }

    // MARK: Reading

    /// Any frame arrived: the connection is not idle.
    mutating func heard(at now: NIODeadline) {
        lastHeard = now
    }

    /// A text frame's request.
    mutating func received(_ request: IncomingRequest, now: NIODeadline) -> RequestAction {
        guard !isClosing else { return .none }
        guard requests.take(now: now) else { return .replyError(ProtocolError(.rateLimited, "too many requests; slow down"), request.id) }
        if busy {
            waiting.append(request)
            return .none
        }
        return start(request)
    }

    /// The next waiting request, once none is with the relay; nil when there is none to start.
    mutating func nextWaiting() -> RequestAction? {
        guard !busy, !isClosing, let next = waiting.popFirst() else { return nil }
        return start(next)
    }

    private mutating func start(_ incoming: IncomingRequest) -> RequestAction {
        // A viewer is read-only, whatever it sends (a malformed request included).
        if viewer != nil { return .replyError(ProtocolError(.forbidden, "a share-link viewer can only watch"), incoming.id) }
        let request: Request
        switch incoming.result {
        case .failure(let error): return .replyError(error, incoming.id)
        case .success(let parsed): request = parsed
        }
        switch request {
        case .watch where auth != nil:
            return .replyError(ProtocolError(.forbidden, "a signed-in connection cannot watch; open another connection"), incoming.id)
        case .ping:
            return .replyOK(incoming.id)
        case .position(let position):
            guard let auth else { return .replyError(ProtocolError(.unauthenticated, "sign in first"), incoming.id) }
            return .publish(position, from: auth.username, id: incoming.id)
        default:
            if auth == nil, !request.isAuthentication {
                return .replyError(ProtocolError(.unauthenticated, "sign in first: register, login or hello"), incoming.id)
            }
            busy = true
            if case .watch = request { watching = true }
            return .serve(request, auth: auth, id: incoming.id)
        }
    }

    /// The relay answered the request in flight.
    mutating func served(_ result: Result<RelayReply, RelayError>) -> Served {
        busy = false
        defer { watching = false }
        var served = Served()
        guard !isClosing else {
            // Gone while signing in: the relay attached this connection, so it must detach it again.
            if case .success(let reply) = result {
                switch reply.auth {
                case .authenticated(let auth): served.detach = auth
                case .watching(let viewerKey): served.detachViewer = viewerKey
                case .unchanged, .signedOut: break
                }
            }
            return served
        }
        switch result {
        case .success(let reply):
            switch reply.auth {
            case .unchanged: break
            case .authenticated(let auth):
                self.auth = auth
                authFailures = 0
                served.signedIn = true
            case .signedOut:
                auth = nil
                served.signedOut = true
            case .watching(let viewerKey):
                viewer = viewerKey
                // No sign-in is owed any more: the sign-in timer stops and the unauthenticated slot is freed.
                served.signedIn = true
            }
            served.reply = .success(reply.fields)
        case .failure(let error):
            served.reply = .failure(error.protocolError)
            if watching {
                // Unknown, expired or revoked token, or too many of those from this address: policy close.
                switch error {
                case .notFound, .rateLimited: served.close = (.policyViolation, "watch refused")
                default: break
                }
            }
            if case .unauthenticated = error {
                authFailures += 1
                if authFailures >= limits.maxAuthenticationFailures {
                    served.close = (.policyViolation, "too many failed sign-in attempts")
                }
            }
        }
        return served
    }

    /// Pings and pongs count against their own bucket; over it the connection is closed with 1008.
    mutating func receivedPing(_ payload: ByteBuffer, now: NIODeadline) -> ControlAction {
        guard !isClosing else { return .none }
        guard controlFrames.take(now: now) else { return .close(.policyViolation, "too many control frames") }
        // Replaces an unanswered ping: only the latest is answered.
        unansweredPing = payload
        return .none
    }

    mutating func receivedPong(now: NIODeadline) -> ControlAction {
        guard !isClosing else { return .none }
        guard controlFrames.take(now: now) else { return .close(.policyViolation, "too many control frames") }
        return .none
    }

    /// The pong owed, if the handler can write it now (nothing queued before it, the client reads).
    mutating func pongToWrite(canWrite: Bool) -> ByteBuffer? {
        guard canWrite, !isClosing, let payload = unansweredPing else { return nil }
        unansweredPing = nil
        return payload
    }

    /// The close code to answer a client's close frame with (RFC 6455 5.5.1, 7.4).
    static func closeCode(answering code: UInt16?, frameLength: Int, reasonIsUTF8: Bool) -> CloseCode {
        let valid: Bool
        if let code {
            switch code {
            case 1000...1003, 1007...1011, 3000...4999: valid = true
            default: valid = false
            }
        } else {
            valid = frameLength == 0
        }
        return !valid ? .protocolError : reasonIsUTF8 ? .normal : .invalidPayload
    }

    // MARK: Timers

    /// The sign-in deadline passed.
    func signInTimedOut() -> ControlAction {
        auth == nil && viewer == nil && !isClosing ? .close(.policyViolation, "not authenticated in time") : .none
    }

    /// Once per ping interval: ping the client, or close it when nothing was heard for the idle timeout.
    /// A client that does not read (`canWrite` false) gets no more bytes; the idle timeout ends it.
    func keepalive(now: NIODeadline, canWrite: Bool) -> KeepaliveAction {
        guard !isClosing else { return .none }
        if now - lastHeard > .nanoseconds(Int64(limits.idleTimeout * 1e9)) { return .close(.policyViolation, "idle for too long") }
        return canWrite ? .ping : .none
    }

    // MARK: Closing

    /// The handler starts closing; false when it already is.
    mutating func startClosing() -> Bool {
        guard !isClosing else { return false }
        isClosing = true
        unansweredPing = nil
        return true
    }

    /// The channel is gone: who the relay must forget now. A sign-in still with the relay is forgotten
    /// when it answers (`served` returns it as `detach`).
    mutating func channelClosed() -> Authentication? {
        defer { auth = nil }
        if viewer != nil { closedViewer = viewer }
        viewer = nil
        isClosing = true
        unansweredPing = nil
        waiting.removeAll()
        return auth
    }

    /// After `channelClosed`: the viewer key the relay must forget, once.
    mutating func viewerClosed() -> String? {
        defer { closedViewer = nil }
        return closedViewer
    }
}
