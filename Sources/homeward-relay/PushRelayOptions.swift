import ArgumentParser
import HomewardServer
import HomewardWebPush

/// The push and webhook options, kept apart from `RelayOptions` (which includes them) so the push
/// settings read in one place: flag, then `HOMEWARD_*` variable, then default.
struct PushRelayOptions: ParsableArguments {
    @Option(name: .customLong("vapid-key"), help: ArgumentHelp(
        "PEM P-256 private key that signs Web Push requests (VAPID). [default: with --store postgres, one key kept in the database for every relay of the cluster; else vapid-key.pem in the data directory; made on first start]",
        valueName: "pem"))
    var vapidKey: String?

    @Option(name: .customLong("vapid-subject"), help: ArgumentHelp(
        "How push services reach the operator: mailto:ADDRESS or an https: URL. [default: mailto:postmaster@localhost]",
        valueName: "uri"))
    var vapidSubject: String?

    @Flag(name: .customLong("push-allow-http"), help: "Accept http: push endpoints (for tests; push services use https).")
    var pushAllowHTTP = false

    @Flag(name: .customLong("push-allow-private"), help: "Accept push endpoints on special-purpose addresses: loopback, private, link-local, ... (for tests).")
    var pushAllowPrivate = false

    @Option(name: .customLong("max-push-subscriptions"), help: "Web Push subscriptions one account may hold. [default: 10]")
    var maxPushSubscriptions: Int?

    @Option(name: .customLong("webhook-url"), help: ArgumentHelp(
        "URL that receives every alarm, acknowledgement and cancellation as a signed JSON POST. Needs --webhook-secret.",
        valueName: "url"))
    var webhookURL: String?

    @Option(name: .customLong("webhook-secret"), help: "HMAC-SHA256 key for the X-Homeward-Signature header of webhook calls (t=TIME,id=DELIVERY,v1=HEX).")
    var webhookSecret: String?

    func apply(to push: inout PushConfiguration, _ env: EnvironmentReader) throws {
        push.vapidKeyPath = try env.value(vapidKey, "vapid-key")
        if let subject = try env.value(vapidSubject, "vapid-subject") {
            do { _ = try VAPIDSubject(subject) } catch { throw ValidationError("vapid-subject: \(error.description)") }
            push.vapidSubject = subject
        }
        push.allowHTTP = try env.value(pushAllowHTTP ? true : nil, "push-allow-http") ?? false
        push.allowPrivate = try env.value(pushAllowPrivate ? true : nil, "push-allow-private") ?? false
        try env.override(&push.maxSubscriptionsPerUser, maxPushSubscriptions, "max-push-subscriptions")
        guard push.maxSubscriptionsPerUser >= 1 else { throw ValidationError("max-push-subscriptions must be at least 1") }
        push.webhookURL = try env.value(webhookURL, "webhook-url")
        push.webhookSecret = try env.value(webhookSecret, "webhook-secret")
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

import Foundation
