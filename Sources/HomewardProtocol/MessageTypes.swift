/// Every `type` the relay knows, for those who must list them (metrics create one counter per type
/// up front, so that counting a message takes no lock). Parsing and encoding do not use these lists.
public enum MessageTypes {
    /// What clients send.
    public static let requests: [String] = [
        "register", "login", "hello", "logout",
        "auth.sessions", "auth.revoke",
        "friend.request", "friend.accept", "friend.decline", "friend.remove", "friend.list", "user.search",
        "user.block", "user.unblock", "user.blocks",
        "session.start", "session.checkin", "session.invite", "session.accept", "session.decline", "session.leave",
        "session.end", "session.list",
        "pos",
        "alarm.raise", "alarm.ack", "alarm.cancel", "alarm.contacts",
        "push.subscribe", "push.unsubscribe", "push.list",
        "ping",
        "share.create", "share.list", "share.revoke", "watch",
        "share.always", "friend.location", "friend.trail", "location.pause", "location.resume",
        "meet.propose", "meet.accept", "meet.decline", "meet.cancel", "meet.list", "msg.send", "msg.read",
    ]

    /// What the relay sends: replies and events.
    public static let outgoing: [String] = [
        "ok", "error", "pos", "presence",
        "friend.request", "friend.added", "friend.declined", "friend.removed",
        "session.invite", "session.accepted", "session.declined", "session.left", "session.ended",
        "session.lost", "session.resumed",
        "alarm", "alarm.acked", "alarm.cancelled",
        "alarm.acknowledged",
        "friend.sharing", "location.resumed", "meet", "meet.response", "meet.cancelled", "meet.delivered",
        "msg", "msg.delivered", "msg.read",
    ]
}
