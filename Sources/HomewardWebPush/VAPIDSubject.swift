import Foundation

/// The `sub` claim of a VAPID token (RFC 8292 section 2.1): a contact for the push service's
/// operator, a `mailto:` address or an `https:` URL.
public struct VAPIDSubject: Sendable, Equatable, CustomStringConvertible {
    public let description: String

    public init(_ text: String) throws(WebPushError) {
        if text.hasPrefix("mailto:") {
            let address = text.dropFirst("mailto:".count)
            let parts = address.split(separator: "@", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty,
                !address.contains(where: { $0.isWhitespace || $0.isNewline })
            else { throw .badSubject("a mailto: VAPID subject needs an address like mailto:ops@example.org") }
        } else if text.hasPrefix("https:") {
            guard let url = URL(string: text), url.scheme == "https", let host = url.host, !host.isEmpty else {
                throw .badSubject("an https: VAPID subject needs a host, like https://example.org/contact")
            }
        } else {
            throw .badSubject("the VAPID subject must start with mailto: or https:")
        }
        description = text
    }
}
