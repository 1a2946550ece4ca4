/// Who a connection is signed in as, and with which token (kept as its hash for `logout`).
public struct Authentication: Sendable, Equatable {
    public let username: String
    public let tokenHash: String

    public init(username: String, tokenHash: String) {
        self.username = username
        self.tokenHash = tokenHash
    }
}

/// What the relay answers a request with: the reply's fields and how the connection's identity changed.
public struct RelayReply: Sendable {
    public enum AuthChange: Sendable, Equatable {
        case unchanged
        case authenticated(Authentication)
        case signedOut
        /// `watch` succeeded: the connection is now a read-only viewer, named `viewerKey` in the presence table.
        case watching(viewerKey: String)
    }

    public var fields: [(String, HomewardProtocol.JSONValue)]
    public var auth: AuthChange

    public init(_ fields: [(String, HomewardProtocol.JSONValue)] = [], auth: AuthChange = .unchanged) {
        self.fields = fields
        self.auth = auth
    }
}

import HomewardProtocol
