import HomewardProtocol

/// Push subscriptions: the rules of `push.subscribe`, `push.unsubscribe` and `push.list`. The checks
/// that need the network (the endpoint's address) are done by the relay before `subscribePush`.
extension RelayState {
    public func pushSubscriptions(of username: String) -> [PushSubscription] {
        (pushByUser[username] ?? []).compactMap { pushSubscriptions[$0] }
    }

    /// Adds a checked subscription. Subscribing the same endpoint again replaces the old one (a browser
    /// that re-subscribes gets new keys for the same endpoint) under the same limit.
    public mutating func subscribePush(_ username: String, _ request: Request.PushSubscribe, limit: Int,
                                       now: Int64) throws(RelayError) -> Outcome {
        var outcome = Outcome()
        let existing = pushSubscriptions(of: username)
        let replaced = existing.first { $0.endpoint == request.endpoint }
        guard replaced != nil || existing.count < limit else {
            throw .rateLimited("at most \(limit) push subscriptions per account; remove one with push.unsubscribe")
        }
        if let replaced {
            unindex(push: replaced.id)
            outcome.changes.append(.deletePushSubscription(id: replaced.id))
        }
        let subscription = PushSubscription(id: makeID("p_"), username: username, endpoint: request.endpoint,
                                            p256dh: request.p256dh, auth: request.auth, createdAt: now)
        index(subscription)
        outcome.changes.append(.savePushSubscription(subscription))
        outcome.reply = PushSubscribeReply(subscriptionId: subscription.id).fields
        return outcome
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
        pushByUser[subscription.username]?.removeAll { $0 == id }
    }
}
