import ArgumentParser
import Foundation
import HomewardServer
import HomewardWebPush

/// The push and webhook options, kept apart from `RelayOptions` (which includes them) so the push
/// settings read in one place: flag, then `HOMEWARD_*` variable, then default.
struct PushRelayOptions: ParsableArguments {
    private static let defaults = PushConfiguration()

    static let vapidKey = RelayOption<String>(
        "vapid-key", "PEM P-256 private key that signs Web Push requests (VAPID).", valueName: "pem",
        defaultText: "with --store postgres, one key kept in the database for every relay of the cluster; else vapid-key.pem in the data directory; made on first start")
    @Option(Self.vapidKey) var vapidKey: String?

    static let vapidSubject = RelayOption<String>(
        "vapid-subject", "How push services reach the operator: mailto:ADDRESS or an https: URL.", valueName: "uri",
        default: defaults.vapidSubject)
    @Option(Self.vapidSubject) var vapidSubject: String?

    static let pushAllowHTTP = RelayOption<Bool>("push-allow-http", "Accept http: push endpoints (for tests; push services use https).")
    @Flag(Self.pushAllowHTTP) var pushAllowHTTP = false

    static let pushAllowPrivate = RelayOption<Bool>(
        "push-allow-private", "Accept push endpoints on special-purpose addresses: loopback, private, link-local, ... (for tests).")
    @Flag(Self.pushAllowPrivate) var pushAllowPrivate = false

    static let maxPushSubscriptions = RelayOption<Int>(
        "max-push-subscriptions", "Web Push subscriptions one account may hold.", default: defaults.maxSubscriptionsPerUser)
    @Option(Self.maxPushSubscriptions) var maxPushSubscriptions: Int?

    static let webhookURL = RelayOption<String>(
        "webhook-url", "URL that receives every alarm, acknowledgement and cancellation as a signed JSON POST. Needs --webhook-secret.",
        valueName: "url")
    @Option(Self.webhookURL) var webhookURL: String?

    static let webhookSecret = RelayOption<String>(
        "webhook-secret", "HMAC-SHA256 key for the X-Homeward-Signature header of webhook calls (t=TIME,id=DELIVERY,v1=HEX).")
    @Option(Self.webhookSecret) var webhookSecret: String?

    func apply(to push: inout PushConfiguration, _ env: Environment) throws {
        push.vapidKeyPath = try env.value(vapidKey, Self.vapidKey)
        if let subject = try env.value(vapidSubject, Self.vapidSubject) {
            do { _ = try VAPIDSubject(subject) } catch { throw ValidationError("vapid-subject: \(error.description)") }
            push.vapidSubject = subject
        }
        push.allowHTTP = try env.value(pushAllowHTTP ? true : nil, Self.pushAllowHTTP) ?? false
        push.allowPrivate = try env.value(pushAllowPrivate ? true : nil, Self.pushAllowPrivate) ?? false
        try env.override(&push.maxSubscriptionsPerUser, maxPushSubscriptions, Self.maxPushSubscriptions)
        guard push.maxSubscriptionsPerUser >= 1 else { throw ValidationError("max-push-subscriptions must be at least 1") }
        push.webhookURL = try env.value(webhookURL, Self.webhookURL)
        push.webhookSecret = try env.value(webhookSecret, Self.webhookSecret)
        if let url = push.webhookURL {
            guard url.hasPrefix("https://") || url.hasPrefix("http://"), URL(string: url)?.host != nil else {
                throw ValidationError("webhook-url must be an http or https URL")
            }
            guard let secret = push.webhookSecret, !secret.isEmpty else {
                throw ValidationError("--webhook-url needs --webhook-secret (receivers check the signature)")
            }
        } else if push.webhookSecret != nil {
            throw ValidationError("--webhook-secret without --webhook-url")
        }
    }
}
