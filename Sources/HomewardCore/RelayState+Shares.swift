import HomewardProtocol

/// Share links (protocol 1.1): an owner lets people without an account watch their active session.
///
/// A link's viewers are named by `ShareLink.viewerKey` in events and in the owner's audience, so
/// positions reach them by the same fan-out as observers, and events by the same delivery.
extension RelayState {
    /// Live links one session may have at once; more is `rate_limited`.
    public static let sharesPerSession = 20

    /// `share.create`: `token` was minted by the caller (randomness stays out of the rules); only its
    /// hash is kept. The link lives `ttl` seconds (default 7200), never past the session's own end.
    public mutating func createShare(_ actor: String, _ sessionId: String, ttl: Int64?, token: String,
                                     now: Int64) throws(RelayError) -> Outcome {
        guard let session = sessions[sessionId] else { throw .notFound("no active session \(sessionId)") }
        guard session.owner == actor else { throw .forbidden("only the owner can share a session") }
        let seconds = ttl ?? shareSettings.defaultTTL
        guard (shareSettings.minimumTTL...shareSettings.maximumTTL).contains(seconds) else {
            throw .invalid("ttl must be \(shareSettings.minimumTTL) to \(shareSettings.maximumTTL) seconds")
        }
        guard (sharesBySession[sessionId]?.count ?? 0) < Self.sharesPerSession else {
            throw .rateLimited("a session has at most \(Self.sharesPerSession) live share links; revoke one first")
        }
        var expiresAt = now + seconds * 1000
        if let sessionEnd = session.expiresAt { expiresAt = min(expiresAt, sessionEnd) }
        let share = ShareLink(id: makeID("sh_"), sessionId: sessionId, owner: actor, tokenHash: Token.hash(token),
                              createdAt: now, expiresAt: expiresAt)
        index(share)
        var outcome = Outcome()
        outcome.changes.append(.saveShare(share))
        outcome.audienceChanged.insert(actor)
        outcome.reply = ShareCreateReply(share: ShareInfo(id: share.id, sessionId: sessionId, createdAt: now, expiresAt: expiresAt,
                                                          token: token, url: shareSettings.url(for: token))).fields
        return outcome
    }

    /// `share.list`: the caller's live links, oldest first, without tokens.
    public func listShares(_ actor: String, now: Int64) -> Outcome {
        var outcome = Outcome()
        let mine = shares.values.filter { $0.owner == actor && $0.expiresAt > now }
            .sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
        outcome.reply = ShareListReply(shares: mine.map(\.info)).fields
        return outcome
    }

    /// `share.revoke`: the link stops working; its viewers get `session.ended` "revoked" and are closed.
    public mutating func revokeShare(_ actor: String, _ shareId: String) throws(RelayError) -> Outcome {
        guard let share = shares[shareId] else { throw .notFound("no live share link \(shareId)") }
        guard share.owner == actor else { throw .forbidden("only the owner can revoke a share link") }
        return endShare(shareId, reason: "revoked")
    }

    /// `watch`: the link whose token hashes to `tokenHash`, and the reply its viewer gets. Unknown,
    /// expired and revoked tokens get the same `not_found`, so a viewer cannot tell which it was.
    /// `hiddenElsewhere`: the owner's relay says a pause from everyone hides them (`Relay.fetchLastPosition`).
    public func watch(tokenHash: String, now: Int64, presence: some PresenceView,
                      hiddenElsewhere: Bool = false) throws(RelayError) -> (ShareLink, WatchReply) {
        guard let id = sharesByHash[tokenHash], let share = shares[id], share.expiresAt > now,
              let session = sessions[share.sessionId] else {
            throw .notFound("no such share link (unknown, expired or revoked)")
        }
        let watched = WatchedSession(id: session.id, owner: profile(session.owner), startedAt: session.startedAt,
                                     expiresAt: share.expiresAt, destination: session.destination, checkInBy: session.checkInBy)
        // A pause from everyone hides the owner from viewers too (they have no username to pause for).
        let paused = hiddenElsewhere || pauses[session.owner]?[LocationPause.everyone] != nil
        let position = paused ? nil : presence.lastPosition(of: session.owner, shownTo: [share.viewerKey])
        return (share, WatchReply(session: watched, lastPosition: position))
    }

    /// What a new viewer of `share` is told right after its `ok`: the owner's active alarms raised since the
    /// link was made (`viewerKeys(of:)`), and `session.lost` when contact with the owner is lost now.
    public func viewerBacklog(_ share: ShareLink, presence: some PresenceView) -> [JSONValue] {
        var messages: [JSONValue] = []
        if let session = sessions[share.sessionId], let since = session.lostSince {
            let position = visibleLastPosition(of: session.owner, to: [share.viewerKey], presence: presence)
            messages.append(Event.sessionLost(sessionId: session.id, lastPosition: position,
                                              since: presence.lastSeen(session.owner) ?? since).json)
        }
        let raisedSince = (alarmsByOwner[share.owner] ?? []).compactMap { alarms[$0] }.filter { $0.createdAt >= share.createdAt }
        for alarm in raisedSince.sorted(by: { $0.createdAt < $1.createdAt }) {
            messages.append(Event.alarm(alarm.viewerInfo(owner: profile(alarm.owner)), repeat: nil).json)
        }
        return messages
    }

    /// The viewer keys of the live links to `owner`'s active session: who besides friends hears of the walk.
    public func viewerKeys(ofOwner owner: String) -> [String] {
        guard let id = sessionByOwner[owner] else { return [] }
        return viewerKeys(ofSession: id)
    }

    func viewerKeys(ofSession id: String) -> [String] {
        (sharesBySession[id] ?? []).sorted().compactMap { shares[$0]?.viewerKey }
    }

    /// Who besides its recipients hears of `alarm`: the viewers of the owner's links made before it was
    /// raised. A viewer learns of the alarms of the walk it was given, not of one that was already going on
    /// (the owner shared the walk, not that). Viewers get no alarm's position (`Alarm.viewerInfo`).
    func viewerKeys(of alarm: Alarm) -> [String] {
        guard let id = sessionByOwner[alarm.owner] else { return [] }
        return (sharesBySession[id] ?? []).sorted().compactMap { shares[$0] }.filter { $0.createdAt <= alarm.createdAt }.map(\.viewerKey)
    }

    /// Ends one link: its viewers get `session.ended {reason}` and are then closed with 1000.
    mutating func endShare(_ id: String, reason: String) -> Outcome {
        var outcome = Outcome()
        guard let share = unindex(share: id) else { return outcome }
        outcome.changes.append(.removeShare(id: id))
        outcome.audienceChanged.insert(share.owner)
        outcome.send(.sessionEnded(sessionId: share.sessionId, reason: reason), to: share.viewerKey)
        outcome.closeViewers.append(share.viewerKey)
        return outcome
    }

    /// Ends every link of a session that is ending, with the session's reason.
    mutating func endShares(ofSession id: String, reason: String) -> Outcome {
        var outcome = Outcome()
        for shareId in (sharesBySession[id] ?? []).sorted() { outcome.merge(endShare(shareId, reason: reason)) }
        return outcome
    }

    /// Links among `candidates` (`dueCandidates`) of owners `due` fires whose time is up at `now`.
    mutating func expireShares(_ candidates: [ShareLink], now: Int64, in due: DueOwners) -> Outcome {
        var outcome = Outcome()
        for share in candidates.sorted(by: { $0.id < $1.id }) where share.expiresAt <= now && due.owns(share.owner) {
            outcome.merge(endShare(share.id, reason: "expired"))
        }
        return outcome
    }

    // MARK: Indexes

    mutating func index(_ share: ShareLink) {
        shares[share.id] = share
        sharesByHash[share.tokenHash] = share.id
        sharesBySession[share.sessionId, default: []].insert(share.id)
        noteDeadlines(of: share.owner)
    }

    @discardableResult
    mutating func unindex(share id: String) -> ShareLink? {
        guard let share = shares.removeValue(forKey: id) else { return nil }
        noteRemoved(.share(id), share.owner)
        sharesByHash[share.tokenHash] = nil
        sharesBySession[share.sessionId]?.remove(id)
        if sharesBySession[share.sessionId]?.isEmpty == true { sharesBySession[share.sessionId] = nil }
        return share
    }
}
