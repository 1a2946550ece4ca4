import HomewardProtocol

/// The walk's trail on the relay: recorded by the fan-out (`PresenceTable`), shown in the replies that
/// start someone seeing a walk (an accept, a watch) and in `friend.trail`. When the walker is connected to
/// another relay, that relay's record comes with its answer to `hw.last` (`fetchLastPosition`), each point
/// with the restriction it was sent under, and is shown here by the same rule.
extension Relay {
    /// `walker`'s trail as `asker` (a username or a viewer key) may see it now.
    func trailForReply(of walker: String, shownTo asker: String) -> TrailInfo? {
        presence.trail(of: walker, shownTo: [asker], now: clock())
    }

    /// `friend.trail`: asks the walker's relay first when they are connected to another one.
    func friendTrail(_ walker: String, for user: String, now: Int64) async throws(RelayError) -> Outcome {
        let hidden = state.audience(of: walker).contains(user) ? await fetchLastPosition(of: walker, for: [user]) : []
        return try state.friendTrail(user, walker, presence: presence, now: now, hiddenElsewhere: !hidden.isEmpty)
    }
}
