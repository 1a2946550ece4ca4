import Crypto
import Foundation
import HomewardProtocol
import HomewardTestSupport
import XCTest

/// The `homeward` executable against a real relay on a loopback port, one subprocess per
/// command, the way two people in two terminals would use it.
final class CLIEndToEndTests: XCTestCase {
    private let password = "correct horse\n"

    /// Registers two profiles and makes them friends; returns their usernames.
    private func befriend(_ cli: CLIHarness) async throws -> (walker: String, follower: String) {
        let walker = uniqueName("ann")
        let follower = uniqueName("ben")
        // Only register gets --relay and --ca: the profile remembers them for every later command.
        try await cli.run(["register", walker, "--name", "Ann", "--password-stdin", "--profile", "walker"] + cli.connection, stdin: password)
            .expectSuccess()
        try await cli.run(["register", follower, "--password-stdin", "--profile", "follower"] + cli.connection, stdin: password)
            .expectSuccess()
        try await cli.run(["friends", "request", follower, "--profile", "walker"]).expectSuccess()
        let accepted = try await cli.run(["--json", "friends", "accept", walker, "--profile", "follower"]).expectSuccess()
        XCTAssertEqual(accepted.json.first?["type"], "friend.added")
        let list = try await cli.run(["friends", "list", "--profile", "walker", "--json"]).expectSuccess()
        guard case .array(let friends)? = list.json.first?["friends"] else { throw TestFailure("no friends array in \(list.stdout)") }
        XCTAssertEqual(friends.map { $0["username"]?.stringValue }, [follower])
        return (walker, follower)
    }

    func testShareLinkLinksAndRevoke() async throws {
        let relay = try await LoopbackRelay.start()
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        let (_, follower) = try await befriend(cli)
        try await cli.run(["share", "start", "--invite", follower, "--profile", "walker"]).expectSuccess()

        let bad = try await cli.run(["share", "link", "--ttl", "59", "--profile", "walker"])
        XCTAssertNotEqual(bad.status, 0, "a ttl under 60 s is refused")
        let made = try await cli.run(["share", "link", "--ttl", "600", "--json", "--profile", "walker"]).expectSuccess()
        let share = try XCTUnwrap(made.json.first?["share"])
        let token = try XCTUnwrap(share["token"]?.stringValue)
        XCTAssertEqual(share["url"]?.stringValue, "https://127.0.0.1:\(relay.port)/f#\(token)")
        let shareId = try XCTUnwrap(share["shareId"]?.stringValue)

        let listed = try await cli.run(["share", "links", "--json", "--profile", "walker"]).expectSuccess()
        guard case .array(let links)? = listed.json.first?["shares"] else { throw TestFailure("no shares array in \(listed.stdout)") }
        XCTAssertEqual(links.map { $0["shareId"]?.stringValue }, [shareId])
        XCTAssertNil(links.first?["token"], "the token is not listed")

        let notOwner = try await cli.run(["share", "revoke", shareId, "--profile", "follower"])
        XCTAssertNotEqual(notOwner.status, 0)
        try await cli.run(["share", "revoke", shareId, "--profile", "walker"]).expectSuccess()
        let after = try await cli.run(["share", "links", "--profile", "walker"]).expectSuccess()
        XCTAssertTrue(after.stdout.contains("no live share links"), after.stdout)
        await relay.stop()
    }

    func testAFollowerReceivesEveryPositionOfAWalkInOrderAndThePanic() async throws {
        let relay = try await LoopbackRelay.start()
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        let (walker, follower) = try await befriend(cli)

        let started = try await cli.run(["share", "start", "--invite", follower, "--note", "end to end", "--json", "--profile", "walker"])
            .expectSuccess()
        let sessionId = try XCTUnwrap(started.json.first?["session"]?["sessionId"]?.stringValue)

        let follow = try cli.start(["follow", walker, "--json", "--timeout", "90", "--profile", "follower"])
        defer { follow.stop() }
        let following = try await follow.nextJSON("the follower to accept") { $0["type"] == "following" }
        XCTAssertEqual(following["session"]?["sessionId"]?.stringValue, sessionId)

        let walk = try await cli.run([
            "walk", "--from", "57.7089,11.9746", "--to", "57.7093,11.9752", "--speed", "20", "--interval", "0.05",
            "--accuracy", "4", "--seed", "7", "--panic-at", "5", "--panic-text", "help me", "--json", "--profile", "walker",
        ], within: 90).expectSuccess()
        let sent = walk.json.filter { $0["type"] == "walk.step" }
        XCTAssertGreaterThan(sent.count, 20)
        XCTAssertEqual(walk.json.last?["type"], "walk.done")
        let alarmId = try XCTUnwrap(walk.json.first { $0["type"] == "alarm.raised" }?["alarmId"]?.stringValue)

        // Every position, in order, exactly as sent; and the alarm among them.
        let received = try await withTimeout(60, "\(sent.count) positions and the alarm at the follower") {
            var positions: [JSONValue] = []
            var alarm: JSONValue?
            for await line in follow.lines {
                guard let event = try? JSONParser.parse(line) else { continue }
                if event["type"] == "pos" { positions.append(event) }
                if event["type"] == "alarm" { alarm = event }
                if positions.count == sent.count, alarm != nil { break }
            }
            return (positions, alarm)
        }
        XCTAssertEqual(received.0.count, sent.count)
        for (got, expected) in zip(received.0, sent) {
            XCTAssertEqual(got["from"]?.stringValue, walker)
            for key in ["lat", "lon", "acc", "spd", "hdg", "ts"] {
                XCTAssertEqual(got[key], expected[key], "\(key) of position \(expected["step"] ?? .null)")
            }
        }
        let alarm = try XCTUnwrap(received.1)
        XCTAssertEqual(alarm["alarm"]?["alarmId"]?.stringValue, alarmId)
        XCTAssertEqual(alarm["alarm"]?["text"], "help me")
        XCTAssertEqual(alarm["alarm"]?["from"]?["username"]?.stringValue, walker)

        try await cli.run(["ack", alarmId, "--profile", "follower"]).expectSuccess()
        try await cli.run(["share", "end", "--profile", "walker"]).expectSuccess()
        let ended = try await follow.nextJSON("session.ended at the follower") { $0["type"] == "session.ended" }
        XCTAssertEqual(ended["sessionId"]?.stringValue, sessionId)
        let followStatus = try await follow.exitStatus()
        XCTAssertEqual(followStatus, 0, follow.stderr)
        // `cancel` without an id cancels the alarm this profile raised last.
        let cancelled = try await cli.run(["cancel", "--json", "--profile", "walker"]).expectSuccess()
        XCTAssertEqual(cancelled.json.first?["alarmId"]?.stringValue, alarmId)

        await relay.stop()
    }

    func testAFollowerReconnectsAfterARelayRestartAndKeepsReceiving() async throws {
        let relay = try await LoopbackRelay.start()
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        let (walker, _) = try await befriend(cli)
        try await cli.run(["share", "start", "--profile", "walker"]).expectSuccess()
        let follow = try cli.start(["follow", walker, "--json", "--timeout", "90", "--profile", "follower"])
        defer { follow.stop() }
        _ = try await follow.nextJSON("the follower to accept") { $0["type"] == "following" }

        try await relay.restart()
        // The follower signs in again with its token; the session survived the restart.
        _ = try await follow.nextJSON("the follower to reconnect", within: 30) {
            $0["type"] == "connection" && $0["state"] == "reconnected"
        }
        try await cli.run(["pos", "57.71,11.98", "--acc", "6", "--profile", "walker"]).expectSuccess()
        let position = try await follow.nextJSON("a position after the restart") { $0["type"] == "pos" }
        XCTAssertEqual(position["lat"], 57.71)
        XCTAssertEqual(position["acc"], 6)
        try await cli.run(["share", "end", "--profile", "walker"]).expectSuccess()
        let status = try await follow.exitStatus()
        XCTAssertEqual(status, 0, follow.stderr)
        await relay.stop()
    }

    func testAPanicReachesAFollowerWatchingFromAnotherTerminal() async throws {
        let relay = try await LoopbackRelay.start()
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        let (walker, _) = try await befriend(cli)

        let watch = try cli.start(["watch", "--json", "--timeout", "60", "--profile", "follower"])
        defer { watch.stop() }
        // No need to wait for the watcher to connect: an alarm raised before reaches it on sign-in.
        let raised = try await cli.run(["panic", "--text", "on the bridge", "--at", "57.7,11.97", "--acc", "12", "--json", "--profile", "walker"])
            .expectSuccess()
        let alarmId = try XCTUnwrap(raised.json.first?["alarmId"]?.stringValue)
        let alarm = try await watch.nextJSON("the alarm at the watcher") { $0["type"] == "alarm" }
        XCTAssertEqual(alarm["alarm"]?["alarmId"]?.stringValue, alarmId)
        XCTAssertEqual(alarm["alarm"]?["text"], "on the bridge")
        XCTAssertEqual(alarm["alarm"]?["position"]?["acc"], 12)
        XCTAssertEqual(alarm["alarm"]?["from"]?["username"]?.stringValue, walker)
        watch.stop()
        await relay.stop()
    }

    func testShareWithSafetyOptionsCheckinAndArrivalEndTheSessionForTheFollower() async throws {
        let relay = try await LoopbackRelay.start()
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        let (_, follower) = try await befriend(cli)

        let before = Int64(Date().timeIntervalSince1970 * 1000)
        let started = try await cli.run([
            "share", "start", "--invite", follower, "--check-in", "30", "--destination", "57.7,11.97,40", "--ttl", "120",
            "--json", "--profile", "walker",
        ]).expectSuccess()
        let session = try XCTUnwrap(started.json.first?["session"])
        let sessionId = try XCTUnwrap(session["sessionId"]?.stringValue)
        let checkInBy = try XCTUnwrap(session["checkInBy"]?.numberValue)
        XCTAssertEqual(checkInBy, Double(before + 30 * 60_000), accuracy: 60_000)
        XCTAssertEqual(session["destination"]?["radius"], 40)
        let expiresAt = try XCTUnwrap(session["expiresAt"]?.numberValue)
        XCTAssertEqual(expiresAt, Double(before + 120 * 60_000), accuracy: 60_000)

        let moved = try await cli.run(["checkin", "--next", "5", "--json", "--profile", "walker"]).expectSuccess()
        let next = try XCTUnwrap(moved.json.first?["checkInBy"]?.numberValue)
        XCTAssertEqual(next, Double(before + 5 * 60_000), accuracy: 60_000)
        let listed = try await cli.run(["share", "list", "--json", "--profile", "walker"]).expectSuccess()
        XCTAssertEqual(listed.json.first?["own"]?["checkInBy"]?.numberValue, next)

        let tooFar = try await cli.run(["checkin", "--next", "20000", "--profile", "walker"])
        XCTAssertEqual(tooFar.status, 64)
        let cleared = try await cli.run(["checkin", "--json", "--profile", "walker"]).expectSuccess()
        XCTAssertEqual(cleared.json.first?["checkInBy"], .null)
        let afterClear = try await cli.run(["share", "list", "--json", "--profile", "walker"]).expectSuccess()
        XCTAssertNil(afterClear.json.first?["own"]?["checkInBy"])

        let watch = try cli.start(["watch", "--json", "--timeout", "60", "--profile", "follower"])
        defer { watch.stop() }
        _ = try await watch.nextJSON("the invitation at the watcher") { $0["type"] == "session.invite" }
        // A position inside the destination ends the walk by itself.
        try await cli.run(["pos", "57.70001,11.97001", "--profile", "walker"]).expectSuccess()
        let ended = try await watch.nextJSON("the arrival at the watcher") { $0["type"] == "session.ended" }
        XCTAssertEqual(ended["sessionId"]?.stringValue, sessionId)
        XCTAssertEqual(ended["reason"], "arrived")
        let gone = try await cli.run(["checkin", "--profile", "walker"])
        XCTAssertEqual(gone.status, 1)
        XCTAssertTrue(gone.stderr.contains("[not_found]"), gone.stderr)
        watch.stop()
        await relay.stop()
    }

    func testErrorsAreOneLineWithTheProtocolCodeAndANonZeroExit() async throws {
        let relay = try await LoopbackRelay.start()
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        let name = uniqueName("cat")

        let notSignedIn = try await cli.run(["friends", "list", "--profile", "nobody"] + cli.connection)
        XCTAssertEqual(notSignedIn.status, 3)
        XCTAssertTrue(notSignedIn.stderr.hasPrefix("homeward: error [unauthenticated]:"), notSignedIn.stderr)

        try await cli.run(["register", name, "--password-stdin", "--profile", "cat"] + cli.connection, stdin: password).expectSuccess()
        let taken = try await cli.run(["register", name, "--password-stdin", "--profile", "other"] + cli.connection, stdin: password)
        XCTAssertEqual(taken.status, 1)
        XCTAssertEqual(taken.stderr.split(separator: "\n").count, 1, taken.stderr)
        XCTAssertTrue(taken.stderr.hasPrefix("homeward: error [conflict]:"), taken.stderr)

        let missing = try await cli.run(["friends", "request", "no_such_user", "--json", "--profile", "cat"])
        XCTAssertEqual(missing.status, 1)
        XCTAssertEqual(missing.json.first?["type"], "error")
        XCTAssertEqual(missing.json.first?["code"], "not_found")

        let untrusted = try await cli.run(["friends", "list", "--profile", "cat", "--ca", "/nonexistent/ca.pem"])
        XCTAssertEqual(untrusted.status, 2)
        XCTAssertTrue(untrusted.stderr.contains("error [tls]:") && untrusted.stderr.contains("/nonexistent/ca.pem"), untrusted.stderr)

        let badWalk = try await cli.run(["walk", "--gpx", "/nonexistent/walk.gpx", "--profile", "cat"])
        XCTAssertEqual(badWalk.status, 3)
        XCTAssertTrue(badWalk.stderr.contains("error [file]: cannot read GPX file /nonexistent/walk.gpx"), badWalk.stderr)

        let usage = try await cli.run(["walk", "--from", "1,2", "--profile", "cat"])
        XCTAssertEqual(usage.status, 64)

        // Numbers a Double takes but a duration cannot (they trapped): usage errors before anything connects.
        for (arguments, message) in [(["share", "start", "--check-in", "inf"], "--check-in must be more than 0 and at most 10080 minutes"),
                                     (["share", "start", "--ttl", "1e300"], "--ttl must be more than 0 and at most 10080 minutes"),
                                     (["follow", "ann", "--timeout", "inf"], "--timeout must be more than 0 and at most 604800 seconds"),
                                     (["watch", "--timeout", "nan"], "--timeout must be more than 0 and at most 604800 seconds")] {
            let refused = try await cli.run(arguments + ["--profile", "cat"])
            XCTAssertEqual(refused.status, 64, "\(arguments): \(refused.stderr)")
            XCTAssertTrue(refused.stderr.contains("Error: \(message)"), "\(arguments): \(refused.stderr)")
        }
        // Coordinates are checked before connecting: a relay where nothing listens does not hide the usage error.
        let nowhere = ["--relay", "wss://127.0.0.1:1", "--profile", "cat"]
        for (arguments, message) in [(["pos", "91,0"], "expected LAT,LON, e.g. 57.7089,11.9746"),
                                     (["pos", "57.7,11.9", "--hdg", "400"], "hdg"),
                                     (["walk", "--from", "57.7,11.9", "--to", "x"], "--from and --to must be LAT,LON"),
                                     (["walk", "--from", "57.7,11.9", "--to", "57.7,11.91", "--panic-at", "100000"],
                                      "--panic-at must be a step from 0 to")] {
            let refused = try await cli.run(arguments + nowhere)
            XCTAssertEqual(refused.status, 64, "\(arguments): \(refused.stderr)")
            XCTAssertTrue(refused.stderr.contains("Error: ") && refused.stderr.contains(message), "\(arguments): \(refused.stderr)")
        }

        // The profile file holds the token and is readable by its owner only.
        let attributes = try FileManager.default.attributesOfItem(atPath: cli.configDirectory + "/profiles/cat.json")
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)

        try await cli.run(["logout", "--profile", "cat"]).expectSuccess()
        let afterLogout = try await cli.run(["friends", "list", "--profile", "cat"])
        XCTAssertEqual(afterLogout.status, 3)
        await relay.stop()
    }

    func testPushSubscribeListUnsubscribeAndABadKeyIsOneLineError() async throws {
        let relay = try await LoopbackRelay.start()
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        func base64url(_ bytes: some Sequence<UInt8>) -> String {
            Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let p256dh = base64url(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        let auth = base64url((0..<16).map { UInt8($0) })
        try await cli.run(["register", uniqueName("pat"), "--password-stdin", "--profile", "pat"] + cli.connection, stdin: password)
            .expectSuccess()
        // A public address written as a literal: the relay needs no DNS to check it.
        let endpoint = "https://8.8.8.8/push/\(uniqueName("s"))"
        let subscribed = try await cli.run(["push", "subscribe", endpoint, "--p256dh", p256dh, "--auth", auth, "--json", "--profile", "pat"])
            .expectSuccess()
        let id = try XCTUnwrap(subscribed.json.first?["subscriptionId"]?.stringValue)
        let listed = try await cli.run(["push", "list", "--json", "--profile", "pat"]).expectSuccess()
        guard case .array(let subscriptions)? = listed.json.first?["subscriptions"] else { throw TestFailure("no subscriptions in \(listed.stdout)") }
        XCTAssertEqual(subscriptions.map { $0["subscriptionId"]?.stringValue }, [id])
        XCTAssertEqual(subscriptions.first?["endpoint"]?.stringValue, endpoint)

        let badKey = try await cli.run(["push", "subscribe", endpoint, "--p256dh", String(p256dh.dropLast(3)), "--auth", auth, "--profile", "pat"])
        XCTAssertEqual(badKey.status, 1)
        XCTAssertTrue(badKey.stderr.hasPrefix("homeward: error [bad_request]:") && badKey.stderr.contains("p256dh"), badKey.stderr)
        let loopback = try await cli.run(["push", "subscribe", "https://127.0.0.1/x", "--p256dh", p256dh, "--auth", auth, "--profile", "pat"])
        XCTAssertTrue(loopback.stderr.contains("loopback"), loopback.stderr)

        try await cli.run(["push", "unsubscribe", id, "--profile", "pat"]).expectSuccess()
        let empty = try await cli.run(["push", "list", "--profile", "pat"]).expectSuccess()
        XCTAssertTrue(empty.stdout.contains("no push subscriptions"), empty.stdout)
        await relay.stop()
    }

    func testSimWithAFewWalkersLosesNothing() async throws {
        let relay = try await LoopbackRelay.start()
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        let result = try await cli.run(["sim", "--walkers", "3", "--watchers", "2", "--rate", "10", "--duration", "2", "--alarms", "2", "--json"]
                                       + cli.connection, within: 120)
            .expectSuccess()
        let summary = try XCTUnwrap(result.json.last)
        XCTAssertEqual(summary["type"], "sim.summary")
        XCTAssertEqual(summary["sent"], 60)
        XCTAssertEqual(summary["expectedDeliveries"], 120)
        XCTAssertEqual(summary["delivered"], 120)
        XCTAssertEqual(summary["lost"], 0)
        XCTAssertEqual(summary["duplicated"], 0)
        XCTAssertEqual(summary["outOfOrder"], 0)
        XCTAssertEqual(summary["errors"], 0)
        XCTAssertEqual(summary["alarms"]?["delivered"], 4)
        XCTAssertEqual(summary["alarms"]?["lost"], 0)
        XCTAssertNotNil(summary["latencyMs"]?["p99.9"]?.numberValue)
        XCTAssertEqual(summary["clean"], true)
        await relay.stop()
    }

    /// A relay closes connections from one address past its unauthenticated limit: sim opens each connection only
    /// when it signs up at once, so --concurrency of them wait to sign in, not all W x (K + 1).
    func testSimSignsEachConnectionUpAsItOpensSoARelaysUnauthenticatedLimitIsNoObstacle() async throws {
        let relay = try await LoopbackRelay.start { $0.limits.maxUnauthenticatedPerAddress = 3 }
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        let result = try await cli.run(["sim", "--walkers", "3", "--watchers", "2", "--rate", "5", "--duration", "1",
                                        "--concurrency", "2", "--json"] + cli.connection, within: 120)
            .expectSuccess()
        let summary = try XCTUnwrap(result.json.last)
        XCTAssertEqual(summary["delivered"], 30)
        XCTAssertEqual(summary["clean"], true)
        await relay.stop()
    }

    func testTheShellRunsTypedCommandsAndPrintsEvents() async throws {
        let relay = try await LoopbackRelay.start()
        let cli = try CLIHarness(relay: relay)
        defer { cli.cleanUp() }
        let (walker, follower) = try await befriend(cli)
        let script = """
            whoami
            share start --note "from the shell"
            pos 57.70,11.97 --acc 3
            friends request \(follower)
            share end
            exit

            """
        let shell = try await cli.run(["shell", "--profile", "walker"], stdin: script).expectSuccess()
        XCTAssertTrue(shell.stdout.contains("\(walker) (Ann) on \(relay.url)"), shell.stdout)
        XCTAssertTrue(shell.stdout.contains("started session s_"), shell.stdout)
        XCTAssertTrue(shell.stdout.contains("sent 57.700000, 11.970000"), shell.stdout)
        XCTAssertTrue(shell.stdout.contains("ended session s_"), shell.stdout)
        // A failing command reports its error and the shell carries on.
        XCTAssertTrue(shell.stderr.contains("error [conflict]"), shell.stderr)
        await relay.stop()
    }
}
