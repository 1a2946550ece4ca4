import Foundation
import HomewardCore
import Testing

/// The push part of the store contract: subscriptions and the durable outbox, for every store.
extension StoreContractTests {
    private func entry(_ id: String, kind: OutboxEntry.Kind = .webPush, subscription: String? = "p_1", alarm: String? = nil,
                       at: Int64, payload: [UInt8] = Array(#"{"type":"alarm"}"#.utf8)) -> OutboxEntry {
        OutboxEntry(id: id, kind: kind, subscriptionId: kind == .webPush ? subscription : nil,
                    endpoint: "https://push.example.net/\(id)", p256dh: "BKey", auth: "auth", payload: payload,
                    urgency: "high", topic: alarm.map { "t\($0)" }, ttl: 3600, alarmId: alarm, createdAt: at)
    }

    private func outbox(_ store: any RelayStore) throws -> any PushOutboxStore {
        try #require(store as? any PushOutboxStore, "every store the relay ships keeps an outbox")
    }

    @Test(arguments: StoreKind.allCases)
    func pushSubscriptionsSurviveReopeningAndUnsubscribingRemovesThem(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            let first = PushSubscription(id: "p_1", username: "bob", endpoint: "https://push.example.net/1", p256dh: "BKey1",
                                         auth: "auth1", createdAt: 10, tokenHash: "t-bob")
            let second = PushSubscription(id: "p_2", username: "bob", endpoint: "https://push.example.net/2", p256dh: "BKey2",
                                          auth: "auth2", createdAt: 11, tokenHash: "t-bob")
            let third = PushSubscription(id: "p_3", username: "bob", endpoint: "https://push.example.net/3", p256dh: "BKey3",
                                         auth: "auth3", createdAt: 12, tokenHash: nil)
            try await store.apply([.savePushSubscription(first), .savePushSubscription(second), .savePushSubscription(third)])
            try await store.apply([.deletePushSubscription(id: "p_1")])
            let state = try await reopenAndLoad(store, subject)
            #expect(state.pushSubscriptions == [second, third])
        }
    }

    /// An endpoint belongs to one account: saving a subscription of an endpoint removes whichever other
    /// subscription had it, with the pushes waiting for it (a shared browser stops getting the other
    /// account's alarms at once).
    @Test(arguments: StoreKind.allCases)
    func savingAnEndpointAgainRemovesItsOtherSubscriptionAndItsPushes(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            let bobs = PushSubscription(id: "p_1", username: "bob", endpoint: "https://push.example.net/shared", p256dh: "BKey1",
                                        auth: "auth1", createdAt: 10, tokenHash: "t-bob")
            let carols = PushSubscription(id: "p_2", username: "carol", endpoint: "https://push.example.net/shared", p256dh: "BKey2",
                                          auth: "auth2", createdAt: 11, tokenHash: "t-carol")
            try await store.apply([.savePushSubscription(bobs), .enqueueOutbox(entry("o_1", subscription: "p_1", at: 1)),
                                   .enqueueOutbox(entry("o_2", kind: .webhook, at: 2))])
            try await store.apply([.savePushSubscription(carols)])
            #expect(try await outbox(store).pendingOutboxEntries(limit: 10).map(\.id) == ["o_2"])
            let state = try await reopenAndLoad(store, subject)
            #expect(state.pushSubscriptions == [carols])
        }
    }

    /// Rows an older relay stored (no sign-in): where accounts share an endpoint the newest subscription
    /// keeps it, an account without any sign-in loses its rows, the rest are kept unbound; the pushes of
    /// removed rows go with them, nothing else is touched.
    @Test(arguments: StoreKind.allCases)
    func theSignInMigrationKeepsOldSubscriptionsOneAccountPerEndpoint(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply(["alice", "bob", "carol"].map {
                .createUser(UserProfile(username: $0, name: $0), passwordHash: "h", at: 1)
            } + [.createToken(hash: "t-bob", username: "bob", at: 2), .createToken(hash: "t-carol", username: "carol", at: 2)])
            try await store.apply([.enqueueOutbox(entry("o_1", subscription: "p_1", at: 1)), .enqueueOutbox(entry("o_3", subscription: "p_3", at: 3)),
                                   .enqueueOutbox(entry("o_4", subscription: "p_4", at: 4)), .enqueueOutbox(entry("o_5", kind: .webhook, at: 5))])
            try await subject.execute(store, subject.pushSignInsRewind + [
                """
                INSERT INTO push_subscriptions (id, username, endpoint, p256dh, auth, created_at) VALUES
                    ('p_1', 'bob', 'https://push.example.net/shared', 'k1', 'a1', 10),
                    ('p_2', 'carol', 'https://push.example.net/shared', 'k2', 'a2', 20),
                    ('p_3', 'bob', 'https://push.example.net/bob', 'k3', 'a3', 30),
                    ('p_4', 'alice', 'https://push.example.net/alice', 'k4', 'a4', 40)
                """,
            ])
            try await subject.close(store)

            let migrated = try await subject.open()
            #expect(try await outbox(migrated).pendingOutboxEntries(limit: 10).map(\.id) == ["o_3", "o_5"])
            let state = try await reopenAndLoad(migrated, subject)
            #expect(state.pushSubscriptions == [
                PushSubscription(id: "p_2", username: "carol", endpoint: "https://push.example.net/shared", p256dh: "k2", auth: "a2",
                                 createdAt: 20, tokenHash: nil),
                PushSubscription(id: "p_3", username: "bob", endpoint: "https://push.example.net/bob", p256dh: "k3", auth: "a3",
                                 createdAt: 30, tokenHash: nil),
            ])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func outboxEntriesSurviveReopeningAndComeDueInOrder(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            let payload: [UInt8] = Array("{\"type\":\"alarm\",\"text\":\"a\u{0}b é\"}".utf8)
            try await store.apply([.enqueueOutbox(entry("o_2", at: 20)), .enqueueOutbox(entry("o_1", at: 10, payload: payload)),
                                   .enqueueOutbox(entry("o_3", kind: .webhook, at: 30))])
            try await subject.close(store)

            let reopened = try await subject.open()
            let box = try outbox(reopened)
            #expect(try await box.outboxDepth() == 3)
            #expect(try await box.nextOutboxAttempt() == 10)
            #expect(try await box.claimDueOutboxEntries(now: 5, limit: 10, lease: 1_000).isEmpty)
            #expect(try await box.pendingOutboxEntries(limit: 10).map(\.id) == ["o_1", "o_2", "o_3"])
            let due = try await box.claimDueOutboxEntries(now: 25, limit: 10, lease: 1_000)
            #expect(due.map(\.id) == ["o_1", "o_2"])
            #expect(due.first == entry("o_1", at: 10, payload: payload), "returned as stored")
            // o_1 and o_2 are claimed until 1025: neither this relay nor another gets them again before.
            #expect(try await box.claimDueOutboxEntries(now: 1_024, limit: 10, lease: 1_000).map(\.id) == ["o_3"])
            #expect(try await box.nextOutboxAttempt() == 1_025)

            try await box.rescheduleOutboxEntry(id: "o_1", at: 50, attempts: 1)
            try await box.removeOutboxEntry(id: "o_2")
            let retried = try await box.claimDueOutboxEntries(now: 100, limit: 10, lease: 1_000)
            #expect(retried.map(\.id) == ["o_1"])
            #expect(retried.first?.attempts == 1 && retried.first?.nextAttemptAt == 50)
            // A lease that ends (the relay died mid-send) makes the entry due again.
            let expired = try await box.claimDueOutboxEntries(now: 3_000, limit: 10, lease: 1_000)
            #expect(expired.map(\.id) == ["o_3", "o_1"])
            #expect(expired.first?.kind == .webhook && expired.first?.subscriptionId == nil)
            try await subject.close(reopened)
        }
    }

    /// After a restart the SQLite store (one relay's own) releases every claim at once; PostgreSQL
    /// (shared) leaves them to their lease.
    @Test(arguments: StoreKind.allCases)
    func claimsOfAnEarlierRunAreReleasedOnlyWhereTheStoreIsTheRelaysOwn(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply([.enqueueOutbox(entry("o_1", at: 10))])
            #expect(try await outbox(store).claimDueOutboxEntries(now: 100, limit: 10, lease: 120_000).map(\.id) == ["o_1"])
            try await subject.close(store)

            let restarted = try await subject.open()
            try await outbox(restarted).releaseClaimsAfterRestart()
            let again = try await outbox(restarted).claimDueOutboxEntries(now: 101, limit: 10, lease: 120_000).map(\.id)
            #expect(again == (kind == .sqlite ? ["o_1"] : []))
            #expect(try await outbox(restarted).claimDueOutboxEntries(now: 120_100, limit: 10, lease: 1_000).map(\.id)
                    == (kind == .sqlite ? [] : ["o_1"]))
            try await subject.close(restarted)
        }
    }

    /// Two relays on one database (PostgreSQL) claiming at the same moment get disjoint entries.
    @Test(arguments: StoreKind.allCases)
    func concurrentClaimsGetDisjointEntries(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            let other = try await subject.open()
            try await store.apply((1...20).map { .enqueueOutbox(entry("o_\($0)", at: Int64($0))) })
            async let first = outbox(store).claimDueOutboxEntries(now: 100, limit: 15, lease: 1_000)
            async let second = outbox(other).claimDueOutboxEntries(now: 100, limit: 15, lease: 1_000)
            let (a, b) = try await (first.map(\.id), second.map(\.id))
            #expect(Set(a).isDisjoint(with: b), "\(a) \(b)")
            #expect(Set(a).union(b).count == 20)
            try await subject.close(other)
            try await subject.close(store)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func cancellingAnAlarmsPushesKeepsItsWebhookCallsAndOtherAlarms(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply([
                .enqueueOutbox(entry("o_1", alarm: "a_1", at: 1)), .enqueueOutbox(entry("o_2", alarm: "a_2", at: 2)),
                .enqueueOutbox(entry("o_3", kind: .webhook, alarm: "a_1", at: 3)),
                .enqueueOutbox(entry("o_4", subscription: "p_9", at: 4)),
            ])
            try await store.apply([.cancelAlarmPushes(alarmId: "a_1"), .deletePushSubscription(id: "p_9")])
            #expect(try await outbox(store).pendingOutboxEntries(limit: 10).map(\.id) == ["o_2", "o_3"])
            try await subject.close(store)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func anOutboxEntryFailingInABatchLeavesTheBatchUnapplied(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let store = try await subject.open()
            try await store.apply([.enqueueOutbox(entry("o_1", at: 1))])
            await #expect(throws: (any Error).self) {
                try await store.apply([.enqueueOutbox(entry("o_2", at: 2)), .enqueueOutbox(entry("o_1", at: 3))])
            }
            #expect(try await outbox(store).pendingOutboxEntries(limit: 10).map(\.id) == ["o_1"])
            try await subject.close(store)
        }
    }
}
