import HomewardProtocol

/// A panic alarm, active until its owner cancels it.
public struct Alarm: Sendable, Equatable {
    public static let defaultText = "I need help. Please check on me now."

    public let id: String
    public let owner: String
    public let text: String
    public let position: Position?
    public let createdAt: Int64
    /// Raised by the relay on the owner's behalf (safety extensions).
    public let auto: Bool
    public private(set) var recipients: [String]
    public private(set) var acked: [String] = []
    /// When each recipient was first sent the alarm.
    public var deliveredAt: [String: Int64] = [:]
    /// How often it has been sent again because nobody acknowledged it, and when the next time is due.
    public var repeats = 0
    public var nextRepeatAt: Int64?

    public init(id: String, owner: String, text: String, position: Position?, createdAt: Int64,
                auto: Bool = false, recipients: [String]) {
        self.id = id
        self.owner = owner
        self.text = text
        self.position = position
        self.createdAt = createdAt
        self.auto = auto
        self.recipients = recipients
    }

    public mutating func acknowledge(by username: String) -> Bool {
        guard !acked.contains(username) else { return false }
        acked.append(username)
        return true
    }

    public mutating func removeRecipient(_ username: String) {
        recipients.removeAll { $0 == username }
        acked.removeAll { $0 == username }
        deliveredAt[username] = nil
    }

    /// Restores acknowledgements read back from storage.
    public mutating func restore(acked: [String]) { self.acked = acked }

    /// The alarm as its recipients see it.
    public func info(owner profile: UserProfile) -> AlarmInfo {
        AlarmInfo(id: id, from: profile, text: text, position: position, createdAt: createdAt, acked: acked, isAutomatic: auto)
    }

    /// The alarm as share-link viewers see it: without its position. An alarm overrides pauses for its
    /// recipients only; its position may have been sent while the owner was paused from everyone (viewers
    /// included), which nothing stored tells later. Viewers see where the owner is from their `pos`
    /// events, which pauses govern.
    public func viewerInfo(owner profile: UserProfile) -> AlarmInfo {
        var info = info(owner: profile)
        info.position = nil
        return info
    }
}
