@testable import HomewardCore
import Testing

/// Who a cache of connected users may evict, and when: a user is due `grace` after their latest note, in the order
/// noted, a sweep taking only what is due (never walking the others).
struct IdleResidentsTests {
    @Test func aUserIsDueOnceTheGraceAfterTheirLatestNoteHasPassed() {
        var idle = IdleResidents(grace: 100)
        idle.note("ann", at: 0)
        idle.note("bob", at: 10)
        #expect(idle.nextDue == 100)
        #expect(idle.takeDue(at: 99, limit: 10).isEmpty)
        #expect(idle.takeDue(at: 100, limit: 10) == ["ann"])
        #expect(idle.takeDue(at: 200, limit: 10) == ["bob"])
        #expect(idle.takeDue(at: 1_000, limit: 10).isEmpty, "each is taken once")
        #expect(idle.nextDue == nil)
    }

    @Test func aUserNotedAgainIsDueFromTheLatestNoteOnly() {
        var idle = IdleResidents(grace: 100)
        idle.note("ann", at: 0)
        idle.note("ann", at: 50)
        #expect(idle.takeDue(at: 120, limit: 10).isEmpty, "the older entry is skipped")
        #expect(idle.takeDue(at: 150, limit: 10) == ["ann"])
        #expect(idle.count == 0)
    }

    @Test func aForgottenUserIsNotDueAndASweepTakesAtMostItsLimitInOrder() {
        var idle = IdleResidents(grace: 10)
        for (index, name) in ["a", "b", "c", "d"].enumerated() { idle.note(name, at: Int64(index)) }
        idle.forget("b")
        #expect(idle.takeDue(at: 100, limit: 2) == ["a", "c"])
        #expect(idle.takeDue(at: 100, limit: 2) == ["d"])
    }
}
