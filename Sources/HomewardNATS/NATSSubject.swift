/// Subject and queue-group rules, checked before anything is written: the protocol separates fields
/// by whitespace, so a subject with a space would be read by the server as two fields.
enum NATSSubject {
    /// `a.b.c`: non-empty tokens, no whitespace; `*` and `>` (last token only) when `wildcards`.
    static func validate(_ subject: String, wildcards: Bool) throws(NATSError) {
        let tokens = subject.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard !subject.isEmpty, subject.utf8.allSatisfy({ !isSpace($0) }) else { throw .invalidSubject(subject) }
        for (index, token) in tokens.enumerated() {
            guard !token.isEmpty else { throw .invalidSubject(subject) }
            let isWildcard = token.elementsEqual("*".utf8) || token.elementsEqual(">".utf8)
            if isWildcard {
                guard wildcards, !token.elementsEqual(">".utf8) || index == tokens.count - 1 else { throw .invalidSubject(subject) }
            }
        }
    }

    static func validateQueueGroup(_ group: String) throws(NATSError) {
        guard !group.isEmpty, group.utf8.allSatisfy({ !isSpace($0) }) else { throw .invalidQueueGroup(group) }
    }

    /// Space, tab, CR, LF and the other C0 controls: none may appear inside a protocol field.
    static func isSpace(_ byte: UInt8) -> Bool { byte <= 32 || byte == 127 }
}
