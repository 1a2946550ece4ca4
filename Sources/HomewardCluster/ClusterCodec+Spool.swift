import HomewardCore
import HomewardProtocol

extension ClusterCodec {
    /// The alarm spool's records in the same JSON as the changes of a notice (`encode`, `decodeChange`), so that
    /// a `StoreChange` has one JSON form: `{"changes": [...]}`, each change an object named by `op`.
    public static let spoolCodec = SpoolCodec(
        encode: { changes in .object([("changes", .array(changes.map { ClusterCodec.encode($0) }))]) },
        decode: { record in
            guard case .array(let changes)? = record["changes"] else { throw ClusterCodec.DecodingError.malformed("a spool record without changes") }
            return try changes.map { (change: JSONValue) throws(ClusterCodec.DecodingError) -> StoreChange in
                try ClusterCodec.decodeChange(change)
            }
        })
}
