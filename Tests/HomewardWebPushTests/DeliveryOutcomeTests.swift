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

    func testWebhookSignatureCoversTheTimestampTheDeliveryIdAndTheBody() throws {
        let body = Array(#"{"event":"alarm"}"#.utf8)
        // Computed independently: python3 -c "import hmac,hashlib; print(hmac.new(b'topsecret', b'1763830000.o_5f0c.{\"event\":\"alarm\"}', hashlib.sha256).hexdigest())"
        XCTAssertEqual(
            WebhookSignature.value(body: body, secret: "topsecret", timestamp: 1_763_830_000, deliveryId: "o_5f0c"),
            "t=1763830000,id=o_5f0c,v1=63ba03ea5c18f10a34b37483b7e40ea1461cf09764cb5b061c9767307eea60b4")
        // The same body at another time, or as another delivery, has another signature: a replay cannot reuse one.
        XCTAssertNotEqual(WebhookSignature.value(body: body, secret: "topsecret", timestamp: 1_763_830_001, deliveryId: "o_5f0c"),
                          WebhookSignature.value(body: body, secret: "topsecret", timestamp: 1_763_830_000, deliveryId: "o_5f0c"))
        XCTAssertNotEqual(WebhookSignature.value(body: body, secret: "topsecret", timestamp: 1_763_830_000, deliveryId: "o_5f0d").suffix(64),
                          WebhookSignature.value(body: body, secret: "topsecret", timestamp: 1_763_830_000, deliveryId: "o_5f0c").suffix(64))
        let request = WebhookSignature.request(url: try XCTUnwrap(URL(string: "https://hooks.example.org/h")), body: body, secret: "topsecret",
                                               deliveryId: "o_5f0c", now: Date(timeIntervalSince1970: 1_763_830_000.9))
        XCTAssertEqual(request.header("X-Homeward-Signature"),
                       "t=1763830000,id=o_5f0c,v1=63ba03ea5c18f10a34b37483b7e40ea1461cf09764cb5b061c9767307eea60b4")
        XCTAssertEqual(request.header("X-Homeward-Delivery"), "o_5f0c")
        XCTAssertEqual(request.header("Content-Type"), "application/json")
    }
}
