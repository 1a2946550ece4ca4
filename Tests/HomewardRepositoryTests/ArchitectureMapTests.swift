import Foundation
import XCTest

/// docs/architecture.md is the map a newcomer reads first. Every file, type and member it names in
/// backticks must exist in Sources or Tests, so that renaming or removing one without the map fails
/// here instead of sending the next reader looking for something that is not there.
final class ArchitectureMapTests: XCTestCase {
    func testEveryFileTypeAndMemberTheArchitectureMapNamesExists() throws {
        let map = try String(contentsOf: ArchitectureMap.repositoryRoot.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        let code = try ArchitectureMap.Code.scanned.get()
        XCTAssertEqual(code.missing(in: map), [], "docs/architecture.md names these, which Sources and Tests do not have")
    }

    /// The check itself: what does not exist is reported, what exists and what it does not check is not.
    func testTheCheckReportsNamesThatDoNotExist() throws {
        let code = try ArchitectureMap.Code.scanned.get()
        let map = """
            `Relay`, `RelayState.raiseAlarm`, `Relay+Spool.swift`, `RelayState+*.swift`, `Tests/HomewardCoreTests`,
            `HomewardCore`, `syncPresence`, `DispatchQueue` (not ours), `alarm.raise` and `--bus nats://…` (not code):
            all there. `RelayEngine`, `Relay.teleport`, `Gone.swift`, `Nothing+*.swift`, `Sources/HomewardCore/Gone.swift`,
            `teleportUser`: not.
            """
        XCTAssertEqual(code.missing(in: map), ["RelayEngine", "Relay.teleport", "Gone.swift", "Nothing+*.swift",
                                               "Sources/HomewardCore/Gone.swift", "teleportUser"])
    }
}

/// What the map names, and what the code declares.
enum ArchitectureMap {
    /// Names in the map that are not this project's: the platform's and dependencies' types, and words of
    /// other protocols (NATS `SUB`, the HTTP `Origin` header).
    static let notOurs: Set<String> = [
        "DispatchQueue", "DispatchSourceTimer", "SerialExecutor", "Mutex", "Task",
        "NIOLoopBoundBox", "EmbeddedChannel", "SUB", "Origin",
        // swift-service-lifecycle's, and Hummingbird's (the model the lifecycle follows)
        "Service", "ServiceGroup", "Application",
    ]

    static var repositoryRoot: URL {
        // Tests/HomewardRepositoryTests/ArchitectureMapTests.swift
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// The backticked spans of `text` that look like code names: no spaces, no punctuation but `+*./-_`.
    static func names(in text: String) -> [String] {
        var names: [String] = []
        var seen: Set<String> = []
        for span in text.split(separator: "`", omittingEmptySubsequences: false).enumerated() where span.offset % 2 == 1 {
            let name = String(span.element)
            guard !name.isEmpty, !name.contains("\n"), name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+*./-_".contains($0)) }),
                  seen.insert(name).inserted else { continue }
            names.append(name)
        }
        return names
    }

    /// The files, folders, types and members under Sources and Tests.
    struct Code {
        let root: URL
        /// Paths relative to the root, files and folders.
        private(set) var paths: Set<String> = []
        private(set) var fileNames: Set<String> = []
        /// Declared types, and module folders (Sources/NAME).
        private(set) var types: Set<String> = []
        /// Anything declared with a name: functions, properties, enum cases, types.
        private(set) var members: Set<String> = []

        /// The repository's code, read once for every test here.
        static let scanned = Result { try Code(root: ArchitectureMap.repositoryRoot) }

        static let typeKeywords: Set<String> = ["class", "struct", "enum", "actor", "protocol", "typealias"]
        static let memberKeywords = typeKeywords.union(["func", "var", "let", "case"])

        init(root: URL) throws {
            self.root = root
            let files = FileManager.default
            for folder in ["Sources", "Tests"] {
                if folder == "Sources" {
                    types.formUnion(try files.contentsOfDirectory(atPath: root.appendingPathComponent(folder).path))
                }
                guard let walk = files.enumerator(atPath: root.appendingPathComponent(folder).path) else { continue }
                while let relative = walk.nextObject() as? String {
                    let path = folder + "/" + relative
                    paths.insert(path)
                    fileNames.insert((relative as NSString).lastPathComponent)
                    if relative.hasSuffix(".swift") {
                        declarations(in: try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8))
                    }
                }
            }
        }

        /// Collects the names that `swift` declares: the word after a declaration keyword, and every case of
        /// `case a, b(Int), c`. Reads bytes, not characters: this runs over every Swift file of the repository.
        private mutating func declarations(in swift: String) {
            let bytes = Array(swift.utf8)
            var previous = ""
            var index = 0
            // Inside a `case` list: parentheses open, and whether the next word follows a comma.
            var caseList: (depth: Int, afterComma: Bool)?
            while index < bytes.count {
                let byte = bytes[index]
                guard Self.isWordByte(byte) else {
                    switch byte {
                    case UInt8(ascii: "\n"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "{"):
                        caseList = nil
                        if byte == UInt8(ascii: "\n") { previous = "" }
                    case UInt8(ascii: "("): caseList?.depth += 1
                    case UInt8(ascii: ")"): caseList?.depth -= 1
                    case UInt8(ascii: ","): if caseList?.depth == 0 { caseList?.afterComma = true }
                    default: break
                    }
                    index += 1
                    continue
                }
                let start = index
                while index < bytes.count, Self.isWordByte(bytes[index]) { index += 1 }
                let word = String(decoding: bytes[start..<index], as: UTF8.self)
                if Self.memberKeywords.contains(previous) {
                    members.insert(word)
                    if Self.typeKeywords.contains(previous) { types.insert(word) }
                }
                if caseList?.afterComma == true { members.insert(word) }
                caseList?.afterComma = false
                if word == "case" { caseList = (0, false) }
                previous = word
            }
        }

        private static func isWordByte(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"): true
            default: false
            }
        }

        /// The names in `map` that the code does not have, in the order the map names them.
        func missing(in map: String) -> [String] {
            ArchitectureMap.names(in: map).filter { !ArchitectureMap.notOurs.contains($0) && !exists($0) }
        }

        private func exists(_ name: String) -> Bool {
            if name.hasPrefix("/") || name.hasPrefix("-") { return true }  // a URL path or a flag: not code
            if name.contains("/") { return pathExists(name) }
            if name.hasSuffix(".swift") { return fileNames.contains { Self.matches($0, pattern: name) } }
            let parts = name.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" } }) else { return true }
            if parts[0].first!.isUppercase {
                // `Type` or `Type.member.member`.
                return types.contains(parts[0]) && parts.dropFirst().allSatisfy(members.contains)
            }
            // A lowerCamelCase name alone is a function, property or case; other lowercase words (`ok`,
            // `alarm.raise`) are the protocol's, not the code's.
            if parts.count == 1, name.contains(where: \.isUppercase) { return members.contains(name) }
            return true
        }

        /// A path from the root (`tests/`, `Sources/HomewardCore/RelayState+*.swift`), or the end of one
        /// under Sources or Tests (`ProxyProtocol/`).
        private func pathExists(_ name: String) -> Bool {
            let trimmed = name.hasSuffix("/") ? String(name.dropLast()) : name
            if trimmed.contains("*") { return paths.contains { Self.matches($0, pattern: trimmed) } }
            if FileManager.default.fileExists(atPath: root.appendingPathComponent(trimmed).path) { return true }
            return paths.contains { $0.hasSuffix("/" + trimmed) }
        }

        /// Whether `text` matches `pattern`, whose `*` stands for any characters but `/`.
        private static func matches(_ text: String, pattern: String) -> Bool {
            let regex = "^" + pattern.split(separator: "*", omittingEmptySubsequences: false)
                .map { NSRegularExpression.escapedPattern(for: String($0)) }.joined(separator: "[^/]*") + "$"
            return text.range(of: regex, options: .regularExpression) != nil
        }
    }
}
