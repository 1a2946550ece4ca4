/// Where a change notice goes: the subject of every user whose part of a cache its commits change
/// (`noticeUsers`), and the timer shard of every owner of something with a deadline they write (`timerOwners`).
/// A relay caching its connected users hears only the subjects of the users it follows and of the timer shards
/// it holds, so these sets must hold everyone whose slice (`StoredState.slice(of:)`) a commit changes, in the
/// state before and after it: a superset of `sliceScope`. `NoticeUsersTests` checks it on the shared script.
extension RelayState {
    /// The users whose slices hold something `changes` write, before or after, in the state they were decided
    /// into: `sliceScope` (the store's check, and the sign-in bookkeeping), and the other users named by the
    /// sessions, alarms, meeting points, lists of standing shares and pauses they write (invitees, recipients,
    /// list members, the friend a pause is for), before and after: what the state before named is what the decision
    /// recorded as it removed, replaced or took someone off one (`RemovedOwners`), not a copy of that state.
    public func noticeUsers(of changes: [StoreChange]) -> Set<String> {
        var users = sliceScope(of: changes)
        for change in changes {
            switch change {
            case let .saveSession(session):
                users.formUnion(session.invitees)
                users.formUnion(formerMembers(.session(session.id)))
            case let .endSession(id, _, _):
                users.formUnion(sessions[id]?.invitees ?? [])
                users.formUnion(formerMembers(.session(id)))
            case let .saveAlarm(alarm):
                users.formUnion(alarm.recipients)
                users.formUnion(formerMembers(.alarm(alarm.id)))
            case let .endAlarm(id, _, _):
                users.formUnion(alarms[id]?.recipients ?? [])
                users.formUnion(formerMembers(.alarm(id)))
            case let .saveMeeting(meeting):
                users.formUnion(meeting.invitees.map(\.username))
                users.formUnion(formerMembers(.meeting(meeting.id)))
            case let .removeMeeting(id):
                users.formUnion(meetings[id].map { $0.invitees.map(\.username) } ?? [])
                users.formUnion(formerMembers(.meeting(id)))
            case let .setStandingShare(owner, list):
                users.formUnion(list)
                users.formUnion(formerMembers(.standing(owner)))
            case .savePushSubscription:
                // Another account's subscription of the same endpoint, which the store removes.
                users.formUnion(removedOwners?.pushSubscriptionOwners ?? [])
            case let .savePause(pause): if let from = pause.from { users.insert(from) }
            case let .removePause(_, from): if let from { users.insert(from) }
            default: break
            }
        }
        return users
    }

    private func formerMembers(_ entity: RemovedOwners.Entity) -> [String] { removedOwners?.members(of: entity) ?? [] }

    /// The owners of what `changes` write that has a deadline (a session, alarm, share link, pause or meeting point,
    /// saved or ended): the relay holding their timer shard must know of it, whether or not it follows them.
    public func timerOwners(of changes: [StoreChange]) -> Set<String> {
        var owners = Set<String>()
        for change in changes {
            switch change {
            case .saveSession, .endSession, .saveAlarm, .endAlarm, .saveShare, .removeShare, .savePause, .removePause,
                 .saveMeeting, .removeMeeting:
                owners.formUnion(writeScope(of: [change]))
            default: break
            }
        }
        return owners
    }
}
