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
        /// An owner's list of standing shares (only its members are recorded).
        case standing(String)
    }

    private var owners: [Entity: [String]] = [:]
    /// The other users a removed or replaced session, alarm, meeting point or list of standing shares named (invitees,
    /// recipients, list members), or whom a decision took off one: their slices held it, so the notice goes to them
    /// too (`RelayState.noticeUsers`), though the store's check does not name them.
    private var members: [Entity: [String]] = [:]

    mutating func note(_ entity: Entity, _ users: [String]) { owners[entity] = users }

    mutating func note(_ entity: Entity, members users: [String]) { members[entity, default: []] += users }

    subscript(entity: Entity) -> [String] { owners[entity] ?? [] }

    func members(of entity: Entity) -> [String] { members[entity] ?? [] }

    /// The owners of every push subscription removed (one of an endpoint subscribed again by another account).
    var pushSubscriptionOwners: [String] {
        owners.flatMap { entry -> [String] in
            if case .pushSubscription = entry.key { return entry.value }
            return []
        }
    }
}

extension RelayState {
    /// Records who owned an entity being removed, while a decision is recorded (`removedOwners` is not nil).
    mutating func noteRemoved(_ entity: RemovedOwners.Entity, _ users: String...) {
        removedOwners?.note(entity, users)
    }

    /// Records the other users an entity being removed or replaced named (or whom a decision takes off it), while a
    /// decision is recorded.
    mutating func noteRemoved(_ entity: RemovedOwners.Entity, members: [String]) {
        removedOwners?.note(entity, members: members)
    }
}
