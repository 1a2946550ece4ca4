import HomewardProtocol
import NIOCore
import XCTest

final class JSONParserTests: XCTestCase {
    private func parse(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> JSONValue? {
        do {
            return try JSONParser.parse(text)
        } catch {
            XCTFail("failed to parse \(text.debugDescription): \(error)", file: file, line: line)
            return nil
        }
    }

    private func assertRejects(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try JSONParser.parse(text), "accepted \(text.debugDescription)", file: file, line: line)
    }

    private func nested(_ depth: Int) -> String {
        String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
    }

    // MARK: Valid documents

    func testParsesScalars() {
        XCTAssertEqual(parse("null"), .null)
        XCTAssertEqual(parse("true"), .bool(true))
        XCTAssertEqual(parse("false"), .bool(false))
        XCTAssertEqual(parse("0"), .int(0))
        XCTAssertEqual(parse("-0"), .int(0))
        XCTAssertEqual(parse("42"), .int(42))
        XCTAssertEqual(parse("-17"), .int(-17))
        XCTAssertEqual(parse("\"hi\""), .string("hi"))
        XCTAssertEqual(parse(" \t\r\n 7 \n"), .int(7), "surrounding whitespace is allowed")
    }

    func testParsesNumbersWithFractionsAndExponents() {
        guard case .double(let a)? = parse("57.7089") else { return XCTFail("not a double") }
        XCTAssertEqual(a, 57.7089)
        guard case .double(let b)? = parse("-1.5e3") else { return XCTFail("not a double") }
        XCTAssertEqual(b, -1500)
        guard case .double(let c)? = parse("1E-2") else { return XCTFail("not a double") }
        XCTAssertEqual(c, 0.01)
        guard case .double(let d)? = parse("0.0") else { return XCTFail("not a double") }
        XCTAssertEqual(d, 0)
        guard case .double(let e)? = parse("2e+2") else { return XCTFail("not a double") }
        XCTAssertEqual(e, 200)
    }

    func testIntegersStayExactAtInt64Limits() {
        XCTAssertEqual(parse("9223372036854775807"), .int(Int64.max))
        XCTAssertEqual(parse("-9223372036854775808"), .int(Int64.min))
        guard case .int(let exact)? = parse("9007199254740993") else { return XCTFail("not an int") }
        XCTAssertEqual(exact, 9_007_199_254_740_993, "no detour through Double")
    }

    func testBigIntegersBeyondInt64BecomeDoubles() {
        guard case .double(let big)? = parse("9223372036854775808") else { return XCTFail("not a double") }
        XCTAssertEqual(big, 9_223_372_036_854_775_808.0)
        guard case .double(let huge)? = parse("123456789012345678901234567890") else { return XCTFail("not a double") }
        XCTAssertEqual(huge, 1.2345678901234568e29)
        guard case .double(let negative)? = parse("-9223372036854775809") else { return XCTFail("not a double") }
        XCTAssertEqual(negative, -9_223_372_036_854_775_809.0)
    }

    func testParsesObjectsAndArraysInOrder() throws {
        let value = parse(#"{"type": "pos", "id": 7, "list": [1, "two", null, true, {"x": []}], "empty": {}}"#)
        XCTAssertEqual(value, .object([
            ("type", "pos"), ("id", 7),
            ("list", [1, "two", .null, true, ["x": []]]),
            ("empty", .object([])),
        ]))
        XCTAssertEqual(parse("[]"), .array([]))
        XCTAssertEqual(parse("[ ]"), .array([]))
        XCTAssertEqual(parse("{ }"), .object([]))
    }

    func testParsesFromBytes() throws {
        XCTAssertEqual(try JSONParser.parse(Array(#"{"a":1}"#.utf8)), ["a": 1])
        XCTAssertEqual(try JSONParser.parse(Array(#"{"a":1}"#.utf8)[...]), ["a": 1], "a slice works too")
        XCTAssertEqual(try JSONParser.parse(ByteBuffer(string: "[true]").readableBytesView), [true])
    }

    func testDuplicateKeysLastWinsViaSubscript() {
        let value = parse(#"{"id": 1, "type": "ping", "id": 2}"#)
        XCTAssertEqual(value?["id"], 2)
        XCTAssertEqual(value?["type"], "ping")
        XCTAssertNil(value?["missing"])
    }

    // MARK: Strings

    func testStringEscapes() {
        XCTAssertEqual(parse(#""a\"b\\c\/d\be\ff\ng\rh\ti""#), .string("a\"b\\c/d\u{8}e\u{C}f\ng\rh\ti"))
    }

    func testUnicodeEscapes() {
        XCTAssertEqual(parse(#""\u0041\u00e9\u00E9\u20AC""#), .string("Aéé€"))
        XCTAssertEqual(parse(#""\u0000""#), .string("\u{0}"))
        XCTAssertEqual(parse(#""x\u001fy""#), .string("x\u{1F}y"))
    }

    func testSurrogatePairEscapes() {
        XCTAssertEqual(parse(#""\ud83d\ude00""#), .string("😀"))
        XCTAssertEqual(parse(#""a\uD834\uDD1Eb""#), .string("a𝄞b"))
    }

    func testRawNonASCIIPassesThrough() {
        XCTAssertEqual(parse("\"Göteborg 😀\""), .string("Göteborg 😀"))
    }

    func testRejectsLoneSurrogates() {
        assertRejects(#""\ud83d""#)           // high alone
        assertRejects(#""\ud83dx""#)          // high followed by a plain character
        assertRejects(#""\ud83d\u0041""#)     // high followed by a non-surrogate escape
        assertRejects(#""\ud83d\ud83d""#)     // two highs
        assertRejects(#""\ude00""#)           // low alone
        assertRejects(#""\ude00\ud83d""#)     // reversed pair
    }

    func testRejectsBadEscapes() {
        assertRejects(#""\x41""#)
        assertRejects(#""\u12""#)
        assertRejects(#""\u12G4""#)
        assertRejects(#""\'""#)
    }

    func testRejectsControlCharactersInStrings() {
        assertRejects("\"a\nb\"")
        assertRejects("\"a\tb\"")
        assertRejects("\"\u{0}\"")
        assertRejects("\"\u{1F}\"")
        assertRejects("\"esc\\n then raw\u{1}\"")  // after an escape too (slow path)
        XCTAssertEqual(parse("\"\u{7F}\""), .string("\u{7F}"), "DEL is not a control character in JSON")
    }

    // MARK: Rejections

    func testRejectsNaNAndInfinityLiterals() {
        assertRejects("NaN")
        assertRejects("Infinity")
        assertRejects("-Infinity")
        assertRejects("[NaN]")
        assertRejects(#"{"lat": Infinity}"#)
        assertRejects(#"{"lat": -Infinity}"#)
        assertRejects("nan")
        assertRejects("inf")
    }

    func testRejectsNonFiniteNumbers() {
        assertRejects("1e999")
        assertRejects("-1e999")
        assertRejects(#"{"lat": 1e400}"#)
    }

    func testRejectsTrailingCommas() {
        assertRejects("[1,]")
        assertRejects("[1, 2, ]")
        assertRejects(#"{"a": 1,}"#)
        assertRejects("[,]")
        assertRejects("[1,,2]")
        assertRejects(#"{,}"#)
    }

    func testRejectsLeadingZerosAndMalformedNumbers() {
        assertRejects("01")
        assertRejects("-01")
        assertRejects("00")
        assertRejects("[012]")
        assertRejects(#"{"a": 007}"#)
        assertRejects("+1")
        assertRejects(".5")
        assertRejects("1.")
        assertRejects("1.e3")
        assertRejects("1e")
        assertRejects("1e+")
        assertRejects("-")
        assertRejects("0x10")
    }

    func testRejectsUnterminatedInput() {
        assertRejects("")
        assertRejects("   ")
        assertRejects("[")
        assertRejects("[1, 2")
        assertRejects("{")
        assertRejects(#"{"a""#)
        assertRejects(#"{"a":"#)
        assertRejects(#"{"a": 1"#)
        assertRejects(#""abc"#)
        assertRejects(#""abc\"#)
        assertRejects(#""abc\u00"#)
        assertRejects("tru")
        assertRejects("nul")
        assertRejects("fals")
    }

    func testRejectsOtherMalformedDocuments() {
        assertRejects("[1 2]")
        assertRejects(#"{"a" 1}"#)
        assertRejects(#"{a: 1}"#)
        assertRejects(#"{'a': 1}"#)
        assertRejects(#"{"a": 1} x"#)
        assertRejects("[] []")
        assertRejects("truex")
        assertRejects("True")
        assertRejects("[1] // comment")
        assertRejects("\u{FEFF}{}")
    }

    // MARK: Depth

    func testAcceptsDepth32() {
        XCTAssertNotNil(try? JSONParser.parse(nested(32)))
        let objects = String(repeating: #"{"a":"#, count: 31) + "[]" + String(repeating: "}", count: 31)
        XCTAssertNotNil(try? JSONParser.parse(objects), "31 objects around an array is depth 32")
    }

    func testRejectsDepth33() {
        assertRejects(nested(33))
        let objects = String(repeating: #"{"a":"#, count: 33) + "1" + String(repeating: "}", count: 33)
        assertRejects(objects)
    }

    func testHostileDepthDoesNotCrash() {
        assertRejects(String(repeating: "[", count: 100_000))
        assertRejects(nested(100_000))
    }

    func testCustomMaxDepth() {
        XCTAssertNoThrow(try JSONParser.parse(nested(3), maxDepth: 3))
        XCTAssertThrowsError(try JSONParser.parse(nested(4), maxDepth: 3))
        XCTAssertNoThrow(try JSONParser.parse("1", maxDepth: 0), "scalars have no depth")
    }

    // MARK: Writer round trip

    func testWriterEscapesQuotesBackslashesAndControlCharacters() {
        XCTAssertEqual(JSONWriter.string(.string(#"say "hi" \ bye"#)), #""say \"hi\" \\ bye""#)
        XCTAssertEqual(JSONWriter.string(.string("a\nb\rc\td")), #""a\nb\rc\td""#)
        XCTAssertEqual(JSONWriter.string(.string("\u{0}\u{1}\u{8}\u{C}\u{1F}")), #""\u0000\u0001\u0008\u000c\u001f""#)
        XCTAssertEqual(JSONWriter.string(.string("plain é 😀")), "\"plain é 😀\"")
    }

    func testWriterIsCompactAndOrdered() {
        let value: JSONValue = .object([("type", "ok"), ("re", 7), ("list", [1, 2.5, .null, false]), ("o", .object([]))])
        XCTAssertEqual(JSONWriter.string(value), #"{"type":"ok","re":7,"list":[1,2.5,null,false],"o":{}}"#)
    }

    func testWriterWritesNonFiniteAsNull() {
        XCTAssertEqual(JSONWriter.string([.double(.nan), .double(.infinity)]), "[null,null]")
    }

    func testRoundTripThroughWriter() throws {
        let values: [JSONValue] = [
            .string("quote \" backslash \\ slash / newline \n tab \t nul \u{0} unit \u{1F} del \u{7F}"),
            .string("emoji 😀 and 𝄞 and é"),
            .object([("k\"e\\y\n", .string("v")), ("nums", [0, -1, .int(Int64.max), .int(Int64.min)])]),
            .array([.double(57.7089), .double(-0.000123), .double(1.5e300), .double(-2.5e-300)]),
            .object([("nested", [["a": [true, false, .null]]]), ("empty", .array([])), ("o", .object([]))]),
        ]
        for value in values {
            let text = JSONWriter.string(value)
            XCTAssertEqual(try JSONParser.parse(text), value, text)
            XCTAssertEqual(try JSONParser.parse(JSONWriter.encode(value).readableBytesView), value)
        }
    }

    func testRoundTripOfParsedDocumentIsStable() throws {
        let text = #"{"type":"pos","from":"alice","lat":57.7089,"lon":11.9746,"acc":8,"ts":1763830000000}"#
        let value = try JSONParser.parse(text)
        XCTAssertEqual(JSONWriter.string(value), text)
    }
}
