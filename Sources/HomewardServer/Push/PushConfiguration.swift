/// Web Push and the operator webhook, as the operator configured them (`--vapid-key`,
/// `--vapid-subject`, `--push-allow-http`, `--push-allow-private`, `--max-push-subscriptions`,
/// `--webhook-url`, `--webhook-secret`).
public struct PushConfiguration: Sendable {
    /// A PEM P-256 private key; nil: the key a shared store (PostgreSQL) keeps for every relay, else
    /// `vapid-key.pem` in the data directory, made on first start (see `RelayVAPIDKey`).
    public var vapidKeyPath: String?
    /// The VAPID `sub` claim: how a push service's operator reaches this relay's operator.
    public var vapidSubject = "mailto:postmaster@localhost"
    /// Accept `http:` endpoints (tests with a push service double on loopback).
    public var allowHTTP = false
    /// Accept endpoints whose host is or resolves to a loopback, private or link-local address.
    public var allowPrivate = false
    public var maxSubscriptionsPerUser = 10
    /// Where every alarm, acknowledgement and cancellation is POSTed, signed with `webhookSecret`.
    public var webhookURL: String?
    public var webhookSecret: String?

    public init() {}
}
