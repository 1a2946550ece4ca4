/// This relay's signed-in connections: which token each signed in with (by its hash), so that revoking a
/// token (or a reload that no longer finds it) closes them, and which of a user's connections signed in
/// first, so that a password login over the connection limit can make room by closing the oldest.
/// Kept by the relay's actor: `remember` at sign-in, `forget` when a connection goes.
struct SignedInTokens {
    private struct Connection {
        let sink: any ClientSink
        let tokenHash: String
        let username: String
        /// Sign-in order among all connections: smaller signed in earlier.
        let order: UInt64
    }

    private var connections: [ObjectIdentifier: Connection] = [:]
    private var byToken: [String: Set<ObjectIdentifier>] = [:]
    private var byUser: [String: Set<ObjectIdentifier>] = [:]
    private var nextOrder: UInt64 = 0

    /// `sink` is signed in as `username` with `hash` now (instead of any token it had before). Signing in
    /// again as the same user keeps the connection's place in the order.
    mutating func remember(_ hash: String, _ sink: any ClientSink, as username: String) {
        let id = ObjectIdentifier(sink)
        let order: UInt64
        if let known = connections[id], known.username == username {
            order = known.order
        } else {
            order = nextOrder
            nextOrder += 1
        }
        forget(sink)
        connections[id] = Connection(sink: sink, tokenHash: hash, username: username, order: order)
        byToken[hash, default: []].insert(id)
        byUser[username, default: []].insert(id)
    }

    mutating func forget(_ sink: any ClientSink) {
        let id = ObjectIdentifier(sink)
        guard let gone = connections.removeValue(forKey: id) else { return }
        byToken[gone.tokenHash]?.remove(id)
        if byToken[gone.tokenHash]?.isEmpty == true { byToken[gone.tokenHash] = nil }
        byUser[gone.username]?.remove(id)
        if byUser[gone.username]?.isEmpty == true { byUser[gone.username] = nil }
    }

    func connections(signedInWith hash: String) -> [any ClientSink] {
        (byToken[hash] ?? []).compactMap { connections[$0]?.sink }
    }

    /// The token hashes connections here signed in with.
    var tokenHashes: Dictionary<String, Set<ObjectIdentifier>>.Keys { byToken.keys }

    /// `username`'s connection that signed in first, other than `except`.
    func oldestConnection(of username: String, except: any ClientSink) -> (any ClientSink)? {
        let excluded = ObjectIdentifier(except)
        return (byUser[username] ?? []).lazy.filter { $0 != excluded }.compactMap { self.connections[$0] }
            .min { $0.order < $1.order }?.sink
    }
}
