import Foundation
import HomewardCore
import Testing

/// Shared secrets (the cluster's one VAPID key): kept once by a store several relays share, never by
/// one relay's own store.
extension StoreContractTests {
    @Test(arguments: StoreKind.allCases)
    func aSharedSecretIsStoredOnceAndEveryStartOnTheDatabaseGetsThatOne(_ kind: StoreKind) async throws {
        try await with(kind) { subject in
            let stores = try await [subject.open(), subject.open(), subject.open(), subject.open()]
            guard kind == .postgres else {
                // SQLite is one relay's own: it keeps nothing, and the relay keeps its key file instead.
                #expect(try await stores[0].sharedSecret("vapid-key", storingIfAbsent: "candidate") == nil)
                #expect(try await stores[0].sharedSecret("vapid-key", storingIfAbsent: nil) == nil)
                for store in stores { try await subject.close(store) }
                return
            }
            #expect(try await stores[0].sharedSecret("vapid-key", storingIfAbsent: nil) == nil, "reading only stores nothing")

            // Four first starts at once, each offering its own candidate: all get the same one of them.
            let got = try await withThrowingTaskGroup(of: String?.self) { group in
                for (index, store) in stores.enumerated() {
                    group.addTask { try await store.sharedSecret("vapid-key", storingIfAbsent: "candidate-\(index)") }
                }
                return try await group.reduce(into: [String?]()) { $0.append($1) }
            }
            let winner = try #require(got.first ?? nil)
            #expect(got.allSatisfy { $0 == winner }, "\(got)")
            #expect((0..<4).map { "candidate-\($0)" }.contains(winner))
            for store in stores { try await subject.close(store) }

            // A later start reads it back and does not replace it; other names are separate.
            let restarted = try await subject.open()
            #expect(try await restarted.sharedSecret("vapid-key", storingIfAbsent: "candidate-later") == winner)
            #expect(try await restarted.sharedSecret("vapid-key", storingIfAbsent: nil) == winner)
            #expect(try await restarted.sharedSecret("other", storingIfAbsent: "other-value") == "other-value")
            try await subject.close(restarted)
        }
    }
}
