/// Who owned the entities a decision removed from the cache, so that its changes that name one only by id (a
/// session it ends, a token it revokes) can still be given their users once the entity is gone
/// (`RelayState.writeScope`).
///
/// Recorded only while a relay on a shared store decides (`Relay.recordingRemovals`), and emptied when the
/// next decision starts with none in flight: it holds what a few decisions removed, never the whole state.
/// (Keeping a copy of the state a decision started from would do the same, but every collection the decision
/// then changes would be copied whole: all tokens on a sign-in, 10,000 recently ended ids on a session's end.)
struct RemovedOwners: Sendable {
    enum Entity: Hashable, Sendable {
        case token(String), session(String), alarm(String), pushSubscription(String), share(String), meeting(String)
        case message(String)
    }

    private var owners: [Entity: [String]] = [:]

    mutating func note(_ entity: Entity, _ users: [String]) { owners[entity] = users }

    subscript(entity: Entity) -> [String] { owners[entity] ?? [] }
}

extension RelayState {
    /// Records who owned an entity being removed, while a decision is recorded (`removedOwners` is not nil).
    mutating func noteRemoved(_ entity: RemovedOwners.Entity, _ users: String...) {
        removedOwners?.note(entity, users)
    }
}
