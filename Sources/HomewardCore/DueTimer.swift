import Dispatch

/// The relay's one timer (`Relay.armTimer`): the Dispatch source that submits `fireDue`, and the deadline it points at.
struct DueTimer {
    var source: (any DispatchSourceTimer)?
    /// Where it points (nil: nowhere, or pointed anew by the next `armTimer`).
    var deadline: Int64?

    /// Points it nowhere.
    mutating func cancel() {
        source?.cancel()
        source = nil
        deadline = nil
    }
}
