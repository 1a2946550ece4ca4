import HomewardNATS

extension NATSClientConfiguration {
    /// Fast reconnects, so that a restart test takes a fraction of a second.
    static let fastReconnect: NATSClientConfiguration = {
        var configuration = NATSClientConfiguration(name: "homeward-tests")
        configuration.reconnect = NATSReconnectBackoff(firstDelay: .milliseconds(20), maximumDelay: .milliseconds(200), jitter: 0)
        configuration.connectTimeout = .seconds(2)
        return configuration
    }()
}
