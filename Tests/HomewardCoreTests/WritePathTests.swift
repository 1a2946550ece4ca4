@testable import HomewardCore
import Testing

/// The write path's transitions, driven as a value: failures mark memory unstored and ask for a read-back once,
/// read-backs are paced, a successful one clears the mark and takes the store's versions, revoked tokens are
/// handed out once, and the bookkeeping of decisions in flight and of a request decided again.
struct WritePathTests {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    @Test func aFailedWriteIsCountedKeptAndAsksForOneReadBack() {
        var path = WritePath<Int>()
        let asked = path.writeFailed(Failure(description: "disk full"))
        #expect(asked, "the first failure asks for a read-back")
        #expect(path.unstored)
        #expect(path.failures == 1)
        #expect(path.lastFailure == "disk full")
        #expect(path.readBackDue(now: 0), "due at once, whatever the clock says")
        let askedAgain = path.writeFailed(Failure(description: "still full"))
        #expect(!askedAgain, "already unstored: read-backs keep their pace")
        #expect(path.failures == 2)
        #expect(path.lastFailure == "still full")
    }

    @Test func failedSinceTellsOnlyOfFailuresAfterTheCount() {
        var path = WritePath<Int>()
        let before = path.failures
        #expect(path.failedSince(before) == nil)
        _ = path.writeFailed(Failure(description: "timeout"))
        #expect(path.failedSince(before) == "timeout")
        #expect(path.failedSince(path.failures) == nil)
    }

    @Test func readBacksArePacedWhileTheyFail() {
        // A reload after another relay's change finds the store down: news once.
        var path = WritePath<Int>()
        path.readingBack(at: 5000)
        let news = path.readBackFailed(), again = path.readBackFailed()
        #expect(news, "the first failed read-back is news")
        #expect(!again, "a second one is not")
        // After a failed write it is no news either.
        var failed = WritePath<Int>()
        _ = failed.writeFailed(Failure(description: "down"))
        let afterWrite = failed.readBackFailed()
        #expect(!afterWrite)
        #expect(path.unstored)
        #expect(!path.readBackDue(now: 5000 + WritePath<Int>.readBackInterval - 1))
        #expect(path.readBackDue(now: 5000 + WritePath<Int>.readBackInterval))
    }

    @Test func aReadBackClearsTheMarkAndTakesTheStoresVersions() {
        var path = WritePath<Int>(versions: ["ann": 1])
        let wasUnstored = path.readBack(versions: ["ann": 2])
        #expect(!wasUnstored, "nothing was unstored")
        #expect(path.versions == ["ann": 2])
        _ = path.writeFailed(Failure(description: "down"))
        let back = path.readBack(versions: ["ann": 3, "bob": 1])
        #expect(back, "storage is back")
        #expect(!path.unstored)
        #expect(path.versions == ["ann": 3, "bob": 1])
        #expect(path.failures == 1, "the failure stays counted")
    }

    @Test func aSpoolNotStoredWaitsOneIntervalForTheNextReadBack() {
        var path = WritePath<Int>()
        let marked = path.markUnstored(), markedAgain = path.markUnstored()
        #expect(marked)
        #expect(!markedAgain, "once is enough")
        _ = path.readBack(versions: nil)
        path.spoolNotStored(at: 7000)
        #expect(path.unstored)
        #expect(!path.readBackDue(now: 7000))
        #expect(path.readBackDue(now: 7000 + WritePath<Int>.readBackInterval))
    }

    @Test func versionsMoveOnOnlyForwardAndOnlyWhenTheStoreKeepsThem() {
        var shared = WritePath<Int>(versions: ["ann": 4, "bob": 2])
        shared.versionsMoved(["ann": 5, "bob": 1, "cid": 1])
        #expect(shared.versions == ["ann": 5, "bob": 2, "cid": 1])
        var alone = WritePath<Int>()
        alone.versionsMoved(["ann": 5])
        #expect(alone.versions == nil, "a store that keeps no versions: nothing to move")
    }

    @Test func stagedChangesJoinTheJournalAndTheirRevokedTokensAreHandedOutOnce() {
        var path = WritePath<Int>()
        path.stage([.revokeToken(hash: "t1"), .removeMessage(id: "m")], bases: [:])
        path.stage([.revokeToken(hash: "t2")], bases: [:])
        #expect(!path.journal.isIdle)
        let batch = path.journal.nextBatch()
        #expect(batch?.count == 3)
        let revoked = path.takeRevokedTokens(), revokedAgain = path.takeRevokedTokens()
        #expect(revoked == ["t1", "t2"])
        #expect(revokedAgain.isEmpty)
    }

    @Test func lastSeenTimesAreScheduledOnceAndTakenTogether() {
        var path = WritePath<Int>()
        let first = path.lastSeen("ann", at: 10), second = path.lastSeen("bob", at: 11)
        let later = path.lastSeen("ann", at: 12)
        #expect(first, "the first one schedules the write")
        #expect(!second && !later, "the others join it")
        let changes = path.takeLastSeen()
        #expect(changes.count == 2 && changes.contains(.lastSeen(username: "ann", at: 12))
                && changes.contains(.lastSeen(username: "bob", at: 11)), "one change per user, the latest time")
        let again = path.takeLastSeen()
        #expect(again.isEmpty)
        let afterTaken = path.lastSeen("cid", at: 13)
        #expect(afterTaken, "none waited: scheduled again")
    }

    @Test func onlyTheFirstDecisionInFlightStartsAfresh() {
        var path = WritePath<Int>()
        let first = path.decisionStarted(), second = path.decisionStarted()
        #expect(first)
        #expect(!second, "one is still in flight")
        path.decisionEnded()
        path.decisionEnded()
        #expect(path.decisionsInFlight == 0)
        let afresh = path.decisionStarted()
        #expect(afresh, "none in flight: afresh")
    }

    @Test func aRequestDecidedAgainCountsOnFromItsFirstAttempt() {
        var path = WritePath<Int>()
        let start = ContinuousClock.now
        let first = path.attempt(at: start)
        #expect(first == WritePath<Int>.Attempt(attempts: 1, since: start))
        path.decidingAgain(first)
        let second = path.attempt(at: start + .seconds(1))
        #expect(second == WritePath<Int>.Attempt(attempts: 2, since: start), "counted since the first decision")
        path.decidedAgain()
        #expect(path.attempt(at: start + .seconds(2)).attempts == 1, "the next request is a first attempt")
    }
}
