import Foundation
@testable import HomewardCore
import HomewardCoreTestSupport
import HomewardProtocol
import Testing

/// The statements every change is stored with (`StoreChange.statements(at:)`), as both stores take them.
struct StoredStatementTests {
    private func placeholders(_ statement: StoredStatement) -> Int { statement.sql.filter { $0 == "?" }.count }

    @Test func everyStatementOfEveryChangeHasOneArgumentPerPlaceholder() {
        for change in StoreChangeScript.commits.joined() {
            for statement in change.statements(at: 1) {
                #expect(placeholders(statement) == statement.arguments.count, "\(statement.sql)")
            }
        }
    }

    @Test func manyRowsGoInStatementsThatStayWithinTheArgumentLimit() {
        let friends = (0..<5_000).map { "friend\($0)" }
        let statements = StoreChange.setStandingShare(owner: "ann", friends).statements(at: 1)
        let inserts = statements.filter { $0.sql.hasPrefix("INSERT INTO standing_shares") }
        #expect(inserts.count == 2)
        #expect(inserts.allSatisfy { $0.arguments.count <= StoredStatement.argumentLimit && placeholders($0) == $0.arguments.count })
        // Every friend once, in order, with its position.
        let rows = inserts.flatMap(\.arguments).chunked(3)
        #expect(rows.count == friends.count)
        #expect(rows.enumerated().allSatisfy { index, row in row == [.text("ann"), .text(friends[index]), .int(Int64(index))] })
    }

    @Test func aMultiRowInsertCarriesItsOneRowStatementWithTheSameColumnsAndConflictClause() throws {
        let statements = StoreChange.setStandingShare(owner: "ann", ["bob", "cid", "dan"]).statements(at: 1)
        let insert = try #require(statements.first { $0.sql.hasPrefix("INSERT INTO standing_shares") })
        let row = try #require(insert.eachRow)
        #expect(row.width == 3 && placeholders(StoredStatement(row.sql, [])) == 3)
        // The multi-row text is the one-row text with more rows of placeholders, the same suffix after them.
        #expect(row.sql.replacingOccurrences(of: "VALUES (?, ?, ?)", with: "VALUES (?, ?, ?), (?, ?, ?), (?, ?, ?)") == insert.sql)
        #expect(insert.arguments.count == 3 * row.width)
        #expect(statements.filter { !$0.sql.hasPrefix("INSERT") }.allSatisfy { $0.eachRow == nil })
    }

    @Test func noRowsWriteNoInsert() {
        let statements = StoreChange.setAlarmContacts(owner: "ann", []).statements(at: 1)
        #expect(statements == [StoredStatement("DELETE FROM alarm_contacts WHERE owner = ?", [.text("ann")])])
    }

    @Test func aTextValueWithNULRefusesTheBatchButFreeTextMayHoldIt() throws {
        let profile = UserProfile(username: "ann", name: "Ann\u{0} of the bridge")
        let stored = try [StoreChange.createUser(profile, passwordHash: "h", at: 1)].statements(at: 1)
        #expect(stored.first?.arguments.contains(.freeText("Ann\u{0} of the bridge")) == true)

        let subscription = PushSubscription(id: "ps_1", username: "ann", endpoint: "https://push.example/a\u{0}b", p256dh: "k",
                                            auth: "a", createdAt: 1, tokenHash: nil)
        let batch: [StoreChange] = [.createUser(profile, passwordHash: "h", at: 1), .savePushSubscription(subscription)]
        #expect(throws: StoreKeyError.self) { try batch.statements(at: 1) }
        #expect(StoreChange.savePushSubscription(subscription).keyWithNUL == "https://push.example/a\u{0}b")
        #expect(StoreChange.removeFriendship("ann", "bob\u{0}").keyWithNUL == "bob\u{0}")
        #expect(StoreChange.createUser(profile, passwordHash: "h", at: 1).keyWithNUL == nil)
    }
}

private extension Array {
    func chunked(_ size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}
