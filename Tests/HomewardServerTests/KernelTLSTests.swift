@testable import HomewardServer
import Testing

/// Reading `/proc/sys/net/ipv4/tcp_available_ulp` and what `--ktls` still lacks, on file contents: no kernel needed.
struct KernelTLSTests {
    @Test(arguments: ["tls\n", "mptcp tls\n", "tls mptcp", "espintcp\ttls\n"])
    func aListNamingTLSOffersIt(contents: String) {
        #expect(KernelTLS.kernelOffersTLS(availableULP: contents))
    }

    @Test(arguments: ["", "\n", "mptcp\n", "ktls mptcp\n", "tls_sw espintcp\n", "TLS\n"])
    func aListWithoutTheWordTLSDoesNotOfferIt(contents: String) {
        #expect(!KernelTLS.kernelOffersTLS(availableULP: contents))
    }

    @Test func withoutTheModuleTheReasonNamesWhatIsListedAndHowToLoadIt() {
        let reasons = KernelTLS.obstacles(backend: .openssl, availableULP: "mptcp\n")
        #expect(reasons.contains { $0.contains("no tls module") && $0.contains("lists only: mptcp") && $0.contains("modprobe tls") })
        #expect(!reasons.contains { $0.contains("--tls-backend openssl") })
    }

    @Test func anEmptyListSaysNothingIsListed() {
        let reasons = KernelTLS.obstacles(backend: .openssl, availableULP: "\n")
        #expect(reasons.contains { $0.contains("tcp_available_ulp lists nothing") })
    }

    @Test func noSuchFileIsAReasonOfItsOwn() {
        let reasons = KernelTLS.obstacles(backend: .openssl, availableULP: nil)
        #expect(reasons.contains { $0.contains("this kernel has no /proc/sys/net/ipv4/tcp_available_ulp") })
    }

    @Test func swiftNIOSSLIsAReasonWhateverTheKernelOffers() {
        for contents in ["tls\n", "mptcp\n"] {
            let reasons = KernelTLS.obstacles(backend: .nioSSL, availableULP: contents)
            #expect(reasons.contains { $0.contains("needs --tls-backend openssl") && $0.contains("nio-ssl") })
        }
    }

    /// The handler gives OpenSSL memory BIOs, which refuse `BIO_set_ktls`: even OpenSSL on a kernel with the
    /// module cannot serve kTLS, so the flag is refused rather than silently left without effect.
    @Test func evenOpenSSLOnAKernelWithTheModuleCannotServeItThroughMemoryBuffers() {
        let reasons = KernelTLS.obstacles(backend: .openssl, availableULP: "mptcp tls\n")
        #expect(reasons.count == 1)
        #expect(reasons.first?.contains("memory buffers") == true)
    }

    @Test func theStartupErrorListsEveryReasonAndHowToStart() {
        let error = RelayStartupError.kernelTLSUnavailable(reasons: ["first", "second"])
        #expect(error.description == "cannot use kernel TLS (--ktls): first; second. Leave out --ktls (HOMEWARD_KTLS)")
    }
}
