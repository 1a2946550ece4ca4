import HomewardProtocol

/// Where the relay keeps alarms (and their acknowledgements and cancellations) that it delivered while its
/// store failed, until the store takes them: a local append-only log, one per relay (the server gives the
/// relay a file in its data directory). The relay itself does no file I/O; it sees only this.
///
/// Each record is the `StoreChange`s of one alarm operation, stored later exactly as the operation would
/// have stored them. Replaying is idempotent by alarm id (`saveAlarm` inserts or replaces, `endAlarm`
/// ends an alarm once), so a record replayed twice, after a crash between the store's commit and
/// `removeAll`, changes nothing the second time.
public protocol AlarmSpool: Sendable {
    /// Appends one record; when this returns it is on disk (fsync'd). When it throws, the record may be
    /// missing, never half there as far as `records` is concerned.
    func append(_ changes: [StoreChange]) async throws
    /// Every whole record in the order appended. A record that cannot be read (torn by a crash in the
    /// middle of its write, or corrupt) is skipped and counted, never a reason to fail.
    func records() async throws -> SpoolContents
    /// Every record is stored: the spool starts empty again.
    func removeAll() async throws
}

/// What a spool holds.
public struct SpoolContents: Sendable {
    public var records: [[StoreChange]]
    /// Records that could not be read and were skipped.
    public var skipped: Int

    public init(records: [[StoreChange]] = [], skipped: Int = 0) {
        self.records = records
        self.skipped = skipped
    }
}

/// How a record's changes are written as JSON and read back (the server supplies the encoding the
/// relays' bus uses for the same changes, so there is one form of a `StoreChange` in JSON).
public struct SpoolCodec: Sendable {
    public let encode: @Sendable ([StoreChange]) -> JSONValue
    public let decode: @Sendable (JSONValue) throws -> [StoreChange]

    public init(encode: @escaping @Sendable ([StoreChange]) -> JSONValue,
                decode: @escaping @Sendable (JSONValue) throws -> [StoreChange]) {
        self.encode = encode
        self.decode = decode
    }
}
