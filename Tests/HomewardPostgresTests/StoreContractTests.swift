import Foundation
import HomewardCore
import HomewardProtocol
import Testing

/// What every `RelayStore` must do, written once and run for each store: SQLite, and PostgreSQL on a
/// real server (one per suite run, a database per test).
@Suite(.postgresServer)
struct StoreContractTests {
    /// Runs `body` with a subject on a new database of `kind`, removed afterwards.
    func with(_ kind: StoreKind, _ body: (any StoreSubject) async throws -> Void) async throws {
        let subject = try await kind.subject()
        do {
            try await body(subject)
        } catch {
            await subject.remove()
            throw error
        }
        await subject.remove()
    }

    /// Closes `store` and loads what a fresh store on the same database sees.
    func reopenAndLoad(_ store: any RelayStore, _ subject: any StoreSubject) async throws -> StoredState {
        try await subject.close(store)
        let reopened = try await subject.open()
        let state = try await reopened.load()
        try await subject.close(reopened)
        return state
    }

    private func users(_ names: String..., at time: Int64 = 1_000) -> [StoreChange] {
        names.enumerated().map { index, name in
            .createUser(UserProfile(username: name, name: name.capitalized), passwordHash: "hash-\(name)",
                        at: time + Int64(index))
        }
    }

    private func pairs(_ list: [(String, String)]) -> [String] { list.map { "\($0.0)|\($0.1)" } }

    // MARK: - Round trip

    @Test(arguments: StoreKind.allCases)
    func everyChangeSurvivesReopening(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("alice", "bob", "carol", "dave"))
            try await store.apply([
                .createToken(hash: "t-alice", username: "alice", at: 2_000),
                .createToken(hash: "t-bob", username: "bob", at: 2_001),
                .revokeToken(hash: "t-bob"),
            ])
            try await store.apply([
                .addFriendRequest(from: "carol", to: "alice", at: 3_000),
                .addFriendRequest(from: "bob", to: "dave", at: 3_001),
                .addFriendRequest(from: "dave", to: "carol", at: 3_002),
                .removeFriendRequest(from: "bob", to: "dave"),
            ])
            try await store.apply([
                .addFriendship("bob", "alice", at: 4_000),
                .addFriendship("alice", "dave", at: 4_001),
                .addFriendship("carol", "bob", at: 4_002),
                .removeFriendship("bob", "carol"),
            ])
            try await store.apply([
                .setAlarmContacts(owner: "alice", ["dave", "bob"]),
                .setAlarmContacts(owner: "bob", ["alice"]),
                .setAlarmContacts(owner: "bob", []),
            ])
            try await store.apply([.addBlock(blocker: "dave", blocked: "carol", at: 4_500),
                                   .addBlock(blocker: "carol", blocked: "bob", at: 4_501),
                                   .removeBlock(blocker: "carol", blocked: "bob")])

            var session = FollowSession(id: "s_1", owner: "alice", note: "walking home", startedAt: 5_000)
            session.set(.invited, for: "dave")
            session.set(.accepted, for: "bob")
            session.checkInBy = 5_500
            session.destination = Destination(lat: 48.85, lon: 2.35, radius: 150)
            session.expiresAt = 9_000
            session.lostSince = 5_200
            try await store.apply([.saveSession(session)])

            var alarm = Alarm(id: "a_1", owner: "bob", text: "help", position: Position(lat: 51.5, lon: -0.12, ts: 6_000),
                              createdAt: 6_000, recipients: ["alice", "dave"])
            alarm.deliveredAt["alice"] = 6_001
            _ = alarm.acknowledge(by: "alice")
            alarm.repeats = 3
            alarm.nextRepeatAt = 6_500
            try await store.apply([.saveAlarm(alarm)])
            try await store.apply([.lastSeen(username: "carol", at: 7_000), .lastSeen(username: "carol", at: 7_500)])
            try await store.apply([.useToken(hash: "t-alice", at: 8_000)])

            #expect(try await store.passwordHash(of: "carol") == "hash-carol")
            let state = try await reopenAndLoad(store, subject)

            #expect(state.users == ["alice", "bob", "carol", "dave"].map { UserProfile(username: $0, name: $0.capitalized) })
            #expect(state.lastSeen == ["carol": 7_500])
            #expect(pairs(state.friendRequests.map { ($0.from, $0.to) }) == ["carol|alice", "dave|carol"])
            #expect(pairs(state.friendships) == ["alice|bob", "alice|dave"])
            #expect(pairs(state.blocks.map { ($0.blocker, $0.blocked) }) == ["dave|carol"])
            #expect(state.alarmContacts == ["alice": ["dave", "bob"]])
            #expect(state.sessions == [session])
            #expect(state.alarms == [alarm])
            #expect(state.tokens.map { "\($0.hash) \($0.username) \($0.createdAt) \($0.lastUsed)" } == ["t-alice alice 2000 8000"])

            let reopened = try await subject.open()
            #expect(try await reopened.passwordHash(of: "alice") == "hash-alice")
            #expect(try await reopened.passwordHash(of: "nobody") == nil)
            #expect(try await reopened.username(forTokenHash: "t-alice") == "alice")
            #expect(try await reopened.username(forTokenHash: "t-bob") == nil)
            try await subject.close(reopened)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func emptyDatabaseLoadsNothing(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let state = try await reopenAndLoad(try await subject.open(), subject)
            #expect(state.users.isEmpty)
            #expect(state.lastSeen.isEmpty)
            #expect(state.tokens.isEmpty)
            #expect(state.friendships.isEmpty)
            #expect(state.friendRequests.isEmpty)
            #expect(state.blocks.isEmpty)
            #expect(state.alarmContacts.isEmpty)
            #expect(state.sessions.isEmpty)
            #expect(state.alarms.isEmpty)
            #expect(state.shares.isEmpty)
        }
    }

    // MARK: - Share links

    /// A link is stored with its token's hash only, survives reopening, and is gone once removed or
    /// once its session ends (the link references it).
    @Test(arguments: StoreKind.allCases)
    func shareLinksSurviveReopeningUntilRemoved(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("alice", "bob"))
            let session = FollowSession(id: "s_1", owner: "alice", note: nil, startedAt: 5_000)
            let first = ShareLink(id: "sh_1", sessionId: "s_1", owner: "alice", tokenHash: String(repeating: "a", count: 64),
                                  createdAt: 5_100, expiresAt: 9_000)
            let second = ShareLink(id: "sh_2", sessionId: "s_1", owner: "alice", tokenHash: String(repeating: "b", count: 64),
                                   createdAt: 5_200, expiresAt: 8_000)
            try await store.apply([.saveSession(session), .saveShare(first), .saveShare(second)])
            #expect(try await reopenAndLoad(store, subject).shares == [first, second])

            let reopened = try await subject.open()
            try await reopened.apply([.removeShare(id: "sh_1")])
            // Saving the session again (a check-in, an invite) keeps its links.
            try await reopened.apply([.saveSession(session)])
            #expect(try await reopenAndLoad(reopened, subject).shares == [second])
        }
    }

    /// A link's owner is found by its token's hash (`watch` on a cache that does not hear every commit), until removed.
    @Test(arguments: StoreKind.allCases)
    func aShareLinksOwnerIsFoundByItsTokenHash(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("alice"))
            let session = FollowSession(id: "s_1", owner: "alice", note: nil, startedAt: 5_000)
            let link = ShareLink(id: "sh_1", sessionId: "s_1", owner: "alice", tokenHash: "hash-1", createdAt: 1, expiresAt: 2)
            try await store.apply([.saveSession(session), .saveShare(link)])
            #expect(try await store.shareOwner(forTokenHash: "hash-1") == "alice")
            #expect(try await store.shareOwner(forTokenHash: "hash-2") == nil)
            #expect(try await store.shareOwner(forTokenHash: "hash-1\u{0}") == nil)
            try await store.apply([.removeShare(id: "sh_1")])
            #expect(try await store.shareOwner(forTokenHash: "hash-1") == nil)
            try await subject.close(store)
        }
    }

    /// Two links cannot share a token hash: the second batch fails whole and the first link stays.
    @Test(arguments: StoreKind.allCases)
    func aRepeatedShareTokenHashIsRefused(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("alice"))
            let session = FollowSession(id: "s_1", owner: "alice", note: nil, startedAt: 5_000)
            let link = ShareLink(id: "sh_1", sessionId: "s_1", owner: "alice", tokenHash: "same", createdAt: 1, expiresAt: 2)
            try await store.apply([.saveSession(session), .saveShare(link)])
            await #expect(throws: (any Error).self) {
                try await store.apply([.saveShare(ShareLink(id: "sh_2", sessionId: "s_1", owner: "alice", tokenHash: "same",
                                                            createdAt: 3, expiresAt: 4))])
            }
            #expect(try await reopenAndLoad(store, subject).shares == [link])
        }
    }

    // MARK: - Friends

    @Test(arguments: StoreKind.allCases)
    func friendshipIsStoredOnceInCanonicalOrder(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("zed", "amy", "max"))
            try await store.apply([.addFriendship("zed", "amy", at: 1), .addFriendship("amy", "zed", at: 2)])
            try await store.apply([.addFriendship("max", "amy", at: 3)])
            #expect(try await subject.friendshipRows(store) == ["amy|max", "amy|zed"])

            try await store.apply([.removeFriendship("zed", "amy")])
            let reopened = try await reopenAndLoad(store, subject)
            #expect(pairs(reopened.friendships) == ["amy|max"])
        }
    }

    /// Code-point order, as Swift compares: "Zoe" < "amy" < "amy_" < "amya" (a locale's collation would differ).
    @Test(arguments: StoreKind.allCases)
    func friendshipOrderIsCodePointOrder(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("amya", "amy_", "Zoe", "amy"))
            try await store.apply([.addFriendship("amya", "amy_", at: 1), .addFriendship("amy", "Zoe", at: 2)])
            #expect(try await subject.friendshipRows(store) == ["Zoe|amy", "amy_|amya"])
            try await subject.close(store)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func friendRequestTwiceIsIgnored(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("amy", "zed"))
            try await store.apply([.addFriendRequest(from: "amy", to: "zed", at: 1)])
            try await store.apply([.addFriendRequest(from: "amy", to: "zed", at: 2)])
            let reopened = try await reopenAndLoad(store, subject)
            #expect(pairs(reopened.friendRequests.map { ($0.from, $0.to) }) == ["amy|zed"])
        }
    }

    // MARK: - Sessions

    @Test(arguments: StoreKind.allCases)
    func sessionInviteeStatesAndOrderArePreserved(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("owner", "a", "b", "c", "d"))
            var session = FollowSession(id: "s_1", owner: "owner", note: nil, startedAt: 10)
            session.set(.invited, for: "c")
            session.set(.accepted, for: "a")
            session.set(.declined, for: "d")
            session.set(.invited, for: "b")
            try await store.apply([.saveSession(session)])

            // Saving again replaces the invitees with exactly the new list.
            session.set(.left, for: "a")
            session.set(.accepted, for: "b")
            session.remove("d")
            session.note = "late"
            try await store.apply([.saveSession(session)])

            let loaded = try await reopenAndLoad(store, subject).sessions
            #expect(loaded == [session])
            #expect(loaded.first?.invitees == ["c", "a", "b"])
            #expect(loaded.first?.state(of: "a") == .left)
            #expect(loaded.first?.state(of: "b") == .accepted)
            #expect(loaded.first?.state(of: "c") == .invited)
            #expect(loaded.first?.state(of: "d") == nil)
            #expect(loaded.first?.note == "late")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func onlyOneActiveSessionPerOwner(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("owner"))
            try await store.apply([.saveSession(FollowSession(id: "s_1", owner: "owner", note: nil, startedAt: 1))])
            await #expect(throws: (any Error).self) {
                try await store.apply([.saveSession(FollowSession(id: "s_2", owner: "owner", note: nil, startedAt: 2))])
            }
            // Ending the first one in the same batch frees the owner.
            let second = FollowSession(id: "s_2", owner: "owner", note: nil, startedAt: 2)
            try await store.apply([.endSession(id: "s_1", reason: "replaced", at: 2), .saveSession(second)])
            let reopened = try await reopenAndLoad(store, subject)
            #expect(reopened.sessions == [second])
        }
    }

    // MARK: - Alarms

    @Test(arguments: StoreKind.allCases)
    func alarmAckOrderAndDeliveriesArePreserved(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("owner", "b", "c", "d", "e"))
            let position = Position(lat: -33.8688, lon: 151.2093, acc: 4.5, alt: 12.25, spd: 1.5, hdg: 359.5, batt: 42,
                                    ts: 1_700_000_000_123)
            var alarm = Alarm(id: "a_1", owner: "owner", text: "help me", position: position, createdAt: 100, auto: true,
                              recipients: ["d", "b", "c", "e"])
            alarm.deliveredAt = ["d": 101, "c": 102]
            try await store.apply([.saveAlarm(alarm)])

            _ = alarm.acknowledge(by: "c")
            alarm.deliveredAt["b"] = 103
            try await store.apply([.saveAlarm(alarm)])
            #expect(try await subject.ackedAt(store, alarm: "a_1", username: "c") != nil)
            // A time no save of this test can store (each stores the wall clock's), as if acknowledged long ago.
            try await subject.execute(store, ["UPDATE alarm_recipients SET acked_at = 7 WHERE alarm_id = 'a_1' AND username = 'c'"])

            _ = alarm.acknowledge(by: "d")
            alarm.removeRecipient("e")
            try await store.apply([.saveAlarm(alarm)])
            // Saving again keeps the time of the first acknowledgement.
            #expect(try await subject.ackedAt(store, alarm: "a_1", username: "c") == 7)
            #expect(try await subject.ackedAt(store, alarm: "a_1", username: "d") ?? 0 > 7)

            let other = Alarm(id: "a_2", owner: "b", text: Alarm.defaultText, position: nil, createdAt: 200, recipients: ["owner"])
            try await store.apply([.saveAlarm(other)])

            let loaded = try await reopenAndLoad(store, subject).alarms
            #expect(loaded == [alarm, other])
            #expect(loaded.first?.recipients == ["d", "b", "c"])
            #expect(loaded.first?.acked == ["c", "d"])
            #expect(loaded.first?.deliveredAt == ["d": 101, "c": 102, "b": 103])
            #expect(loaded.first?.position == position)
            #expect(loaded.first?.auto == true)
            #expect(loaded.last?.position == nil)
            #expect(loaded.last?.auto == false)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func repeatedRecipientsAndContactsDoNotFailTheSave(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("owner", "b"))
            let alarm = Alarm(id: "a_1", owner: "owner", text: "x", position: nil, createdAt: 1, recipients: ["b", "b"])
            try await store.apply([.saveAlarm(alarm), .setAlarmContacts(owner: "owner", ["b", "b"])])
            let state = try await reopenAndLoad(store, subject)
            #expect(state.alarms.first?.recipients == ["b"])
            #expect(state.alarmContacts == ["owner": ["b"]])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func endedSessionsAndAlarmsAreNotLoaded(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("a", "b"))
            var kept = FollowSession(id: "s_kept", owner: "b", note: nil, startedAt: 2)
            kept.set(.accepted, for: "a")
            var ended = FollowSession(id: "s_ended", owner: "a", note: nil, startedAt: 1)
            ended.set(.accepted, for: "b")
            let keptAlarm = Alarm(id: "a_kept", owner: "a", text: "k", position: nil, createdAt: 3, recipients: ["b"])
            let endedAlarm = Alarm(id: "a_ended", owner: "b", text: "e", position: nil, createdAt: 4, recipients: ["a"])
            try await store.apply([.saveSession(kept), .saveSession(ended), .saveAlarm(keptAlarm), .saveAlarm(endedAlarm)])
            try await store.apply([
                .endSession(id: "s_ended", reason: "stopped", at: 10),
                .endAlarm(id: "a_ended", reason: "cancelled", at: 11),
            ])
            #expect(try await subject.endedRows(store) == ["a_ended 11 cancelled", "s_ended 10 stopped"])

            let state = try await reopenAndLoad(store, subject)
            #expect(state.sessions == [kept])
            #expect(state.alarms == [keptAlarm])
        }
    }

    // MARK: - Tokens

    @Test(arguments: StoreKind.allCases)
    func severalTokensResolveInOneReadAndUnknownOnesToNobody(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("alice", "bob"))
            try await store.apply([.createToken(hash: "h1", username: "alice", at: 1), .createToken(hash: "h2", username: "alice", at: 2),
                                   .createToken(hash: "h3", username: "bob", at: 3), .revokeToken(hash: "h2")])
            let found = try await store.usernames(forTokenHashes: ["h1", "h2", "h3", "nope", "h\u{0}1"])
            #expect(found == ["h1": "alice", "h3": "bob"])
            #expect(try await store.usernames(forTokenHashes: []) == [:])
            try await subject.close(store)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func revokedTokenNoLongerResolves(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("alice"))
            try await store.apply([.createToken(hash: "h1", username: "alice", at: 1),
                                   .createToken(hash: "h2", username: "alice", at: 2)])
            #expect(try await store.username(forTokenHash: "h1") == "alice")
            try await store.apply([.revokeToken(hash: "h1")])
            #expect(try await store.username(forTokenHash: "h1") == nil)
            try await subject.close(store)

            let reopened = try await subject.open()
            #expect(try await reopened.username(forTokenHash: "h1") == nil)
            #expect(try await reopened.username(forTokenHash: "h2") == "alice")
            try await subject.close(reopened)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func tokenForUnknownUserIsRejected(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            await #expect(throws: (any Error).self) {
                try await store.apply([.createToken(hash: "h", username: "ghost", at: 1)])
            }
            #expect(try await store.username(forTokenHash: "h") == nil)
            try await subject.close(store)
        }
    }

    // MARK: - Transactions

    @Test(arguments: StoreKind.allCases)
    func failingBatchLeavesNothingApplied(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("alice"))
            let session = FollowSession(id: "s_1", owner: "alice", note: nil, startedAt: 1)
            await #expect(throws: (any Error).self) {
                try await store.apply([
                    .createUser(UserProfile(username: "bob", name: "Bob"), passwordHash: "h", at: 2),
                    .createToken(hash: "t-bob", username: "bob", at: 2),
                    .addFriendship("alice", "bob", at: 2),
                    .saveSession(session),
                    .lastSeen(username: "alice", at: 2),
                    .createUser(UserProfile(username: "bob", name: "Bob again"), passwordHash: "h", at: 3),
                ])
            }
            #expect(try await store.passwordHash(of: "bob") == nil)
            #expect(try await store.username(forTokenHash: "t-bob") == nil)

            let state = try await reopenAndLoad(store, subject)
            #expect(state.users == [UserProfile(username: "alice", name: "Alice")])
            #expect(state.lastSeen.isEmpty)
            #expect(state.friendships.isEmpty)
            #expect(state.sessions.isEmpty)
        }
    }

    /// A store keeps working after a refused batch: the next one is applied.
    @Test(arguments: StoreKind.allCases)
    func batchAfterAFailedOneIsApplied(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("alice"))
            await #expect(throws: (any Error).self) { try await store.apply(users("alice")) }
            try await store.apply(users("bob"))
            #expect(try await store.load().users.map(\.username) == ["alice", "bob"])
            try await subject.close(store)
        }
    }

    // MARK: - Exact text (NUL)

    private func kate(_ store: any RelayStore) async throws {
        try await store.apply([.createUser(UserProfile(username: "kate1", name: "Kate"), passwordHash: "hash-kate1", at: 1),
                               .createUser(UserProfile(username: "ben", name: "Ben"), passwordHash: "hash-ben", at: 2),
                               .createToken(hash: "t-kate1", username: "kate1", at: 3)])
    }

    @Test(arguments: StoreKind.allCases)
    func aNameWithNULIsNotTheNameBeforeIt(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await kate(store)
            #expect(try await store.passwordHash(of: "kate1") == "hash-kate1")
            for lookalike in ["kate1\u{0}", "kate1\u{0}anything"] {
                #expect(try await store.passwordHash(of: lookalike) == nil, "\(lookalike.debugDescription)")
            }
            #expect(try await store.username(forTokenHash: "t-kate1\u{0}") == nil)
            try await subject.close(store)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aChangeWithNULInAKeyIsRefusedWhole(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await kate(store)
            let alarm = Alarm(id: "a_1", owner: "kate1", text: "help", position: nil, createdAt: 6, recipients: ["ben\u{0}x"])
            let batches: [[StoreChange]] = [
                [.addFriendRequest(from: "ben", to: "kate1", at: 4), .addFriendRequest(from: "kate1\u{0}", to: "ben", at: 5)],
                [.saveAlarm(alarm)],
            ]
            for batch in batches {
                await #expect(throws: StoreKeyError.self, "stored a key with NUL: \(batch)") { try await store.apply(batch) }
            }
            let state = try await store.load()
            #expect(state.friendRequests.isEmpty, "nothing of the refused batch is stored")
            #expect(state.alarms.isEmpty)
            try await subject.close(store)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func textWithNULSurvivesReopeningWhole(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await kate(store)
            let text = "help\u{0} at the bridge"
            let alarm = Alarm(id: "a_1", owner: "kate1", text: text, position: nil, createdAt: 10, recipients: ["ben"])
            var session = FollowSession(id: "s_1", owner: "ben", note: "via\u{0} the park", startedAt: 11)
            session.set(.invited, for: "kate1")
            try await store.apply([.saveAlarm(alarm), .saveSession(session),
                                   .createUser(UserProfile(username: "zed", name: "Z\u{0}ed"), passwordHash: "h", at: 12)])
            try await store.apply([.endAlarm(id: "a_1", reason: "stop\u{0}ped", at: 13)])

            let state = try await reopenAndLoad(store, subject)
            #expect(state.alarms.isEmpty)
            #expect(state.sessions.first?.note == "via\u{0} the park")
            #expect(state.users.first { $0.username == "zed" }?.name == "Z\u{0}ed")

            let again = try await subject.open()
            try await again.apply([.saveAlarm(Alarm(id: "a_2", owner: "kate1", text: text, position: nil, createdAt: 14,
                                                    recipients: ["ben"]))])
            #expect(try await again.load().alarms.first?.text == text)
            try await subject.close(again)
        }
    }
}

// MARK: - Friends' map (issue 15)

extension StoreContractTests {
    @Test(arguments: StoreKind.allCases)
    func friendsMapStateSurvivesReopeningUntilRemoved(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("alice", "bob", "carol"))
            let meeting = MeetingPoint(id: "m_1", owner: "alice", name: "the \u{0} fountain ☂", lat: 57.7, lon: 11.97, time: 9_000,
                                       createdAt: 5_000, invitees: [MeetingInvitee(username: "carol", queuedAt: 5_000),
                                                                    MeetingInvitee(username: "bob", response: .declined, queuedAt: 5_000,
                                                                                   deliveredAt: 5_001)])
            let message = MessageInfo(id: "msg_1", from: "alice", to: "bob", text: "on my way\u{0}!", queuedAt: 6_000)
            try await store.apply([
                .setStandingShare(owner: "alice", ["carol", "bob", "carol"]),
                .setStandingShare(owner: "bob", ["alice"]),
                .savePause(LocationPause(owner: "alice", from: nil, until: 7_000)),
                .savePause(LocationPause(owner: "alice", from: "bob", until: nil)),
                .savePause(LocationPause(owner: "bob", from: nil, until: 1)),
                .saveMeeting(meeting), .saveMessage(message),
                .saveMessage(MessageInfo(id: "msg_2", from: "bob", to: "alice", text: "gone", queuedAt: 6_001)),
            ])
            var answered = meeting
            answered.invitees[0] = MeetingInvitee(username: "carol", response: .accepted, queuedAt: 5_000, deliveredAt: 8_000)
            var delivered = message
            delivered.deliveredAt = 8_001
            try await store.apply([
                .saveMeeting(answered), .saveMessage(delivered), .removeMessage(id: "msg_2"),
                .savePause(LocationPause(owner: "bob", from: nil, until: 2)), .setStandingShare(owner: "bob", []),
            ])
            let state = try await reopenAndLoad(store, subject)
            #expect(state.standingShares == ["alice": ["carol", "bob"]])
            #expect(state.pauses == [LocationPause(owner: "alice", from: nil, until: 7_000),
                                     LocationPause(owner: "alice", from: "bob", until: nil),
                                     LocationPause(owner: "bob", from: nil, until: 2)])
            #expect(state.meetings == [answered], "name with NUL kept whole, invitees in order with their times")
            #expect(state.messages == [delivered])

            let again = try await subject.open()
            try await again.apply([.removePause(owner: "alice", from: nil), .removePause(owner: "alice", from: "bob"),
                                   .removeMeeting(id: "m_1"), .removeMessage(id: "msg_1")])
            let emptied = try await reopenAndLoad(again, subject)
            #expect(emptied.pauses == [LocationPause(owner: "bob", from: nil, until: 2)])
            #expect(emptied.meetings.isEmpty)
            #expect(emptied.messages.isEmpty)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aFriendsMapKeyWithNULRefusesTheWholeBatch(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(users("alice", "bob"))
            await #expect(throws: (any Error).self) {
                try await store.apply([.setStandingShare(owner: "alice", ["bob"]),
                                       .saveMessage(MessageInfo(id: "msg\u{0}1", from: "alice", to: "bob", text: "x", queuedAt: 1))])
            }
            let state = try await reopenAndLoad(store, subject)
            #expect(state.standingShares.isEmpty)
            #expect(state.messages.isEmpty)
        }
    }
}
