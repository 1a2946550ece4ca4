import HomewardProtocol

/// Blocking: a user can stop another from reaching them with friend requests, without the other
/// being able to tell (a blocked user's requests get the answers an ignored request would get).
extension RelayState {
    public static let blockLimit = 1000

    /// Blocks `other`: ends a friendship (as `friend.remove` would, so `other` is told it was removed,
    /// not that it was blocked, and their meeting points and unread messages end), withdraws the blocker's
    /// own pending request and hides `other`'s.
    public mutating func block(_ actor: String, _ other: String, now: Int64) throws(RelayError) -> Outcome {
        guard actor != other else { throw .invalid("you cannot block yourself") }
        try requireUser(other)
        guard !hasBlocked(actor, other) else { return Outcome() }
        guard (blocked[actor]?.count ?? 0) < Self.blockLimit else {
            throw .rateLimited("you have blocked \(Self.blockLimit) users; unblock some first")
        }
        var outcome = areFriends(actor, other) ? try removeFriend(actor, other) : Outcome()
        // Also when they are not friends (any more): nothing of theirs to each other may stay.
        endMeetingsAndMessages(actor, other, into: &outcome)
        dropRequest(from: actor, to: other, into: &outcome)
        // Their request stays on their side (it looks pending to them); it leaves the blocker's list.
        incoming[actor]?.remove(other)
        blocked[actor, default: []].insert(other)
        outcome.changes.append(.addBlock(blocker: actor, blocked: other, at: now))
        outcome.reply = []
        return outcome
    }

    /// Unblocks `other`. A request they sent while blocked becomes visible (without an event).
    public mutating func unblock(_ actor: String, _ other: String) throws(RelayError) -> Outcome {
        guard actor != other else { throw .invalid("you cannot block yourself") }
        try requireUser(other)
        guard blocked[actor]?.remove(other) != nil else { throw .notFound("\(other) is not blocked") }
        if outgoing[other]?.contains(actor) ?? false { incoming[actor, default: []].insert(other) }
        var outcome = Outcome()
        outcome.changes.append(.removeBlock(blocker: actor, blocked: other))
        return outcome
    }

    public func blockList(_ actor: String) -> Outcome {
        var outcome = Outcome()
        // The same shape as a search's reply: `users`.
        outcome.reply = UserSearchReply(users: (blocked[actor] ?? []).sorted().map(profile)).fields
        return outcome
    }
}
