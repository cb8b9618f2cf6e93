import Foundation
import SyncCRDT
import SyncModels
import SyncTestSupport
import TasksModel
import Testing

/// The merge rules of a task, on in-memory replicas: every pair of concurrent edits applied in both
/// orders, and the outcome the domain promises.
@Suite struct TaskStateTests {
    /// Two devices that both hold a created task.
    static func twoDevices(_ setUp: (inout Device) -> [Delivery] = { _ in [] }) -> (Device, Device, [Delivery]) {
        var phone = Device(1)
        var laptop = Device(2)
        var shared = [phone.create("Milk")]
        shared += setUp(&phone)
        laptop.receive(shared)
        return (phone, laptop, shared)
    }

    @Test func aCompletionWinsOverAConcurrentReopen() {
        // The task is done on both; then, offline, one reopens it while the other completes it again.
        var (phone, laptop, shared) = Self.twoDevices { phone in [phone.complete()] }
        #expect(laptop.state.isDone)
        let reopen = phone.reopen()
        let complete = laptop.complete()
        #expect(!phone.state.isDone && laptop.state.isDone)
        phone.receive([complete])
        laptop.receive([reopen])
        #expect(phone.state.isDone && laptop.state.isDone, "the completion the reopen did not see wins")
        #expect(phone.state == laptop.state)
        #expect(state(of: shared + [reopen, complete]) == state(of: shared + [complete, reopen]))
    }

    @Test func aCompletionWinsOverAReopenOfAnOpenTask() {
        var (phone, laptop, _) = Self.twoDevices()
        let complete = phone.complete()
        let reopen = laptop.edit { state, replica in
            .reopened(.init(op: state.lifecycle.done.reopen(replica: replica)))
        }
        phone.receive([reopen])
        laptop.receive([complete])
        #expect(phone.state.isDone && laptop.state.isDone)
    }

    @Test func aReopenThatSawTheCompletionReopens() {
        var (phone, laptop, _) = Self.twoDevices()
        let complete = phone.complete()
        laptop.receive([complete])
        let reopen = laptop.reopen()
        phone.receive([reopen])
        #expect(!phone.state.isDone && !laptop.state.isDone)
        #expect(phone.state.lifecycle.isOpen)
    }

    @Test func concurrentTitlesAreKeptAndTheNewestIsShownUntilARetitleReplacesThem() {
        var (phone, laptop, shared) = Self.twoDevices()
        let oat = phone.retitle("Oat milk")
        laptop.clock += 50  // the laptop's edit is the later one
        let whole = laptop.retitle("Whole milk")
        phone.receive([whole])
        laptop.receive([oat])
        for device in [phone, laptop] {
            #expect(device.state.hasTitleConflict)
            #expect(device.state.titles == ["Whole milk", "Oat milk"], "both kept, the highest HLC first")
            #expect(device.state.shownTitle == "Whole milk")
            #expect(device.state.columns.conflict && device.state.columns.titles == ["Whole milk", "Oat milk"])
        }
        #expect(state(of: shared + [oat, whole]) == state(of: shared + [whole, oat]))
        #expect(state(of: shared + [oat, whole]).titles == phone.state.titles)

        // A retitle that saw both replaces both.
        let settled = phone.retitle("Milk")
        laptop.receive([settled])
        for device in [phone, laptop] {
            #expect(!device.state.hasTitleConflict)
            #expect(device.state.shownTitle == "Milk")
            #expect(device.state.columns.titles.isEmpty)
            #expect(device.state.titleStamps.count == 1, "overwritten titles leave with their stamps")
        }
    }

    @Test func aConcurrentTagAddSurvivesARemove() {
        var (phone, laptop, shared) = Self.twoDevices { phone in [phone.tag("shopping")] }
        let remove = laptop.untag("shopping")
        let add = phone.tag("shopping")
        let other = phone.tag("dairy")
        phone.receive([remove])
        laptop.receive([add, other])
        #expect(phone.state.tags.elements == ["shopping", "dairy"])
        #expect(laptop.state.tags.elements == ["shopping", "dairy"])
        #expect(state(of: shared + [remove, add, other]) == state(of: shared + [other, add, remove]))

        // A remove that saw every add removes the tag.
        let gone = laptop.untag("shopping")
        phone.receive([gone])
        #expect(phone.state.tags.elements == ["dairy"] && laptop.state.tags.elements == ["dairy"])
    }

    @Test func subtasksConvergeWhateverOrderTheirEditsArriveIn() {
        var random = SplitMix64(seed: 7)
        var devices = [Device(1), Device(2), Device(3)]
        var log = [devices[0].create("Move house")]
        for index in 1..<3 { devices[index].receive(log) }
        // Rounds of concurrent edits: each device edits offline, then every device receives the others' edits.
        for round in 0..<6 {
            var made: [[Delivery]] = [[], [], []]
            for index in 0..<3 {
                for step in 0..<random.int(1...3) {
                    let count = devices[index].state.subtasks.count
                    if count > 0, random.int(below: 4) == 0 {
                        made[index].append(devices[index].removeSubtask(at: random.int(below: count)))
                    } else {
                        let id = UUID(uuid: randomUUID(&random)).uuidString.lowercased()
                        made[index].append(
                            devices[index].addSubtask(id, "r\(round) d\(index) s\(step)", at: random.int(0...count)))
                    }
                }
            }
            for index in 0..<3 {
                devices[index].receive((0..<3).filter { $0 != index }.flatMap { made[$0] })
            }
            log += made.flatMap { $0 }
        }
        #expect(devices[0].state == devices[1].state && devices[1].state == devices[2].state)
        let expected = devices[0].state.subtaskList
        #expect(!expected.isEmpty)
        // The whole history in shuffled orders gives the same list.
        for _ in 0..<5 {
            var shuffled = log
            shuffled.shuffle(using: &random)
            // An operation that arrives before the one it refers to waits inside the sequence until it comes.
            #expect(state(of: shuffled).subtaskList == expected)
        }
    }

    @Test func applyingAnEventTwiceChangesNothing() {
        var (phone, laptop, shared) = Self.twoDevices { phone in
            [phone.tag("a"), phone.complete(), phone.addSubtask(UUID().uuidString.lowercased(), "one", at: 0)]
        }
        let edits = [phone.retitle("B"), laptop.retitle("C"), phone.reopen(), laptop.untag("a")]
        let once = state(of: shared + edits)
        #expect(state(of: shared + edits + shared + edits) == once)
        #expect(state(of: (shared + edits).flatMap { [$0, $0] }) == once)
    }

    @Test func theStoredFormReadsBackEqual() throws {
        var (phone, laptop, _) = Self.twoDevices { phone in
            [
                phone.tag("a"), phone.tag("b"), phone.complete(),
                phone.addSubtask(UUID().uuidString.lowercased(), "x", at: 0),
            ]
        }
        let concurrent = [phone.retitle("B"), laptop.retitle("C"), laptop.untag("a")]
        phone.receive(Array(concurrent.suffix(2)))
        let decoded = try TaskState(stored: phone.state.encoded())
        #expect(decoded == phone.state)
        #expect(decoded.columns == phone.state.columns)
        #expect(decoded.titles == phone.state.titles)
        #expect(String(decoding: TaskState().encoded(), as: UTF8.self).hasPrefix("{"), "canonical JSON")
        #expect(throws: (any Error).self) { try TaskState(stored: Data("{\"version\":99}".utf8)) }
    }

    @Test func aDeleteBeatsConcurrentEdits() {
        var (phone, laptop, _) = Self.twoDevices()
        let delete = phone.edit { _, _ in .deleted(.init()) }
        let edit = laptop.retitle("Still here?")
        phone.receive([edit])
        laptop.receive([delete])
        #expect(phone.state.lifecycle.deleted && laptop.state.lifecycle.deleted)
        #expect(!laptop.state.lifecycle.isOpen)
    }
}

/// A random UUID from `random` (version 4 bits set), so seeded runs repeat.
func randomUUID(_ random: inout SplitMix64) -> uuid_t {
    var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
    bytes[6] = bytes[6] & 0x0F | 0x40
    bytes[8] = bytes[8] & 0x3F | 0x80
    return (
        bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
        bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
    )
}
