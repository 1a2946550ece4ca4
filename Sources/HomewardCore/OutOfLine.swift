/// An optional value kept out of line: nil is an empty array (8 bytes inline, nothing allocated), a value one
/// array element. For large fields that most values of a type leave empty, in types kept by the hundred
/// thousand (a presence entry for every owner and observer of every active session): the field then costs its
/// size only where it is set.
struct OutOfLine<Wrapped> {
    /// At most one element.
    private var storage: [Wrapped] = []

    init(_ value: Wrapped? = nil) {
        if let value { storage = [value] }
    }

    var value: Wrapped? {
        get { storage.first }
        // Moved out and back, so that changing the value in place (a trail recording a position) does not copy
        // what it holds: the element is uniquely referenced while it is changed.
        _modify {
            var value = storage.popLast()
            defer {
                if let value {
                    if storage.isEmpty { storage.append(value) } else { storage[0] = value }
                } else {
                    storage = []
                }
            }
            yield &value
        }
        set {
            if let newValue {
                if storage.isEmpty { storage.append(newValue) } else { storage[0] = newValue }
            } else {
                storage = []
            }
        }
    }
}

extension OutOfLine: Sendable where Wrapped: Sendable {}
extension OutOfLine: Equatable where Wrapped: Equatable {}
