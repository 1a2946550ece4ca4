import Foundation
import HomewardWebPush
import XCTest

final class DeliveryOutcomeTests: XCTestCase {
    func testStatusesAreClassifiedAsRFC8030Says() {
        XCTAssertEqual(DeliveryOutcome.classify(status: 201, retryAfter: nil), .delivered(status: 201))
        XCTAssertEqual(DeliveryOutcome.classify(status: 200, retryAfter: nil), .delivered(status: 200))
        XCTAssertEqual(DeliveryOutcome.classify(status: 404, retryAfter: nil), .gone(status: 404))
        XCTAssertEqual(DeliveryOutcome.classify(status: 410, retryAfter: nil), .gone(status: 410))
        XCTAssertEqual(DeliveryOutcome.classify(status: 429, retryAfter: "7"), .retry(status: 429, after: 7))
        XCTAssertEqual(DeliveryOutcome.classify(status: 503, retryAfter: nil), .retry(status: 503, after: nil))
        XCTAssertEqual(DeliveryOutcome.classify(status: 500, retryAfter: "soon"), .retry(status: 500, after: nil))
        for status in [400, 401, 403, 413, 301] {
            XCTAssertEqual(DeliveryOutcome.classify(status: status, retryAfter: "5"), .failed(status: status))
        }
    }

    func testRetryAfterTakesSecondsOrAnHTTPDate() {
        let now = Date(timeIntervalSince1970: 1_445_412_480)  // Wed, 21 Oct 2015 07:28:00 GMT
        XCTAssertEqual(DeliveryOutcome.retryDelay("120", now: now), 120)
        XCTAssertEqual(DeliveryOutcome.retryDelay("Wed, 21 Oct 2015 07:28:30 GMT", now: now), 30)
        XCTAssertEqual(DeliveryOutcome.retryDelay("Wed, 21 Oct 2015 07:00:00 GMT", now: now), 0)
        XCTAssertNil(DeliveryOutcome.retryDelay("-3", now: now))
        XCTAssertNil(DeliveryOutcome.retryDelay("tomorrow", now: now))
    }

    func testWebhookSignatureIsHexHMACSHA256OfTheBody() throws {
        let body = Array(#"{"event":"alarm"}"#.utf8)
        // Computed independently: python3 -c "import hmac,hashlib; print(hmac.new(b'topsecret', b'{\"event\":\"alarm\"}', hashlib.sha256).hexdigest())"
        XCTAssertEqual(
            WebhookSignature.value(body: body, secret: "topsecret"),
            "sha256=e6ac1ef96b05a6c6b251b779bac1d1305b14fe71399a758d656d672549171166")
        let request = WebhookSignature.request(url: try XCTUnwrap(URL(string: "https://hooks.example.org/h")), body: body, secret: "topsecret")
        XCTAssertEqual(request.header("X-Homeward-Signature"), WebhookSignature.value(body: body, secret: "topsecret"))
        XCTAssertEqual(request.header("Content-Type"), "application/json")
    }
}
