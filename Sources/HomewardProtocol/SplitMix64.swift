/// SplitMix64: a small, fast generator whose numbers follow from its seed alone, for whatever must come out the
/// same on every run with the same seed: a simulated walk's GPS noise (`homeward sim --seed`), the city a benchmark
/// fills its store with, a randomised test's steps (replayed from the seed it reports). Not for anything secret.
///
/// Here because the command, the benchmarks and the tests all depend on this module, and nothing lower.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
