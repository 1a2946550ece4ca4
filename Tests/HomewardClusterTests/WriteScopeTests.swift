@testable import HomewardCore
import HomewardCoreTestSupport
import Testing

/// The users each stored change concerns (`RelayState.writeScope`), which the store checks a relay's write
/// against (`RelayStore.applyChecked`): every entity with its owner, every relation with both users; what names
/// an entity only by id is looked up in the state, or, when the decision removed it, among the owners it recorded.
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
            state.removedOwners = RemovedOwners()
            state.apply(changes)
            #expect(state.writeScope(of: changes) == expected[step], "step \(step): \(changes)")
        }
    }

    @Test func anEntityTheDecisionRemovedIsGivenTheOwnerItRecorded() {
        let end: [StoreChange] = [.endSession(id: "se_1", reason: "ended", at: 2)]
        var state = RelayState()
        state.apply([.saveSession(FollowSession(id: "se_1", owner: "ann", note: nil, startedAt: 1))])
        var unrecorded = state
        unrecorded.apply(end)
        #expect(unrecorded.writeScope(of: end) == [], "removed and not recorded: the write names nobody for it")

        state.removedOwners = RemovedOwners()
        state.apply(end)
        #expect(state.sessions["se_1"] == nil)
        #expect(state.writeScope(of: end) == ["ann"])
    }

    @Test func bookkeepingAndTheOutboxConcernNobody() {
        let changes: [StoreChange] = [.lastSeen(username: "ann", at: 1), .useToken(hash: "t", at: 1), .cancelAlarmPushes(alarmId: "al_1")]
        #expect(RelayState().writeScope(of: changes) == [])
    }
}
