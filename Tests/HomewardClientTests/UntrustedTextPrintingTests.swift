@testable import HomewardCLI
import HomewardClient
import HomewardProtocol
import XCTest

/// Names and texts come from other users: printed, they must not be able to drive the terminal
/// (escape sequences, carriage returns) or reorder the line (bidirectional overrides).
final class UntrustedTextPrintingTests: XCTestCase {
    func testControlAndBidiCharactersArePrintedAsEscapes() {
        XCTAssertEqual(HumanFormat.shown("help\u{0} at the bridge"), "help\\u0000 at the bridge")
        XCTAssertEqual(HumanFormat.shown("\u{1B}[2J\u{1B}]0;owned\u{7}"), "\\u001B[2J\\u001B]0;owned\\u0007")
        XCTAssertEqual(HumanFormat.shown("Ann\u{202E}evil\u{2066}"), "Ann\\u202Eevil\\u2066")
        XCTAssertEqual(HumanFormat.shown("fine\r\nover"), "fine\\u000D\\u000Aover")
        XCTAssertEqual(HumanFormat.shown("\u{9B}31m"), "\\u009B31m", "C1 CSI")
        XCTAssertEqual(HumanFormat.shown("Alice Ångström 🙂 مريم"), "Alice Ångström 🙂 مريم", "ordinary text unchanged")
    }

    func testEventLinesAndTablesEscapeWhatOthersWrote() {
        let printer = EventPrinter(console: Console(json: false))
        let evil = User(username: "mallory", name: "\u{1B}[31mMallory\u{202E}")
        let line = printer.describe(RelayEvent(.friendRequest(from: evil)))
        XCTAssertNotNil(line)
        XCTAssertFalse(line!.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x202E }, line!)
        XCTAssertTrue(line!.contains("\\u001B[31mMallory\\u202E (mallory)"), line!)

        var table = TextTable("USERNAME", "NAME")
        table.add("mallory", "\u{1B}[2JMallory")
        XCTAssertEqual(table.render(), "USERNAME  NAME\nmallory   \\u001B[2JMallory")
    }
}
