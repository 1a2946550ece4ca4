import HomewardProtocol
import NIOCore
import Synchronization

/// Every open WebSocket connection, so that shutdown can say goodbye to each.
final class ConnectionRegistry: Sendable {
    private let connections = Mutex<[ObjectIdentifier: WebSocketConnection]>([:])

    func add(_ connection: WebSocketConnection) {
        connections.withLock { $0[ObjectIdentifier(connection)] = connection }
    }

    func remove(_ connection: WebSocketConnection) {
        connections.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(connection)) }
    }

    var count: Int { connections.withLock { $0.count } }

    /// Closes every connection with `code` and waits until they are gone (or `timeout` passes).
    func closeAll(_ code: CloseCode, reason: String, timeout: TimeAmount) async {
        let all = connections.withLock { Array($0.values) }
        for connection in all { connection.close(code, reason: reason) }
        let deadline = NIODeadline.now() + timeout
        while count > 0, NIODeadline.now() < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}
