/// Ids of sessions or alarms that ended lately, at most `capacity` of them (the oldest forgotten first).
///
/// A store keeps an ended session or alarm ended when it is saved again (`ON CONFLICT DO UPDATE` leaves
/// `ended_at` alone), and a relay that had not heard of the end yet may well save it again (an accept
/// crossing the owner's end on another relay). A cache applying that save must ignore it as the store did,
/// so it remembers what ended. Such a save trails its end by the time a notice takes to arrive, so the
/// last few thousand ends are plenty; an id is never reused (`RandomID`).
struct RecentlyEnded: Sendable {
    private var ids = Set<String>()
    private var order = FIFO<String>()
    let capacity: Int

    init(capacity: Int = 10_000) { self.capacity = capacity }

    func contains(_ id: String) -> Bool { ids.contains(id) }

    /// Not ended after all: an alarm this relay delivered while its store failed, which a read-back of the
    /// store did not show (`Relay+Spool`).
    mutating func remove(_ id: String) { ids.remove(id) }

    mutating func insert(_ id: String) {
        guard ids.insert(id).inserted else { return }
        order.append(id)
        while order.count > capacity, let oldest = order.popFirst() { ids.remove(oldest) }
    }
}
