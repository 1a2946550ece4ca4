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
///
/// The phase is one enum (`State`) whose cases carry what only they have: who is signed in, the viewer
/// key, whether a request is with the relay and of which kind, whom to forget once closed. So a viewer
/// that is also signed in, or a closed connection that still serves, cannot be written. What every open
/// phase shares (rate limits, the requests waiting, the pong owed, idle time) is kept beside it.
/// An input that cannot happen in a phase (an answer with no request in flight) is a bug in the handler
/// or the relay, and stops the process, as NIO's state machines do.
///
///     awaitingSignIn ──sign-in──▶ signedIn ──logout──▶ awaitingSignIn
///     awaitingSignIn ──watch────▶ viewing
///     any open phase ──close frame──▶ closing ──channel gone──▶ closed
///     any open phase ──channel gone──▶ closed
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
        /// The connection started closing while this sign-in or `watch` was with the relay, which attached
        /// the connection anyway: the relay must forget it again, now.
        var detach: Identity?
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

    /// Whom the relay holds this connection under, and must be told to forget when it is gone.
    enum Identity: Equatable {
        case user(Authentication)
        /// A share link's viewer, by its viewer key (`ShareLink.viewerKey`).
        case viewer(key: String)

        /// The name the relay attached the connection under (`Relay.disconnect` takes it).
        var key: String {
            switch self {
            case .user(let auth): auth.username
            case .viewer(let key): key
            }
        }
    }

    /// The kind of request with the relay before sign-in: its answer decides the phase that follows.
    enum SignInRequest: Equatable {
        /// `register`, `login` or `hello`: answered with `.authenticated`.
        case signIn
        /// `watch`: answered with `.watching`; its failure closes the connection.
        case watch
    }

    /// The connection's phase, each with what only it has. At most one request is with the relay at a time
    /// (`serving`); the others wait in `waiting`, so replies come back in request order and a request sent
    /// right after `login` is served as the signed-in user.
    enum State: Equatable {
        /// Not signed in: from the upgrade on, and again after `logout`. Only `register`, `login`, `hello`,
        /// `watch` and `ping` are served; the sign-in timer runs.
        case awaitingSignIn(serving: SignInRequest?)
        case signedIn(Authentication, serving: Bool)
        /// A share link's viewer (protocol 1.1): it only receives and every request it sends is refused, so
        /// nothing is ever with the relay. A viewer stays a viewer until the connection ends.
        case viewing(viewerKey: String)
        /// A close frame went out; the channel is still open. Nothing more is served. The identity is kept so
        /// that the relay is told to forget exactly this connection when the channel is gone (unless a
        /// sign-out or sign-in answered meanwhile changed whom the relay holds: see `served`).
        case closing(Identity?, serving: Bool)
        /// The channel is gone and the relay was told to forget the identity. A request still `serving`
        /// is undone when its answer comes (`served` returns what it attached as `detach`).
        case closed(serving: Bool)
    }

    private(set) var state: State = .awaitingSignIn(serving: nil)

    /// Who the connection is signed in as: nil until a sign-in succeeds, and again after `logout`.
    /// Kept while closing, until the channel is gone.
    var auth: Authentication? {
        switch state {
        case .signedIn(let auth, _), .closing(.user(let auth)?, _): auth
        case .awaitingSignIn, .viewing, .closing, .closed: nil
        }
    }

    /// The share link's viewer key once `watch` succeeded; kept while closing, until the channel is gone.
    var viewer: String? {
        switch state {
        case .viewing(let key), .closing(.viewer(let key)?, _): key
        case .awaitingSignIn, .signedIn, .closing, .closed: nil
        }
    }

    /// A close frame went out or the channel is gone: nothing more is served.
    var isClosing: Bool {
        switch state {
        case .awaitingSignIn, .signedIn, .viewing: false
        case .closing, .closed: true
        }
    }

    /// A request is with the relay; its answer is still to come (`served`).
    var isServing: Bool {
        switch state {
        case .awaitingSignIn(let serving): serving != nil
        case .signedIn(_, let serving), .closing(_, let serving), .closed(let serving): serving
        case .viewing: false
        }
    }

    // The open phases' shared resources; `channelClosed` empties what is left.
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
        if isServing {
            waiting.append(request)
            return .none
        }
        return start(request)
    }

    /// The next waiting request, once none is with the relay; nil when there is none to start.
    mutating func nextWaiting() -> RequestAction? {
        guard !isServing, !isClosing, let next = waiting.popFirst() else { return nil }
        return start(next)
    }

    /// Starts a request while none is with the relay and the connection is open.
    private mutating func start(_ incoming: IncomingRequest) -> RequestAction {
        let auth: Authentication?
        switch state {
        case .awaitingSignIn(serving: nil): auth = nil
        case .signedIn(let signedIn, serving: false): auth = signedIn
        // A viewer is read-only, whatever it sends (a malformed request included).
        case .viewing: return .replyError(ProtocolError(.forbidden, "a share-link viewer can only watch"), incoming.id)
        case .awaitingSignIn(serving: .some), .signedIn(_, serving: true), .closing, .closed:
            preconditionFailure("a request started while another is with the relay or the connection is closing")
        }
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
            if let auth {
                state = .signedIn(auth, serving: true)
            } else {
                guard request.isAuthentication else {
                    return .replyError(ProtocolError(.unauthenticated, "sign in first: register, login or hello"), incoming.id)
                }
                if case .watch = request { state = .awaitingSignIn(serving: .watch) } else { state = .awaitingSignIn(serving: .signIn) }
            }
            return .serve(request, auth: auth, id: incoming.id)
        }
    }

    /// The relay answered the request in flight.
    mutating func served(_ result: Result<RelayReply, RelayError>) -> Served {
        switch state {
        case .awaitingSignIn(serving: let request?):
            state = .awaitingSignIn(serving: nil)
            return servedOpen(result, watch: request == .watch)
        case .signedIn(let auth, serving: true):
            state = .signedIn(auth, serving: false)
            return servedOpen(result, watch: false)
        case .closing(var identity, serving: true):
            if case .success(let reply) = result, reply.auth != .unchanged {
                // A sign-out, or a sign-in (which detaches whom the connection was signed in as), answered
                // while closing: `detach` covers whom the relay attached, and nobody is left to forget later.
                identity = nil
            }
            state = .closing(identity, serving: false)
            return servedWhileClosing(result)
        case .closed(serving: true):
            state = .closed(serving: false)
            return servedWhileClosing(result)
        case .awaitingSignIn(serving: nil), .signedIn(_, serving: false), .viewing, .closing(_, serving: false), .closed(serving: false):
            preconditionFailure("an answer from the relay without a request with it")
        }
    }

    /// `served` while the connection is open; `state` no longer has a request with the relay.
    private mutating func servedOpen(_ result: Result<RelayReply, RelayError>, watch: Bool) -> Served {
        var served = Served()
        switch result {
        case .success(let reply):
            switch (reply.auth, state) {
            case (.unchanged, _):
                break
            case (.authenticated(let auth), .awaitingSignIn), (.authenticated(let auth), .signedIn):
                state = .signedIn(auth, serving: false)
                authFailures = 0
                served.signedIn = true
            case (.signedOut, .awaitingSignIn), (.signedOut, .signedIn):
                state = .awaitingSignIn(serving: nil)
                served.signedOut = true
            case (.watching(let viewerKey), .awaitingSignIn) where watch:
                state = .viewing(viewerKey: viewerKey)
                // No sign-in is owed any more: the sign-in timer stops and the unauthenticated slot is freed.
                served.signedIn = true
            case (.authenticated, _), (.signedOut, _), (.watching, _):
                preconditionFailure("the relay answered with \(reply.auth) in \(state)")
            }
            served.reply = .success(reply.fields)
        case .failure(let error):
            served.reply = .failure(error.protocolError)
            if watch {
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

    /// `served` once the connection is closing or gone: no reply; what the relay attached is undone.
    private func servedWhileClosing(_ result: Result<RelayReply, RelayError>) -> Served {
        var served = Served()
        if case .success(let reply) = result {
            switch reply.auth {
            case .authenticated(let auth): served.detach = .user(auth)
            case .watching(let viewerKey): served.detach = .viewer(key: viewerKey)
            case .unchanged, .signedOut: break
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
        if case .awaitingSignIn = state { return .close(.policyViolation, "not authenticated in time") }
        return .none
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
        switch state {
        case .awaitingSignIn(let serving): state = .closing(nil, serving: serving != nil)
        case .signedIn(let auth, let serving): state = .closing(.user(auth), serving: serving)
        case .viewing(let viewerKey): state = .closing(.viewer(key: viewerKey), serving: false)
        case .closing, .closed: return false
        }
        unansweredPing = nil
        return true
    }

    /// The channel is gone: whom the relay must forget now, once. A sign-in still with the relay is
    /// forgotten when it answers (`served` returns it as `detach`).
    mutating func channelClosed() -> Identity? {
        let identity: Identity?
        switch state {
        case .awaitingSignIn(let serving):
            identity = nil
            state = .closed(serving: serving != nil)
        case .signedIn(let auth, let serving):
            identity = .user(auth)
            state = .closed(serving: serving)
        case .viewing(let viewerKey):
            identity = .viewer(key: viewerKey)
            state = .closed(serving: false)
        case .closing(let kept, let serving):
            identity = kept
            state = .closed(serving: serving)
        case .closed:
            return nil
        }
        unansweredPing = nil
        waiting.removeAll()
        return identity
    }
}
