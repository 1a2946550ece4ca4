import Foundation
import XCTest

@testable import HomewardServer

final class FreedMemoryTests: XCTestCase {
    /// 64 MiB in small blocks, freed except the last (so that none of it is at the top of the heap, which free
    /// would give back by itself): resident until released, as what a start's load drops is.
    func testReleaseGivesFreedPagesBackToTheKernel() throws {
        let blockSize = 4096, count = 16_384
        var blocks: [UnsafeMutableRawPointer] = []
        blocks.reserveCapacity(count)
        for _ in 0..<count {
            let block = try XCTUnwrap(malloc(blockSize))
            memset(block, 1, blockSize)
            blocks.append(block)
        }
        for block in blocks.dropLast() { free(block) }
        defer { free(blocks[blocks.count - 1]) }

        let before = try residentAnonymousKiB()
        FreedMemory.release()
        let after = try residentAnonymousKiB()
        XCTAssertGreaterThan(before - after, 48 * 1024, "resident anonymous memory went from \(before) KiB to \(after) KiB")
    }

    private func residentAnonymousKiB() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("RssAnon:") })
        return try XCTUnwrap(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }
}
