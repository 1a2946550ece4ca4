import HomewardProtocol

extension RelayState {
    /// Who gets an alarm: `to` if given (friends only), else the alarm contacts, else all friends.
    /// An empty `to` counts as not given: a panic must not go to nobody.
    public func alarmRecipients(_ owner: String, to: [String]?) throws(RelayError) -> [String] {
        if let to, !to.isEmpty {
            for name in to {
                guard name != owner else { throw .invalid("you cannot alarm yourself") }
                try requireUser(name)
                guard areFriends(owner, name) else { throw .forbidden("\(name) is not your friend") }
            }
            return to
        }
        // An empty contact list would send a panic to nobody; fall back to all friends instead.
        if let chosen = contacts[owner], !chosen.isEmpty { return chosen }
        return friends(of: owner)
    }

    public mutating func raiseAlarm(_ owner: String, _ request: Request.AlarmRaise, presence: some PresenceView,
                                    now: Int64, auto: Bool = false, recipients explicit: [String]? = nil) throws(RelayError) -> Outcome {
        let recipients: [String]
        if let explicit { recipients = explicit } else { recipients = try alarmRecipients(owner, to: request.to) }
        var position = presence.lastPosition(owner)
        if let lat = request.lat, let lon = request.lon {
            position = Position(lat: lat, lon: lon, acc: request.acc, ts: now)
        }
        var alarm = Alarm(id: makeID("a_"), owner: owner, text: request.text ?? Alarm.defaultText,
                          position: position, createdAt: now, auto: auto, recipients: recipients)
        for recipient in recipients where presence.isOnline(recipient) { alarm.deliveredAt[recipient] = now }
        if !recipients.isEmpty, safety.alarmRepeatMax > 0 { alarm.nextRepeatAt = now + safety.alarmRepeatInterval }
        index(alarm)
        var outcome = Outcome()
        outcome.changes.append(.saveAlarm(alarm))
        outcome.raisedAlarms.append(alarm.id)
        outcome.audienceChanged.insert(owner)
        let info = alarm.info(owner: profile(owner))
        outcome.send(.alarm(info, repeat: nil), to: recipients)
        outcome.send(.alarm(alarm.viewerInfo(owner: profile(owner)), repeat: nil), to: viewerKeys(of: alarm))
        outcome.reply = AlarmRaiseReply(
            alarm: info, recipients: recipients.map { AlarmRecipient(username: $0, online: presence.isOnline($0)) },
            pauseOverridden: hasPauses(owner)).fields
        return outcome
    }

    public mutating func acknowledgeAlarm(_ actor: String, _ id: String) throws(RelayError) -> Outcome {
        guard var alarm = alarms[id] else { throw .notFound("no active alarm \(id)") }
        guard alarm.recipients.contains(actor) else { throw .forbidden("the alarm was not sent to you") }
        var outcome = Outcome()
        guard alarm.acknowledge(by: actor) else { return outcome }  // acknowledging twice changes nothing
        alarm.nextRepeatAt = nil
        alarms[id] = alarm
        noteDeadlines(of: alarm.owner)
        outcome.changes.append(.saveAlarm(alarm))
        outcome.send(.alarmAcked(alarmId: id, by: actor), to: [alarm.owner] + alarm.recipients.filter { $0 != actor })
        outcome.send(.alarmAcknowledged(alarmId: id, by: actor), to: viewerKeys(of: alarm))
        return outcome
    }

    public mutating func cancelAlarm(_ actor: String, _ id: String, reason: String?, now: Int64) throws(RelayError) -> Outcome {
        guard let alarm = alarms[id] else { throw .notFound("no active alarm \(id)") }
        guard alarm.owner == actor else { throw .forbidden("only the owner can cancel an alarm") }
        unindex(alarm: id)
        let reason = reason ?? "cancelled"
        var outcome = Outcome()
        outcome.changes.append(.endAlarm(id: id, reason: reason, at: now))
        outcome.audienceChanged.insert(actor)
        outcome.send(.alarmCancelled(alarmId: id, reason: reason), to: alarm.recipients + viewerKeys(of: alarm))
        return outcome
    }

    public mutating func alarmContacts(_ owner: String, set usernames: [String]?) throws(RelayError) -> Outcome {
        var outcome = Outcome()
        if let usernames {
            for name in usernames {
                guard name != owner else { throw .invalid("you cannot be your own alarm contact") }
                try requireUser(name)
                guard areFriends(owner, name) else { throw .forbidden("\(name) is not your friend") }
            }
            contacts[owner] = usernames
            outcome.changes.append(.setAlarmContacts(owner: owner, usernames))
        }
        outcome.reply = AlarmContactsReply(usernames: contacts[owner] ?? []).fields
        return outcome
    }
}
