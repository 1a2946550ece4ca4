import HomewardProtocol

/// Push subscriptions: the rules of `push.subscribe`, `push.unsubscribe` and `push.list`. The checks
/// that need the network (the endpoint's address) are done by the relay before `subscribePush`.
extension RelayState {
    public func pushSubscriptions(of username: String) -> [PushSubscription] {
        (pushByUser[username] ?? []).compactMap { pushSubscriptions[$0] }
    }

    /// The subscriptions a push to `username` goes to: those whose sign-in is live. With `tokenLifetime`
    /// nil, expiry is not judged here (a relay sharing its store with others may hold an old last use of a
    /// token another relay extended): a subscription then lives until its token is dropped. One stored
    /// before subscriptions belonged to sign-ins lives while the account has a live sign-in.
    public func deliverablePushSubscriptions(of username: String, now: Int64, tokenLifetime: Int64?) -> [PushSubscription] {
        func live(_ hash: String) -> Bool {
            guard let token = tokens[hash], token.username == username else { return false }
            return tokenLifetime.map { !token.isExpired(at: now, lifetime: $0) } ?? true
        }
        return pushSubscriptions(of: username).filter { subscription in
            if let hash = subscription.tokenHash { return live(hash) }
            return (tokensByUser[username] ?? []).contains(where: live)
        }
    }

    /// Adds a checked subscription for the sign-in `tokenHash`. Subscribing an endpoint again replaces
    /// the old subscription (a browser that re-subscribes, or signs in again, gets it bound to its new
    /// sign-in, under the same limit); an endpoint another account subscribed moves to this one.
    public mutating func subscribePush(_ username: String, tokenHash: String, _ request: Request.PushSubscribe, limit: Int,
                                       now: Int64) throws(RelayError) -> Outcome {
        // The sign-in may have ended while the endpoint was being checked.
        guard tokens[tokenHash]?.username == username else { throw .unauthenticated("this sign-in has ended") }
        var outcome = Outcome()
        let previous = pushSubscriptions.values.first { $0.endpoint == request.endpoint }
        let mine = pushSubscriptions(of: username).filter { $0.id != previous?.id }
        guard mine.count < limit else {
            throw .rateLimited("at most \(limit) push subscriptions per account; remove one with push.unsubscribe")
        }
        if let previous {
            unindex(push: previous.id)
            outcome.changes.append(.deletePushSubscription(id: previous.id))
        }
        let subscription = PushSubscription(id: makeID("p_"), username: username, endpoint: request.endpoint,
                                            p256dh: request.p256dh, auth: request.auth, createdAt: now, tokenHash: tokenHash)
        index(subscription)
        outcome.changes.append(.savePushSubscription(subscription))
        outcome.reply = PushSubscribeReply(subscriptionId: subscription.id).fields
        return outcome
    }

    /// What ends with the sign-in `hash` of `username`: its subscriptions, and those stored before
    /// subscriptions belonged to sign-ins (they belong to every sign-in of the account, so the first to
    /// end takes them; the app subscribes again at its next sign-in). Removed from the cache; the
    /// returned changes store that.
    mutating func endPushSubscriptions(ofToken hash: String, username: String) -> [StoreChange] {
        let ending = pushSubscriptions(of: username).filter { $0.tokenHash == nil || $0.tokenHash == hash }
        for subscription in ending { unindex(push: subscription.id) }
        return ending.map { .deletePushSubscription(id: $0.id) }
    }

    public mutating func unsubscribePush(_ username: String, _ id: String) throws(RelayError) -> Outcome {
        guard let subscription = pushSubscriptions[id], subscription.username == username else {
            throw .notFound("no push subscription \(id)")
        }
        return removePushSubscription(subscription.id)
    }

    /// Forgets a subscription (unsubscribed, or the push service answered 404/410), with its waiting pushes.
    public mutating func removePushSubscription(_ id: String) -> Outcome {
        var outcome = Outcome()
        guard pushSubscriptions[id] != nil else { return outcome }
        unindex(push: id)
        outcome.changes.append(.deletePushSubscription(id: id))
        return outcome
    }

    public func listPush(_ username: String) -> Outcome {
        var outcome = Outcome()
        outcome.reply = PushListReply(subscriptions: pushSubscriptions(of: username).map {
            PushSubscriptionInfo(subscriptionId: $0.id, endpoint: $0.endpoint, createdAt: $0.createdAt)
        }).fields
        return outcome
    }

    mutating func index(_ subscription: PushSubscription) {
        pushSubscriptions[subscription.id] = subscription
        pushByUser[subscription.username, default: []].append(subscription.id)
    }

    mutating func unindex(push id: String) {
        guard let subscription = pushSubscriptions.removeValue(forKey: id) else { return }
        noteRemoved(.pushSubscription(id), subscription.username)
        pushByUser[subscription.username]?.removeAll { $0 == id }
    }
}
