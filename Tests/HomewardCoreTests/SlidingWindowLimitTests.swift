@testable import HomewardCore
import Testing

/// A rate limit holds only the keys with an event inside its window, and never forgets one that is.
struct SlidingWindowLimitTests {
    @Test func countingAnEventDropsTheKeysWhoseEventsAllLeftTheWindow() {
        var limit = SlidingWindowLimit(limit: 3, window: 100)
        for index in 0..<50 { limit.record("user\(index)", now: 0) }
        limit.record("late", now: 99)
        #expect(limit.keyCount == 51)
        limit.record("later", now: 100)
        #expect(limit.keyCount == 2, "the fifty keys of time 0 are out of the window")
    }

    @Test func noEventInsideTheWindowIsForgotten() {
        var limit = SlidingWindowLimit(limit: 2, window: 100)
        limit.record("ann", now: 0)
        limit.record("ann", now: 50)
        limit.forgetExpired(now: 99)
        #expect(limit.isLimited("ann", now: 99))
        limit.forgetExpired(now: 100)
        #expect(!limit.isLimited("ann", now: 100))
        #expect(limit.keyCount == 1, "the event of time 50 is still inside")
        limit.record("ann", now: 120)
        #expect(limit.isLimited("ann", now: 120))
        limit.forgetExpired(now: 219)
        #expect(limit.keyCount == 1)
        limit.forgetExpired(now: 220)
        #expect(limit.keyCount == 0)
    }

    @Test func aResetKeyCountsAfreshAndLeavesNothingBehind() {
        var limit = SlidingWindowLimit(limit: 2, window: 100)
        limit.record("ann", now: 0)
        limit.reset("ann")
        limit.record("ann", now: 10)
        limit.forgetExpired(now: 100)
        #expect(limit.keyCount == 1, "ann's event of time 10 stays")
        #expect(!limit.isLimited("ann", now: 100))
        limit.forgetExpired(now: 110)
        #expect(limit.keyCount == 0)
    }
}
