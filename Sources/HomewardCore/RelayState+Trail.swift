import HomewardProtocol

/// The walk's trail (feature `trail`): the presence table records it with each position of an owner of an
/// active session (`SessionTrail`); these rules say who may be shown it. Each point keeps the restriction
/// its position was sent under, so a pause applies to the trail exactly as to live positions.
extension RelayState {
    /// `friend.trail`: the trail of `walker`'s active walk, for someone who receives their positions now (an
    /// observer, an alarm recipient, a friend they share with at all times). Otherwise `forbidden`, the same
    /// answer whether they do not share, paused, or are not a friend; `not_found` only for a username nobody
    /// has. `hiddenElsewhere`: the walker's relay says a pause hides them from the caller. The reply's trail
    /// is `null` when the walker has no active session, or no relay records one; it leaves out every point
    /// sent while a pause hid it from the caller.
    public func friendTrail(_ actor: String, _ walker: String, presence: some PresenceView, now: Int64,
                            hiddenElsewhere: Bool = false) throws(RelayError) -> Outcome {
        guard actor != walker else { throw .invalid("ask for a friend's trail, not your own") }
        try requireUser(walker)
        guard !hiddenElsewhere, audience(of: walker).contains(actor) else {
            throw .forbidden("\(walker) does not share their location with you")
        }
        var outcome = Outcome()
        let trail = sessionByOwner[walker] == nil ? nil : presence.trail(of: walker, shownTo: [actor], now: now)
        outcome.reply = FriendTrailReply(username: walker, trail: trail).fields
        return outcome
    }

    /// Whether a share-link viewer of `owner`'s walk may be shown its trail now: not while the owner is
    /// paused for everyone (viewers have no username to pause for).
    public func trailShownToViewers(of owner: String) -> Bool {
        pauses[owner]?[LocationPause.everyone] == nil
    }
}
