@testable import HomewardCore
import Testing

/// Which notices a relay applies to its cache, in what order, and when it reloads instead: each commit names
/// the versions it gave the users it concerns, and waits until the cache holds every earlier write about them.
struct NoticeSequencerTests {
    static let ms: UInt64 = 1_000_000

    static func notice(_ node: String, _ commits: UserVersions?..., event: String? = nil) -> ChangeNotice {
        ChangeNotice(node: node, events: event.map { [ChangeNotice.Event(recipients: ["bob"], message: ["type": .string($0)])] } ?? [],
                     commits: commits.enumerated().map { index, versions in
                         ChangeNotice.Commit(versions: versions, changes: [.removeMessage(id: "m\(node)\(index)")])
                     })
    }

    @Test func commitsThatFollowTheCacheAreAppliedInTheirUsersOrder() {
        var sequencer = NoticeSequencer()
        // b's commit about bob comes after a's second one, which needs it.
        let first = Self.notice("a", ["ann": 11], ["ann": 12, "bob": 6]), second = Self.notice("b", ["bob": 5])
        let step = sequencer.take([first, second], versions: ["ann": 10, "bob": 4], now: 0)
        #expect(step == .apply([first.commits![0], second.commits![0], first.commits![1]], deliver: [first.delivered, second.delivered]))
        #expect(sequencer.held.isEmpty)
    }

    @Test func writesAboutOtherUsersDoNotWaitForEachOther() {
        var sequencer = NoticeSequencer()
        let ann = Self.notice("a", ["ann": 3]), cid = Self.notice("b", ["cid": 1])
        #expect(sequencer.take([ann, cid], versions: ["ann": 2], now: 0)
                == .apply(ann.commits! + cid.commits!, deliver: [ann.delivered, cid.delivered]))
    }

    @Test func aCommitWithoutUsersIsAppliedAtOnce() {
        var sequencer = NoticeSequencer()
        let outbox = Self.notice("a", [:])
        #expect(sequencer.take([outbox], versions: [:], now: 0) == .apply(outbox.commits!, deliver: [outbox.delivered]))
    }

    /// A cache of connected users knows the versions of its residents and of those it heard of since, not
    /// everyone's: a commit is placed by the users it knows, and one about nobody it knows is applied as it comes
    /// (a whole cache would hold it, since a user it lacks is at 0 there).
    @Test func aPartialCacheUsesOnlyTheVersionsItKnows() {
        var whole = NoticeSequencer(), partial = NoticeSequencer()
        let stranger = Self.notice("a", ["zed": 7])
        #expect(whole.take([stranger], versions: ["ann": 2], now: 0) == .apply([], deliver: []))
        #expect(partial.take([stranger], versions: ["ann": 2], complete: false, now: 0)
                == .apply(stranger.commits!, deliver: [stranger.delivered]))
        // A resident's version still orders: ann's commit 4 waits for 3, whoever else it names.
        let ahead = Self.notice("b", ["ann": 4, "zed": 9])
        #expect(partial.take([ahead], versions: ["ann": 2], complete: false, now: 0) == .apply([], deliver: []))
        #expect(partial.isHolding)
        #expect(NoticeSequencer.placement(of: ["ann": 2, "zed": 1], in: ["ann": 2], complete: false) == .held)
    }

    @Test func aNoticeAheadIsHeldWithThoseAfterItUntilTheGapFills() {
        var sequencer = NoticeSequencer()
        let ahead = Self.notice("a", ["ann": 12], event: "x"), eventsOnly = Self.notice("c", event: "y")
        #expect(sequencer.take([ahead, eventsOnly], versions: ["ann": 10], now: 0) == .apply([], deliver: []))
        #expect(sequencer.held.count == 2)
        #expect(sequencer.isHolding)
        #expect(sequencer.remainingHold(now: 40 * Self.ms) == 60 * Self.ms)
        let filler = Self.notice("b", ["ann": 11])
        let step = sequencer.take([filler], versions: ["ann": 10], now: 50 * Self.ms)
        #expect(step == .apply(filler.commits! + ahead.commits!, deliver: [ahead.delivered, eventsOnly, filler.delivered]))
        #expect(sequencer.held.isEmpty && sequencer.remainingHold(now: 0) == nil)
    }

    @Test func aGapThatDoesNotFillInTimeReloads() {
        var sequencer = NoticeSequencer()
        let ahead = Self.notice("a", ["ann": 12])
        _ = sequencer.take([ahead], versions: ["ann": 10], now: 0)
        #expect(sequencer.take([], versions: ["ann": 10], now: 99 * Self.ms) == .apply([], deliver: []))
        #expect(sequencer.take([], versions: ["ann": 10], now: 100 * Self.ms) == .reload(deliver: [ahead]))
        #expect(sequencer.held.isEmpty && sequencer.remainingHold(now: 0) == nil)
    }

    @Test func aCommitTheCacheHoldsIsSkipped() {
        var sequencer = NoticeSequencer()
        // Committed before the cache's last load: its changes are in the cache already; its events still go out.
        let old = Self.notice("a", ["ann": 9, "bob": 4], event: "x")
        #expect(sequencer.take([old], versions: ["ann": 10, "bob": 4], now: 0) == .apply([], deliver: [old.delivered]))
    }

    @Test func whatTheCacheCannotPlaceReloadsAtOnce() {
        let cases: [(String, [ChangeNotice], UserVersions?)] = [
            ("held for one user and missing for another", [Self.notice("a", ["ann": 10, "bob": 6])], ["ann": 10, "bob": 4]),
            ("a notice whose commits could not be read", [Self.notice("a", ["ann": 11]), .unreadable], ["ann": 10]),
            ("a store that keeps no versions", [Self.notice("a", nil)], ["ann": 10]),
            ("a cache loaded from such a store", [Self.notice("a", ["ann": 11])], nil),
        ]
        for (what, notices, versions) in cases {
            var sequencer = NoticeSequencer()
            #expect(sequencer.take(notices, versions: versions, now: 0) == .reload(deliver: notices), "\(what)")
        }
    }

    @Test func aReloadCoversTheNoticesHeldBeforeIt() {
        var sequencer = NoticeSequencer()
        let ahead = Self.notice("a", ["ann": 12], ["ann": 14])
        _ = sequencer.take([ahead], versions: ["ann": 10], now: 0)
        sequencer.reloaded(at: ["ann": 12])
        // 14 is still to come; 13 fills the gap.
        let filler = Self.notice("b", ["ann": 13])
        let step = sequencer.take([filler], versions: ["ann": 12], now: Self.ms)
        #expect(step == .apply([filler.commits![0], ahead.commits![1]], deliver: [ahead.delivered, filler.delivered]))
    }

    @Test func placementAgainstTheCache() {
        #expect(NoticeSequencer.placement(of: ["ann": 3], in: ["ann": 2]) == .next)
        #expect(NoticeSequencer.placement(of: ["ann": 1], in: [:]) == .next, "a user the cache has no version of is at 0")
        #expect(NoticeSequencer.placement(of: ["ann": 3], in: ["ann": 3]) == .held)
        #expect(NoticeSequencer.placement(of: ["ann": 4], in: ["ann": 2]) == .ahead)
        #expect(NoticeSequencer.placement(of: ["ann": 3, "bob": 2], in: ["ann": 2]) == .ahead)
        #expect(NoticeSequencer.placement(of: ["ann": 3, "bob": 2], in: ["ann": 3, "bob": 0]) == .inconsistent)
    }
}

extension ChangeNotice {
    /// The notice as it is delivered: every commit applied.
    var delivered: ChangeNotice {
        var notice = self
        notice.commits = []
        return notice
    }
}
