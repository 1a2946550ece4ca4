import HomewardNATS

/// How the relay hears about what other relays do (`--bus`).
public enum BusSetting: Sendable, Equatable, CustomStringConvertible {
    /// In-process: this relay is the only one (the zero-setup default).
    case local
    /// nats-server: several relays sharing one PostgreSQL store exchange positions and notices through it.
    /// The client tries the servers in this order and fails over to the next.
    case nats([NATSServerAddress])

    /// Parses `local` or `nats://HOST[:PORT][,HOST[:PORT]...]` (each later server may repeat `nats://`).
    public init(parsing text: String) throws(BusSettingError) {
        if text == "local" {
            self = .local
            return
        }
        guard text.lowercased().hasPrefix("nats://") else { throw .unknown(text) }
        let servers = text.dropFirst("nats://".count).split(separator: ",", omittingEmptySubsequences: false)
        var addresses: [NATSServerAddress] = []
        for server in servers {
            let trimmed = server.trimmingPrefix("nats://")
            guard !trimmed.isEmpty else { throw .badURL(text, reason: "an empty server in the list") }
            do { addresses.append(try NATSServerAddress(url: "nats://" + trimmed)) } catch {
                throw .badURL(text, reason: "'\(BusSettingError.masked(String(trimmed)))' is not HOST[:PORT] (a port is 1-65535)")
            }
        }
        self = .nats(addresses)
    }

    public var description: String {
        switch self {
        case .local: "local"
        case .nats(let servers): servers.map(\.description).joined(separator: ",")
        }
    }
}

/// A `--bus` value the relay cannot use.
public enum BusSettingError: Error, CustomStringConvertible, Equatable {
    case unknown(String)
    case badURL(String, reason: String)

    public var description: String {
        switch self {
        case .unknown(let text): "unknown bus '\(Self.masked(text))': use local or nats://HOST:PORT[,HOST:PORT...]"
        case .badURL(let text, let reason): "bad bus URL '\(Self.masked(text))': \(reason)"
        }
    }

    /// The text with any `user:password@` password replaced, for the message.
    static func masked(_ text: String) -> String {
        var result = ""
        var rest = Substring(text)
        while let at = rest.firstIndex(of: "@") {
            let before = rest[..<at]
            if let colon = before.lastIndex(of: ":"), !before[before.index(after: colon)...].contains("/"),
               !before[before.index(after: colon)...].contains(",") {
                result += before[...colon] + "***@"
            } else {
                result += before + "@"
            }
            rest = rest[rest.index(after: at)...]
        }
        return result + rest
    }
}
