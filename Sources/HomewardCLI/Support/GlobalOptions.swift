import ArgumentParser
import HomewardClient

/// Options every command takes: which relay, how to trust it, which profile, which output.
public struct GlobalOptions: ParsableArguments, Sendable {
    @Option(help: ArgumentHelp("The relay's WebSocket URL. Default: $HOMEWARD_RELAY, else the profile's, else \(RelayEndpoint.defaultURL).", valueName: "url"))
    public var relay: String?

    @Option(help: ArgumentHelp("PEM file of the CA that signed the relay's certificate (e.g. the relay's data-dir/certs/dev-ca.pem). Default: $HOMEWARD_CA, else the profile's, else the system trust store.", valueName: "pem"))
    public var ca: String?

    @Flag(help: "Accept any relay certificate. Encrypts, but cannot tell who is on the other end: for a throwaway test relay only. Never remembered in a profile.")
    public var insecure = false

    @Option(help: ArgumentHelp("Profile to use; each keeps its own relay, user and token. Default: $HOMEWARD_PROFILE, else \"default\".", valueName: "name"))
    public var profile: String?

    @Flag(help: "Print one JSON object per line instead of text for people.")
    public var json = false

    public init() {}

    var profileName: String {
        profile ?? Environment.value("HOMEWARD_PROFILE") ?? "default"
    }
}
