import HomewardProtocol

extension JSONValue {
    /// The number of elements of an array, nil for anything else.
    package var arrayCount: Int? {
        if case .array(let elements) = self { return elements.count }
        return nil
    }

    package subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    /// The member names of an object, empty for anything else.
    package var keys: [String] {
        if case .object(let members) = self { return members.map(\.0) }
        return []
    }

    package var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }
}

import XCTest

/// Checks that `actual` is an object with every member of `expected` (extra members are allowed:
/// the relay may add optional fields).
package func XCTAssertJSONContains(_ actual: JSONValue?, _ expected: JSONValue, _ message: String = "",
                           file: StaticString = #filePath, line: UInt = #line) {
    guard let actual, case .object = actual else {
        return XCTFail("expected an object containing \(JSONWriter.string(expected)), got \(actual.map(JSONWriter.string) ?? "nothing") \(message)", file: file, line: line)
    }
    guard case .object(let members) = expected else { return XCTFail("expected must be an object", file: file, line: line) }
    for (key, value) in members where actual[key] != value {
        XCTFail("\(key): expected \(JSONWriter.string(value)), got \(actual[key].map(JSONWriter.string) ?? "nothing") in \(JSONWriter.string(actual)) \(message)", file: file, line: line)
    }
}

extension JSONValue {
    /// The strings of an array of strings, as a set (for order-insensitive comparisons).
    package var stringSet: Set<String> {
        Set(arrayValue?.compactMap(\.stringValue) ?? [])
    }
}
