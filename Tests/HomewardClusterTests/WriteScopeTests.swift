@testable import HomewardCore
import HomewardCoreTestSupport
import Testing

/// The users each stored change concerns (`RelayState.writeScope`), which the store checks a relay's write
/// against (`RelayStore.applyChecked`): every entity with its owner, every relation with both users; what names
/// an entity only by id is looked up in the state the write was decided from, where an entity it ends still is.
struct WriteScopeTests {
    @Test func everyChangeOfTheScriptNamesItsOwnersAndBothUsersOfARelation() {
        let expected: [[String]] = [
            ["ann", "bob", "cat", "dan"], ["ann", "bob"], [], ["ann", "bob", "cat", "dan"], ["ann", "dan"], ["ann", "bob"],
            ["ann", "dan"], ["ann", "cat"], ["ann", "bob"], ["ann"], ["ann"], ["bob"], ["bob"], ["ann"], ["ann"], ["bob"],
            ["ann", "cat"], ["cat"], ["ann"], ["ann"], ["ann"], ["ann"], ["ann"], ["ann", "bob"], ["ann", "bob"],
            ["ann", "bob"], ["bob"], ["ann"], ["ann", "bob"], ["ann", "cat"], ["ann", "eve"],
        ]
        #expect(expected.count == StoreChangeScript.commits.count)
        var state = RelayState()
        for (step, changes) in StoreChangeScript.commits.enumerated() {
            let decidedFrom = state
            state.apply(changes)
            #expect(decidedFrom.writeScope(of: changes, after: state) == expected[step], "step \(step): \(changes)")
        }
    }

    @Test func anEntityEndedByTheWriteIsFoundWhereItWasDecided() {
        var before = RelayState()
        before.apply([.saveSession(FollowSession(id: "se_1", owner: "ann", note: nil, startedAt: 1))])
        var after = before
        after.apply([.endSession(id: "se_1", reason: "ended", at: 2)])
        #expect(before.writeScope(of: [.endSession(id: "se_1", reason: "ended", at: 2)], after: after) == ["ann"])
        #expect(after.writeScope(of: [.endSession(id: "se_1", reason: "ended", at: 2)], after: after) == [],
                "no longer in the state: the write names nobody for it")
    }

    @Test func bookkeepingAndTheOutboxConcernNobody() {
        let changes: [StoreChange] = [.lastSeen(username: "ann", at: 1), .useToken(hash: "t", at: 1), .cancelAlarmPushes(alarmId: "al_1")]
        #expect(RelayState().writeScope(of: changes, after: RelayState()) == [])
    }
}
