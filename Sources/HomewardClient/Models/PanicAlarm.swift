import HomewardProtocol

/// A panic alarm as the relay describes it (the wire model's `AlarmInfo`).
public typealias PanicAlarm = AlarmInfo

/// The reply to `alarm.raise`.
public typealias RaisedAlarm = AlarmRaiseReply

/// What an alarm carries when raised: the protocol's own request type, shared with the relay.
public typealias AlarmRequest = Request.AlarmRaise
