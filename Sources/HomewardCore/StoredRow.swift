/// One row a store read back, as the shared readers (`StoredState.init(rows:)`, `OutboxEntry.init(stored:)`)
/// decode it: by column position, in the types `StoredValue` writes. Each store implements it once for its
/// row type, and what differs between the stores' columns stays there: free text is the UTF-8 of a BLOB or
/// a BYTEA, a boolean is 0/1 or BOOLEAN.
public protocol StoredRow {
    func isNull(_ column: Int) throws -> Bool
    func text(_ column: Int) throws -> String
    func freeText(_ column: Int) throws -> String
    func int(_ column: Int) throws -> Int64
    func double(_ column: Int) throws -> Double
    func bool(_ column: Int) throws -> Bool
    func bytes(_ column: Int) throws -> [UInt8]
    /// The store's own error for a row whose value the relay does not know (an unknown state name).
    static func unreadable(_ reason: String) -> any Error
}

extension StoredRow {
    public func optionalText(_ column: Int) throws -> String? { try isNull(column) ? nil : text(column) }
    public func optionalFreeText(_ column: Int) throws -> String? { try isNull(column) ? nil : freeText(column) }
    public func optionalInt(_ column: Int) throws -> Int64? { try isNull(column) ? nil : int(column) }
    public func optionalDouble(_ column: Int) throws -> Double? { try isNull(column) ? nil : double(column) }
}
