import HomewardCore
import HomewardProtocol
import Testing

/// The range a store reads for a search (`UsernamePrefix`): exactly the names that start with the prefix.
struct UsernamePrefixTests {
    @Test func theUpperBoundIsThePrefixWithItsLastCharacterMovedOn() throws {
        #expect(try #require(UsernamePrefix("ann")).upperBound == "ano")
        #expect(try #require(UsernamePrefix("a-")).upperBound == "a.")
        #expect(try #require(UsernamePrefix("z")).upperBound == "{")
        #expect(try #require(UsernamePrefix("zz")).upperBound == "z{")
        #expect(try #require(UsernamePrefix("a_")).upperBound == "a`")
    }

    /// Over every name of up to three of a sample of the characters (the first, last and neighbours of each run),
    /// a name is in the range exactly when it starts with the prefix.
    @Test func theRangeHoldsExactlyTheNamesThatStartWithThePrefix() throws {
        let characters = Array("-.09_amnz")
        var names = characters.map { String($0) }
        for _ in 0..<2 { names += names.flatMap { name in characters.map { name + String($0) } } }
        names = Array(Set(names))
        for prefix in names {
            let range = try #require(UsernamePrefix(prefix))
            for name in names {
                let inRange = range.lowerBound.utf8.lexicographicallyPrecedes(name.utf8) || range.lowerBound == name
                let belowUpper = name.utf8.lexicographicallyPrecedes(range.upperBound.utf8)
                #expect((inRange && belowUpper) == name.hasPrefix(prefix), "\(name) for prefix \(prefix)")
                #expect(range.matches(name) == name.hasPrefix(prefix))
            }
        }
    }

    /// Stored names are normalised: a prefix with anything else (or none, or longer than a name) is no prefix.
    @Test func aPrefixNoNameCanStartWithIsRefused() {
        for prefix in ["", "Ann", "ANN", "a b", "a\u{0}", "a%", "a*", "ä", "ａ", "a\u{7F}", String(repeating: "a", count: 33)] {
            #expect(UsernamePrefix(prefix) == nil, "\(prefix.debugDescription)")
        }
        #expect(UsernamePrefix(String(repeating: "a", count: 32)) != nil)
        for character in Username.allowed where !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(character) {
            #expect(UsernamePrefix(String(decoding: [character], as: UTF8.self)) != nil)
        }
    }
}
