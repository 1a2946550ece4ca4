/// Which of this relay's connections signed in with which token (by its hash), so that revoking a token
/// can close them. Kept by the relay's actor: `remember` at sign-in, `forget` when a connection goes.
struct SignedInTokens {
    private var connections: [String: [ObjectIdentifier: any ClientSink]] = [:]
    private var tokenOf: [ObjectIdentifier: String] = [:]

    /// `sink` is signed in with `hash` now (instead of any token it had before).
    mutating func remember(_ hash: String, _ sink: any ClientSink) {
        forget(sink)
        let id = ObjectIdentifier(sink)
        tokenOf[id] = hash
        connections[hash, default: [:]][id] = sink
    }

    mutating func forget(_ sink: any ClientSink) {
        let id = ObjectIdentifier(sink)
        guard let hash = tokenOf.removeValue(forKey: id) else { return }
        connections[hash]?[id] = nil
        if connections[hash]?.isEmpty == true { connections[hash] = nil }
    }

    func connections(signedInWith hash: String) -> [any ClientSink] {
        Array(connections[hash]?.values ?? [:].values)
    }
}
