import HomewardProtocol
@testable import HomewardServer
import NIOCore
import NIOEmbedded
import NIOHTTP1
import XCTest

/// The plain-HTTP side on an `EmbeddedChannel`: request parts in, response parts out, no sockets.
final class HTTPHandlerTests: XCTestCase {
    private var channel: EmbeddedChannel!

    private static let site = WebSite(assets: WebAssets([
        "/": ("text/html; charset=utf-8", "<!doctype html><title>app</title>"),
        "/f": ("text/html; charset=utf-8", "<!doctype html><title>viewer</title>"),
        "/static/js/app.js": ("text/javascript; charset=utf-8", "export {}"),
        "/static/css/app.css": ("text/css; charset=utf-8", "body{}"),
        "/vendor/leaflet/leaflet.js": ("text/javascript; charset=utf-8", "window.L={}"),
    ]), tiles: try! MapTiles(urlTemplate: "https://{s}.tile.example.org/{z}/{x}/{y}.png", attribution: "© Example"))

    /// Not a real key: the handler serves whatever it is given, escaped as JSON.
    private static let vapidPublicKey = "BP4z9KsN\"quoted\\"

    override func setUp() {
        channel = EmbeddedChannel(handler: HTTPHandler(metrics: { Array("homeward_up 1\n".utf8) }, site: Self.site,
                                                       vapidPublicKey: Self.vapidPublicKey))
    }

    override func tearDown() {
        _ = try? channel.finish()
        channel = nil
    }

    private struct Response {
        var head: HTTPResponseHead
        var body: String
        func header(_ name: String) -> String? { head.headers.first(name: name) }
    }

    private func request(_ uri: String, method: HTTPMethod = .GET, headers: [(String, String)] = []) throws -> Response {
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: uri)
        head.headers.add(name: "Host", value: "relay.example:8443")
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        try channel.writeInbound(HTTPServerRequestPart.head(head))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        var response: HTTPResponseHead?
        var body = ""
        while let part = try channel.readOutbound(as: HTTPServerResponsePart.self) {
            switch part {
            case .head(let head): response = head
            case .body(.byteBuffer(let buffer)): body += String(buffer: buffer)
            case .body: XCTFail("unexpected file region")
            case .end: break
            }
        }
        return Response(head: try XCTUnwrap(response, "no response to \(method) \(uri)"), body: body)
    }

    func testServesTheAppTheViewerAndAssetsWithTheirContentTypes() throws {
        let expected = [
            ("/", "text/html; charset=utf-8", "<!doctype html><title>app</title>"),
            ("/f", "text/html; charset=utf-8", "<!doctype html><title>viewer</title>"),
            ("/static/js/app.js", "text/javascript; charset=utf-8", "export {}"),
            ("/static/css/app.css", "text/css; charset=utf-8", "body{}"),
            ("/vendor/leaflet/leaflet.js", "text/javascript; charset=utf-8", "window.L={}"),
        ]
        for (path, type, body) in expected {
            let response = try request(path)
            XCTAssertEqual(response.head.status, .ok, path)
            XCTAssertEqual(response.header("Content-Type"), type, path)
            XCTAssertEqual(response.body, body, path)
            XCTAssertEqual(response.header("Content-Length"), String(body.utf8.count), path)
        }
    }

    func testTheViewerIgnoresTheQueryAndNeverNeedsTheFragment() throws {
        XCTAssertEqual(try request("/f?utm=x").body, "<!doctype html><title>viewer</title>")
    }

    func testEveryAnswerCarriesTheSecurityHeaders() throws {
        for path in ["/", "/f", "/static/js/app.js", "/nope", "/healthz", "/v1/web-config", "/static/../x"] {
            let response = try request(path)
            let csp = try XCTUnwrap(response.header("Content-Security-Policy"), path)
            XCTAssertTrue(csp.contains("script-src 'self';"), csp)
            XCTAssertFalse(csp.contains("unsafe-inline"), csp)
            XCTAssertTrue(csp.contains("frame-ancestors 'none'"), csp)
            XCTAssertTrue(csp.contains("connect-src 'self' wss://relay.example:8443;"), csp)
            XCTAssertTrue(csp.contains("img-src 'self' data: https://*.tile.example.org;"), csp)
            XCTAssertTrue(csp.contains("default-src 'none'"), csp)
            XCTAssertEqual(response.header("Referrer-Policy"), "no-referrer", path)
            XCTAssertEqual(response.header("X-Content-Type-Options"), "nosniff", path)
            XCTAssertTrue(response.header("Strict-Transport-Security")?.hasPrefix("max-age=") ?? false, path)
        }
    }

    func testAHostileHostHeaderAddsNothingToThePolicy() throws {
        for host in ["evil.example; script-src *", "a b", "x:1:2", "[::1]extra", "x'", ""] {
            var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")
            head.headers.add(name: "Host", value: host)
            let answerCSP = SecurityHeaders(tileSource: nil).contentSecurityPolicy(host: host)
            XCTAssertTrue(answerCSP.contains("connect-src 'self'; "), "\(host): \(answerCSP)")
            XCTAssertEqual(answerCSP.components(separatedBy: "script-src").count, 2, host)
        }
        XCTAssertTrue(SecurityHeaders.isPlainHost("[::1]:8443"))
        XCTAssertTrue(SecurityHeaders.isPlainHost("127.0.0.1:8443"))
    }

    func testWithoutTilesImagesComeOnlyFromTheRelay() {
        let csp = SecurityHeaders(tileSource: nil).contentSecurityPolicy(host: "localhost")
        XCTAssertTrue(csp.contains("img-src 'self';"), csp)
    }

    func testPagesAreRevalidatedLeafletIsCachedAndErrorsAreNotStored() throws {
        XCTAssertEqual(try request("/").header("Cache-Control"), "no-cache")
        XCTAssertEqual(try request("/static/js/app.js").header("Cache-Control"), "no-cache")
        XCTAssertEqual(try request("/vendor/leaflet/leaflet.js").header("Cache-Control"), "public, max-age=86400")
        XCTAssertEqual(try request("/nope").header("Cache-Control"), "no-store")
        XCTAssertEqual(try request("/v1/web-config").header("Cache-Control"), "no-store")
    }

    func testAMatchingETagGets304WithoutABody() throws {
        let first = try request("/static/js/app.js")
        let etag = try XCTUnwrap(first.header("ETag"))
        let again = try request("/static/js/app.js", headers: [("If-None-Match", etag)])
        XCTAssertEqual(again.head.status, .notModified)
        XCTAssertEqual(again.body, "")
        XCTAssertNil(again.header("Content-Length"))
        let other = try request("/static/js/app.js", headers: [("If-None-Match", "\"other\"")])
        XCTAssertEqual(other.head.status, .ok)
    }

    func testHeadAnswersTheHeadersWithoutTheBody() throws {
        let response = try request("/static/css/app.css", method: .HEAD)
        XCTAssertEqual(response.head.status, .ok)
        XCTAssertEqual(response.header("Content-Length"), "6")
        XCTAssertEqual(response.header("Content-Type"), "text/css; charset=utf-8")
        XCTAssertEqual(response.body, "")
    }

    func testWebConfigSaysWhereLeafletAndTheTilesAre() throws {
        let response = try request("/v1/web-config")
        XCTAssertEqual(response.header("Content-Type"), "application/json")
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any])
        let leaflet = try XCTUnwrap(object["leaflet"] as? [String: String])
        XCTAssertEqual(leaflet["script"], "/vendor/leaflet/leaflet.js")
        let tiles = try XCTUnwrap(object["tiles"] as? [String: String])
        XCTAssertEqual(tiles["url"], "https://{s}.tile.example.org/{z}/{x}/{y}.png")
        XCTAssertEqual(tiles["attribution"], "© Example")
    }

    func testWebConfigWithoutLeafletOrTilesSaysSo() throws {
        let site = WebSite(assets: WebAssets(["/": ("text/html; charset=utf-8", "x")]), tiles: nil)
        let answer = site.answer(path: "/v1/web-config", headers: [:])
        XCTAssertEqual(String(buffer: answer.body), #"{"leaflet":null,"tiles":null}"#)
    }

    func testMethodsOtherThanGetAndHeadAre405OnWhatExistsAnd404Elsewhere() throws {
        for method in [HTTPMethod.POST, .PUT, .DELETE, .PATCH, .OPTIONS, .TRACE, .RAW(value: "BREW")] {
            for path in ["/", "/f", "/static/js/app.js", "/healthz", "/v1/web-config"] {
                let response = try request(path, method: method)
                XCTAssertEqual(response.head.status, .methodNotAllowed, "\(method) \(path)")
                XCTAssertEqual(response.header("Allow"), "GET, HEAD", "\(method) \(path)")
                XCTAssertFalse(response.body.contains("export"), "\(method) \(path)")
            }
            XCTAssertEqual(try request("/nope", method: method).head.status, .notFound, "\(method)")
        }
    }

    func testThePushKeyIsJSONAndOnlyForGetAndHead() throws {
        let response = try request("/v1/push/key")
        XCTAssertEqual(response.head.status, .ok)
        XCTAssertEqual(response.header("Content-Type"), "application/json")
        XCTAssertEqual(try JSONParser.parse(response.body),
                       ["vapidPublicKey": .string(Self.vapidPublicKey)])
        for method in [HTTPMethod.POST, .PUT, .DELETE] {
            let refused = try request("/v1/push/key", method: method)
            XCTAssertEqual(refused.head.status, .methodNotAllowed, "\(method)")
            XCTAssertEqual(refused.header("Allow"), "GET, HEAD", "\(method)")
            XCTAssertFalse(refused.body.contains("BP4z9KsN"), "\(method)")
        }
    }

    func testTraversalIsRefusedBeforeAnyLookup() throws {
        for path in ["/static/../..", "/static/../../etc/passwd", "/static/js/../../f", "/static/./js/app.js",
                     "/static/%2e%2e/%2e%2e/etc/passwd", "/static/%2E%2E%2Fetc", "/static/..%2f..%2fetc%2fpasswd",
                     "/vendor/leaflet/%2e%2e%5c%2e%2e%5cetc", "/static/js%00.js", "/static/%zz", "/static/%4",
                     "/static/..\\..\\etc", "static/js/app.js", "*"] {
            let response = try request(path)
            XCTAssertEqual(response.head.status, .badRequest, path)
            XCTAssertFalse(response.body.contains("export"), path)
        }
    }

    func testEncodedButHarmlessPathsAreDecoded() throws {
        XCTAssertEqual(try request("/static/js/%61pp.js").body, "export {}")
    }

    func testVeryLongPathsAre414() throws {
        let response = try request("/static/" + String(repeating: "a", count: 5000))
        XCTAssertEqual(response.head.status, .uriTooLong)
        XCTAssertEqual(try request("/" + String(repeating: "a/", count: 1000)).head.status, .notFound)
    }

    func testUnknownPathsAre404AndTheWebSocketPathIs426() throws {
        for path in ["/nope", "/static/", "/static/js", "/vendor/leaflet/", "/index.html", "/f/", "/v1/ws/more"] {
            XCTAssertEqual(try request(path).head.status, .notFound, path)
        }
        XCTAssertEqual(try request("/v1/ws").head.status, .upgradeRequired)
        XCTAssertEqual(try request("/v1/ws", method: .POST).head.status, .upgradeRequired)
        XCTAssertEqual(try request("/healthz").body, "ok\n")
        XCTAssertEqual(try request("/metrics").body, String(decoding: MetricsAccess.publicExposition, as: UTF8.self))
    }

    func testTheMetricsAreShownInFullOnlyWithTheBearerToken() throws {
        let token = "sixteen-characters-at-least"
        channel = EmbeddedChannel(handler: HTTPHandler(metrics: { Array("homeward_alarms_pending 1\n".utf8) },
                                                       metricsAccess: MetricsAccess(token: token)))
        XCTAssertEqual(try request("/metrics", headers: [("Authorization", "Bearer \(token)")]).body, "homeward_alarms_pending 1\n")
        XCTAssertEqual(try request("/metrics", headers: [("Authorization", "bearer \(token)")]).body, "homeward_alarms_pending 1\n")
        let anonymous = try request("/metrics")
        XCTAssertEqual(anonymous.head.status, .ok)
        XCTAssertFalse(anonymous.body.contains("alarms"), anonymous.body)
        for wrong in ["Bearer \(token)x", "Bearer", "Basic \(token)", "Bearer \(token.dropLast())"] {
            let refused = try request("/metrics", headers: [("Authorization", wrong)])
            XCTAssertEqual(refused.head.status, .unauthorized, wrong)
            XCTAssertEqual(refused.header("WWW-Authenticate"), "Bearer realm=\"metrics\"")
            XCTAssertFalse(refused.body.contains("alarms"))
        }
    }

    func testAWebSocketRequestFromAPageOfAnotherOriginIs403() throws {
        channel = EmbeddedChannel(handler: HTTPHandler(metrics: { [] }, origins: OriginPolicy(["https://relay.example:8443"])))
        for origin in ["https://evil.example", "null", "https://relay.example", "http://relay.example:8443"] {
            XCTAssertEqual(try request("/v1/ws", headers: [("Origin", origin)]).head.status, .forbidden, origin)
        }
        XCTAssertEqual(try request("/v1/ws", headers: [("Origin", "https://RELAY.example:8443")]).head.status, .upgradeRequired)
        XCTAssertEqual(try request("/v1/ws").head.status, .upgradeRequired, "no Origin: not a browser")
    }

    func testWithoutAWebRootTheAppIsNotServed() throws {
        channel = EmbeddedChannel(handler: HTTPHandler(metrics: { [] }))
        XCTAssertEqual(try request("/").head.status, .notFound)
        XCTAssertEqual(try request("/f").head.status, .notFound)
    }
}
