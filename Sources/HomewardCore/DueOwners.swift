/// Whose due work one firing does (`RelayState.fireDue`): the owners in the relay's timer shards (`TimerShards`) and,
/// when a storm of due work is fired in batches (`Relay.fireDueWork`), only the owners of one batch.
public struct DueOwners: Sendable {
    public var shards: TimerShards
    /// The owners of one batch; nil: every owner in `shards`.
    public var only: Set<String>?

    public init(shards: TimerShards = .all, only: Set<String>? = nil) {
        self.shards = shards
        self.only = only
    }

    /// Whether `owner`'s deadlines are fired by this firing.
    public func owns(_ owner: String) -> Bool {
        (only?.contains(owner) ?? true) && shards.owns(owner)
    }
}
