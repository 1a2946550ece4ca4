import HomewardServer
import Testing

/// The `--bus` values a relay accepts.
struct BusSettingTests {
    @Test func busSettingsAreParsed() throws {
        #expect(try BusSetting(parsing: "local") == .local)
        let cluster = try BusSetting(parsing: "nats://10.0.0.1:4222,10.0.0.2,nats://u:p@10.0.0.3:5222")
        guard case .nats(let servers) = cluster else { Issue.record("not nats: \(cluster)"); return }
        #expect(servers.map(\.host) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"])
        #expect(servers.map(\.port) == [4222, 4222, 5222])
        #expect(servers[2].password == "p")
        #expect(!cluster.description.contains(":p@"), "the password is not shown: \(cluster)")
    }
}
