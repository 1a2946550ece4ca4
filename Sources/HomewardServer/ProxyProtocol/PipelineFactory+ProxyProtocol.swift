import NIOCore

extension PipelineFactory {
    /// A connection from a trusted balancer: nothing but a `ProxyHeaderHandler` until its header says who
    /// the client is. Only then is the connection admitted, and served, as coming from the client's
    /// address, so that every per-address limit, log line and metric sees the client rather than the balancer.
    /// A header without a client address (health checks: v2 LOCAL, v1 UNKNOWN) leaves the balancer's own.
    func expectProxyHeader(on channel: any Channel, from balancer: SocketAddress) throws {
        let balancerAddress = balancer.ipAddress ?? "unknown"
        let handler = ProxyHeaderHandler(timeout: .nanoseconds(Int64(limits.handshakeTimeout * 1e9)), logger: logger) { header in
            let peer = header.source?.ipAddress ?? balancerAddress
            logger.trace("PROXY protocol header", metadata: ["peer": "\(peer)", "balancer": "\(balancerAddress)"])
            try serve(channel, peer: peer, slot: admit(channel, peer: peer))
        }
        try channel.pipeline.syncOperations.addHandler(handler)
    }
}
