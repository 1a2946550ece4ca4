@testable import HomewardCore
import Testing

/// The mailbox's queue. `mergeIntoLast` lets a command join the one submitted just before it (consecutive
/// disconnects become one command) without moving it ahead of anything submitted in between.
struct FIFOTests {
    @Test func mergingChangesOnlyTheLastElementWhereverItWaits() {
        var fifo = FIFO<[Int]>()
        #expect(!fifo.mergeIntoLast { $0.append(0); return true }, "nothing to merge into")
        fifo.append([1])
        #expect(fifo.mergeIntoLast { $0.append(2); return true })
        fifo.append([3])
        fifo.append([4])
        #expect(fifo.popFirst() == [1, 2])
        // [3] and [4] now wait in the half that is popped from: [4] is still the last.
        #expect(fifo.mergeIntoLast { $0.append(5); return true })
        fifo.append([6])
        #expect(!fifo.mergeIntoLast { _ in false }, "the caller declines: it appends instead")
        fifo.append([7])
        #expect(fifo.popFirst() == [3])
        #expect(fifo.popFirst() == [4, 5])
        #expect(fifo.popFirst() == [6])
        #expect(fifo.popFirst() == [7])
        #expect(fifo.popFirst() == nil)
        #expect(!fifo.mergeIntoLast { $0.append(8); return true }, "empty again")
    }
}
