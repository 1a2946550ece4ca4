import Crypto
import HomewardProtocol

/// Decides what an outcome sends by Web Push and to the operator webhook, as the contract's push
/// section says:
/// - an `alarm` (and each repeat) to every subscription of every recipient of the alarm, connected
///   or not, `Urgency: high`, one `Topic` per alarm;
/// - `session.invite`, `session.lost` and `friend.request` to the subscriptions of recipients with no
///   open connection (missed check-in alarms are alarms, so they take the first rule);
/// - only to subscriptions whose sign-in is live (a subscription ends with the sign-in that made it);
/// - an acknowledged or ended alarm drops its pushes still waiting; an ended one sends its recipients
///   `alarm.cancelled` under the alarm's `Topic`, so the alarm's notification is replaced;
/// - an event longer than a push can carry is shortened (`PushPayload`), never dropped;
/// - the webhook gets every raised alarm, acknowledgement and cancellation, once each.
/// The result is `StoreChange`s stored with the outcome, so nothing is pushed that was not stored and
/// nothing stored is forgotten.
public struct PushPlanner {
    public let settings: PushSettings
    /// Pushes go only to subscriptions whose sign-in is live; expired after this long without use, or,
    /// when nil, only once dropped (see `RelayState.deliverablePushSubscriptions`).
    public let tokenLifetime: Int64?
    public let makeID: @Sendable (String) -> String

    public init(settings: PushSettings, tokenLifetime: Int64?, makeID: @escaping @Sendable (String) -> String = RandomID.make) {
        self.settings = settings
        self.tokenLifetime = tokenLifetime
        self.makeID = makeID
    }

    public func plan(_ outcome: Outcome, state: RelayState, presence: some PresenceView, now: Int64) -> [StoreChange] {
        var changes: [StoreChange] = []
        var cancelled = Set<String>()
        func cancel(_ alarmId: String) {
            if cancelled.insert(alarmId).inserted { changes.append(.cancelAlarmPushes(alarmId: alarmId)) }
        }
        // Ends first: a push queued by this same outcome for an alarm it ends would be wasted.
        for change in outcome.changes {
            switch change {
            case let .endAlarm(id, reason, _):
                cancel(id)
                webhook(.alarmCancelled(alarmId: id, reason: reason), now: now, into: &changes)
            case let .saveAlarm(alarm) where outcome.raisedAlarms.contains(alarm.id):
                // Also when the alarm has no recipient at all: the desk should know.
                webhook(.alarm(alarm.info(owner: state.profile(alarm.owner)), repeat: nil), now: now, into: &changes)
            default:
                break
            }
        }
        for (message, recipients) in Self.distinctEvents(outcome.events) {
            guard let event = Event(json: message) else { continue }
            switch event {
            case .alarm(let info, _):
                // Viewers' copy (without the position) is another message: the recipients' is the one pushed.
                guard !cancelled.contains(info.id), recipients.contains(where: { !ShareLink.isViewerKey($0) }) else { continue }
                let everyone = state.alarms[info.id]?.recipients ?? recipients
                for username in everyone {
                    for subscription in state.deliverablePushSubscriptions(of: username, now: now, tokenLifetime: tokenLifetime) {
                        changes.append(.enqueueOutbox(push(message, to: subscription, urgency: "high",
                                                           topic: Self.topic(alarmId: info.id), alarmId: info.id, now: now)))
                    }
                }
            case .alarmAcked(let id, _):
                cancel(id)
                webhook(event, now: now, into: &changes)
            case .alarmCancelled(let id, _):
                // The alarm's own Topic: a push service still holding the alarm replaces it with this, and
                // the app replaces the alarm's notification. Not tied to the alarm, so its end does not drop it.
                for username in recipients {
                    for subscription in state.deliverablePushSubscriptions(of: username, now: now, tokenLifetime: tokenLifetime) {
                        changes.append(.enqueueOutbox(push(message, to: subscription, urgency: "high",
                                                           topic: Self.topic(alarmId: id), alarmId: nil, now: now)))
                    }
                }
            case .sessionInvite, .sessionLost, .friendRequest:
                for username in recipients where !presence.isOnline(username) {
                    for subscription in state.deliverablePushSubscriptions(of: username, now: now, tokenLifetime: tokenLifetime) {
                        changes.append(.enqueueOutbox(push(message, to: subscription, urgency: "normal", topic: nil, alarmId: nil, now: now)))
                    }
                }
            default:
                break
            }
        }
        return changes
    }

    /// The `Topic` of an alarm's pushes: the alarm id's random part (32 hex digits) when it fits the
    /// 32-character base64url limit of RFC 8030, else a digest of the whole id in that alphabet.
    public static func topic(alarmId: String) -> String {
        let bare = alarmId.hasPrefix("a_") ? String(alarmId.dropFirst(2)) : alarmId
        if (1...32).contains(bare.utf8.count), bare.utf8.allSatisfy({ isTopicCharacter($0) }) { return bare }
        let digest = SHA256.hash(data: Array(alarmId.utf8))
        return String(digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined().prefix(32))
    }

    private static func isTopicCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "_"): true
        default: false
        }
    }

    private func push(_ message: JSONValue, to subscription: PushSubscription, urgency: String, topic: String?,
                      alarmId: String?, now: Int64) -> OutboxEntry {
        OutboxEntry(id: makeID("o_"), kind: .webPush, subscriptionId: subscription.id, endpoint: subscription.endpoint,
                    p256dh: subscription.p256dh, auth: subscription.auth, payload: PushPayload.fit(message),
                    urgency: urgency, topic: topic, ttl: settings.ttl, alarmId: alarmId, createdAt: now)
    }

    private func webhook(_ event: Event, now: Int64, into changes: inout [StoreChange]) {
        guard let url = settings.webhookURL else { return }
        let body = JSONValue.object([("event", event.json), ("at", .int(now))])
        changes.append(.enqueueOutbox(OutboxEntry(id: makeID("o_"), kind: .webhook, subscriptionId: nil, endpoint: url,
                                                  payload: Array(JSONWriter.string(body).utf8), ttl: settings.ttl, createdAt: now)))
    }

    /// Each distinct event once, with everyone it goes to, in first-sent order.
    static func distinctEvents(_ events: [(to: String, message: JSONValue)]) -> [(JSONValue, [String])] {
        var result: [(JSONValue, [String])] = []
        for event in events {
            if let index = result.firstIndex(where: { $0.0 == event.message }) {
                result[index].1.append(event.to)
            } else {
                result.append((event.message, [event.to]))
            }
        }
        return result
    }
}
