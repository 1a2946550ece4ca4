import XCTest

/// `XCTAssertThrowsError` for async expressions, which its autoclosure cannot take.
package func assertThrowsAsync<T>(_ expression: () async throws -> T, _ message: String = "expected an error",
                          file: StaticString = #filePath, line: UInt = #line) async {
    do {
        _ = try await expression()
        XCTFail(message, file: file, line: line)
    } catch {}
}
