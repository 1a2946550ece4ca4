@testable import HomewardCore
import Testing

/// Which notices a relay applies to its cache, in what order, and when it reloads instead.
struct NoticeSequencerTests {
    static let ms: UInt64 = 1_000_000

    static func notice(_ node: String, _ counts: Int64?..., event: String? = nil) -> ChangeNotice {
        ChangeNotice(node: node, events: event.map { [ChangeNotice.Event(recipients: ["bob"], message: ["type": .string($0)])] } ?? [],
                     commits: counts.map { ChangeNotice.Commit(count: $0, changes: [.removeMessage(id: "m\($0 ?? 0)")]) })
    }

    @Test func commitsThatFollowTheCacheAreAppliedInCountOrder() {
        var sequencer = NoticeSequencer()
        let first = Self.notice("a", 11, 13), second = Self.notice("b", 12)
        let step = sequencer.take([first, second], loaded: 10, inOrder: true, now: 0)
        #expect(step == .apply([first.commits![0], second.commits![0], first.commits![1]], deliver: [first.delivered, second.delivered]))
        #expect(sequencer.held.isEmpty)
    }

    @Test func aNoticeAheadIsHeldWithThoseAfterItUntilTheGapFills() {
        var sequencer = NoticeSequencer()
        let ahead = Self.notice("a", 12, event: "x"), eventsOnly = Self.notice("c", event: "y")
        #expect(sequencer.take([ahead, eventsOnly], loaded: 10, inOrder: true, now: 0) == .apply([], deliver: []))
        #expect(sequencer.held.count == 2)
        #expect(sequencer.remainingHold(now: 40 * Self.ms) == 60 * Self.ms)
        let filler = Self.notice("b", 11)
        let step = sequencer.take([filler], loaded: 10, inOrder: true, now: 50 * Self.ms)
        #expect(step == .apply(filler.commits! + ahead.commits!, deliver: [ahead.delivered, eventsOnly, filler.delivered]))
        #expect(sequencer.held.isEmpty && sequencer.remainingHold(now: 0) == nil)
    }

    @Test func aGapThatDoesNotFillInTimeReloads() {
        var sequencer = NoticeSequencer()
        let ahead = Self.notice("a", 12)
        _ = sequencer.take([ahead], loaded: 10, inOrder: true, now: 0)
        #expect(sequencer.take([], loaded: 10, inOrder: true, now: 99 * Self.ms) == .apply([], deliver: []))
        #expect(sequencer.take([], loaded: 10, inOrder: true, now: 100 * Self.ms) == .reload(deliver: [ahead]))
        #expect(sequencer.held.isEmpty && sequencer.remainingHold(now: 0) == nil)
    }

    @Test func whatTheCacheCannotPlaceReloadsAtOnce() {
        let cases: [(String, [ChangeNotice], Int64?, Bool)] = [
            ("a commit the cache may already hold", [Self.notice("a", 10)], 10, true),
            ("a notice whose commits could not be read", [Self.notice("a", 11), .unreadable], 10, true),
            ("a store that counts nothing", [Self.notice("a", nil)], 10, true),
            ("a cache loaded from such a store", [Self.notice("a", 11)], nil, true),
            ("this relay's own write out of order", [Self.notice("a", 11)], 10, false),
            ("one count twice", [Self.notice("a", 11), Self.notice("b", 11)], 10, true),
        ]
        for (what, notices, loaded, inOrder) in cases {
            var sequencer = NoticeSequencer()
            #expect(sequencer.take(notices, loaded: loaded, inOrder: inOrder, now: 0) == .reload(deliver: notices), "\(what)")
        }
    }

    @Test func aReloadCoversTheNoticesHeldBeforeIt() {
        var sequencer = NoticeSequencer()
        let ahead = Self.notice("a", 12, 14)
        _ = sequencer.take([ahead], loaded: 10, inOrder: true, now: 0)
        sequencer.reloaded(at: 12)
        // 14 is still to come; 13 fills the gap.
        let filler = Self.notice("b", 13)
        let step = sequencer.take([filler], loaded: 12, inOrder: true, now: Self.ms)
        #expect(step == .apply([filler.commits![0], ahead.commits![1]], deliver: [ahead.delivered, filler.delivered]))
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
