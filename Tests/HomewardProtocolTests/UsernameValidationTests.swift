import HomewardProtocol
import XCTest

/// Every username field goes through `Username`: a name that could never have been registered must not
/// become another spelling of one that was (`kate1\u{0}` is not `kate1`, and is nobody).
final class UsernameValidationTests: XCTestCase {
    private func parse(_ value: JSONValue) -> Result<Request, ProtocolError> {
        IncomingRequest.parse(value, now: 0).result
    }

    private func login(_ username: String) -> Request? {
        try? parse(["type": "login", "username": .string(username), "password": "correct horse"]).get()
    }

    func testLoginWithAMalformedNameLooksUpNobody() {
        for malformed in ["kate1\u{0}", "kate1\u{0}anything", "KATE1\u{0}", "\u{0}kate1", "kate 1", "ka",
                          String(repeating: "k", count: 33), "kate1\u{202E}", "\u{212A}ate1"] {
            XCTAssertEqual(login(malformed), .login(username: Username.unmatchable, password: "correct horse"),
                           malformed.debugDescription)
        }
        XCTAssertThrowsError(try Username.normalize(Username.unmatchable), "no account can have the unmatchable name")
    }

    func testLoginWithAWellFormedNameIsNormalisedLikeRegister() {
        XCTAssertEqual(login("Kate1"), .login(username: "kate1", password: "correct horse"))
        XCTAssertEqual(login("kate_1.x-y"), .login(username: "kate_1.x-y", password: "correct horse"))
    }

    func testEveryOtherUsernameFieldRefusesNUL() {
        let name: JSONValue = "kate1\u{0}"
        let requests: [JSONValue] = [
            ["type": "register", "username": name, "password": "correct horse"],
            ["type": "friend.request", "username": name],
            ["type": "friend.accept", "username": name],
            ["type": "friend.decline", "username": name],
            ["type": "friend.remove", "username": name],
            ["type": "session.start", "invite": [name]],
            ["type": "session.invite", "sessionId": "s_1", "invite": [name]],
            ["type": "alarm.raise", "to": [name]],
            ["type": "alarm.contacts", "usernames": [name]],
        ]
        for request in requests {
            guard case .failure(let error) = parse(request) else {
                XCTFail("accepted \(JSONWriter.string(request))")
                continue
            }
            XCTAssertEqual(error.code, .badRequest, JSONWriter.string(request))
        }
    }

    func testDisplayNamesRefuseControlAndBidiCharacters() {
        for bad in ["Ann\u{0}Evil", "Ann\u{1B}[31mred", "Ann\u{9B}31m", "Ann\nBen", "Ann\t", "Ann\u{7F}",
                    "Ann\u{202E}live", "\u{202A}Ann", "Ann\u{2066}", "Ann\u{2069}"] {
            XCTAssertThrowsError(try Username.validateDisplayName(bad), bad.debugDescription) { error in
                XCTAssertEqual((error as? ProtocolError)?.code, .badRequest)
            }
        }
        for good in ["Ann", "Alice Ångström", "مريم", "李小龙", "Zoë 🙂", ""] {
            XCTAssertEqual(try Username.validateDisplayName(good), good)
        }
    }
}
