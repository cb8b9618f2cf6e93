import Foundation
import SyncCRDT
import SyncModels
import SyncTestSupport
import TasksModel
import TasksServer
import Testing

/// A task's files: the element form of `TaskFile`, the add-wins merge of attaches and detaches on in-memory
/// replicas, the stored form of a task from before files, the rules, and which blob the server reads from an
/// event.
@Suite struct TaskFileTests {
    static func blob(_ byte: String, size: Int64 = 1_234, type: String = "application/pdf") -> BlobReference {
        BlobReference(hash: try! BlobHash(String(repeating: byte, count: 32)), size: size, type: type)
    }

    static let receipt = TaskFile(name: "receipt march.pdf", blob: blob("ab"))
    static let photo = TaskFile(name: "fridge.png", blob: blob("cd", size: 0, type: "image/png"))

    @Test func anElementReadsBackAsTheFileItWasWrittenFrom() throws {
        let element = Self.receipt.element
        #expect(element == String(repeating: "ab", count: 32) + " 1234 application/pdf receipt march.pdf")
        #expect(TaskFile(element: element) == Self.receipt, "the name keeps its spaces")
        #expect(TaskFile(element: Self.photo.element) == Self.photo)
        #expect(TaskFile(element: Self.photo.element)?.element == Self.photo.element)
        #expect([Self.receipt, Self.photo].sorted() == [Self.photo, Self.receipt], "by name")

        let hash = String(repeating: "ab", count: 32)
        let malformed = [
            "", "\(hash) 1234 application/pdf", "\(hash.dropLast()) 1 text/plain a",
            "\(hash.uppercased()) 1 text/plain a",
            "\(hash) -1 text/plain a", "\(hash) +1 text/plain a", "\(hash) 01 text/plain a", "\(hash) x text/plain a",
            "\(hash) 1 plain a", "\(hash) 1 text/plain ", "\(hash) 1 text/plain a\u{7}b",
            "\(hash) 1 text/plain " + String(repeating: "x", count: 256),
        ]
        for element in malformed {
            #expect(TaskFile(element: element) == nil, "\(element.debugDescription) is not a file")
        }
        #expect(TaskFile.isValidName(String(repeating: "x", count: 255)) && !TaskFile.isValidName(""))
    }

    @Test func aConcurrentAttachSurvivesADetach() {
        var (phone, laptop, shared) = TaskStateTests.twoDevices { phone in [phone.attach(Self.receipt)] }
        #expect(laptop.state.fileList == [Self.receipt])
        let detach = laptop.detach(Self.receipt.name)
        let again = phone.attach(Self.receipt)
        let other = phone.attach(Self.photo)
        #expect(laptop.state.fileList.isEmpty)
        phone.receive(detach)
        laptop.receive([again, other])
        #expect(phone.state.fileList == [Self.photo, Self.receipt], "the attach the detach did not see wins")
        #expect(phone.state == laptop.state)
        #expect(state(of: shared + detach + [again, other]) == state(of: shared + [other, again] + detach))

        // A detach that saw every attach removes the file everywhere.
        let gone = phone.detach(Self.receipt.name)
        laptop.receive(gone)
        #expect(phone.state.fileList == [Self.photo] && laptop.state.fileList == [Self.photo])
        #expect(phone.state == laptop.state)
    }

    @Test func twoFilesAttachedUnderOneNameAreBothKeptUntilADetachThatSawBoth() {
        var (phone, laptop, shared) = TaskStateTests.twoDevices()
        let mine = phone.attach(Self.receipt)
        let theirs = laptop.attach(TaskFile(name: Self.receipt.name, blob: Self.blob("ef")))
        phone.receive([theirs])
        laptop.receive([mine])
        #expect(phone.state.fileList.map(\.name) == [Self.receipt.name, Self.receipt.name])
        #expect(phone.state == laptop.state)
        #expect(state(of: shared + [mine, theirs]) == state(of: shared + [theirs, mine]))

        let detach = laptop.detach(Self.receipt.name)
        #expect(detach.count == 2, "one detach per file of the name")
        phone.receive(detach)
        #expect(phone.state.fileList.isEmpty && laptop.state.fileList.isEmpty)
        // Applying everything again, or twice, changes nothing.
        #expect(state(of: shared + [mine, theirs] + detach + [mine, theirs]) == phone.state)
    }

    /// The stored form of a task from before files (this build's bytes of a task without files, which no
    /// longer change): it decodes, with no files, and is written back byte for byte.
    @Test func aTaskStoredBeforeFilesStillDecodes() throws {
        let before = Data(Self.storedBeforeFiles.utf8)
        let (milk, _, _) = TaskStateTests.twoDevices { phone in [phone.tag("dairy")] }
        #expect(milk.state.encoded() == before, "this build writes the same bytes for the same task")
        let decoded = try TaskState(stored: before)
        #expect(decoded.shownTitle == "Milk" && decoded.tags.elements == ["dairy"])
        #expect(decoded.files == AddWinsSet() && decoded.fileList.isEmpty)
        #expect(decoded.encoded() == before, "a task without files is written as before")

        // A task that had a file keeps the set, even once the file is detached: its context says which
        // attaches the detach saw, so a late copy of one does not bring the file back.
        var (phone, _, _) = TaskStateTests.twoDevices()
        let attach = phone.attach(Self.receipt)
        _ = phone.detach(Self.receipt.name)
        let stored = try JSONValue(parsing: phone.state.encoded())
        guard case .object(let fields) = stored else { Issue.record("not an object"); return }
        #expect(fields["files"] != nil)
        var reread = try TaskState(stored: phone.state.encoded())
        #expect(reread == phone.state)
        reread.apply(attach.payload, hlc: attach.hlc)
        #expect(reread.fileList.isEmpty)
    }

    /// `TaskState.encoded()` of a task created as "Milk" by replica 1 and tagged "dairy", as written before
    /// tasks had files.
    static let storedBeforeFiles = """
        {"lifecycle":{"created":true,"deleted":false,"done":{"compactedVersion":{"counters":{},"version":1},"con\
        text":{"dotCloud":[],"version":1,"versionVector":{"counters":{},"version":1}},"entries":[],"removeWins":\
        false,"version":1}},"subtaskTitles":{},"subtasks":{"compactedVersion":{"counters":{},"version":1},"opera\
        tions":[],"seen":{"dotCloud":[],"version":1,"versionVector":{"counters":{},"version":1}},"version":1},"t\
        ags":{"compactedVersion":{"counters":{},"version":1},"context":{"dotCloud":[],"version":1,"versionVector\
        ":{"counters":{"00000000000000010000000000000001":1},"version":1}},"entries":[{"element":"dairy","tokens\
        ":[{"dot":{"counter":1,"replica":"00000000000000010000000000000001"},"isAdd":true}]}],"removeWins":false\
        ,"version":1},"title":{"context":{"dotCloud":[],"version":1,"versionVector":{"counters":{"00000000000000\
        010000000000000001":1},"version":1}},"entries":[{"dot":{"counter":1,"replica":"0000000000000001000000000\
        0000001"},"value":"Milk"}],"version":1},"titleStamps":[{"dot":{"counter":1,"replica":"000000000000000100\
        00000000000001"},"hlc":"00000000000003e9:0000:0000000000000001"}],"version":1}
        """

    @Test func theRulesRefuseAMalformedFileAndAnOperationThatSaysOtherwise() {
        var device = Device(1)
        let id = TaskID()
        _ = device.create("Milk")
        let attach = device.attach(Self.receipt)
        #expect(TaskRules.violation(type: "task.fileAttached", stream: id.stream, payload: attach.payload.json) == nil)
        let detach = device.detach(Self.receipt.name)
        #expect(TaskRules.violation(detach[0].payload) == nil)

        let broken = Self.receipt.element.replacingOccurrences(of: "application/pdf", with: "pdf")
        let malformed = device.edit { state, replica in
            .fileAttached(.init(file: broken, op: state.files.add(broken, replica: replica)))
        }
        #expect(TaskRules.violation(malformed.payload)?.contains("a file is") == true)
        let mismatched = device.edit { state, replica in
            .fileAttached(.init(file: Self.receipt.element, op: state.files.add(Self.photo.element, replica: replica)))
        }
        #expect(TaskRules.violation(mismatched.payload) != nil)
        // A detach's operation under an attach's type, and the reverse.
        #expect(
            TaskRules.violation(type: "task.fileAttached", stream: id.stream, payload: detach[0].payload.json) != nil)
        #expect(TaskRules.violation(type: "task.fileDetached", stream: id.stream, payload: attach.payload.json) != nil)
        #expect(TaskRules.violation(type: "task.fileAttached", stream: id.stream, payload: .object([:])) != nil)
    }

    @Test func theServerReadsTheBlobOfAnAttachAndOfNothingElse() {
        var device = Device(1)
        let id = TaskID()
        let created = device.create("Milk")
        let attach = device.attach(Self.receipt)
        let detach = device.detach(Self.receipt.name)[0]
        func event(_ delivery: Delivery) -> Event {
            EventFixtures.event(
                scope: "groceries", stream: id.stream, type: delivery.payload.type.rawValue,
                payload: delivery.payload.json)
        }
        let domain = TasksServerDomain()
        #expect(domain.blobReferences(in: event(attach)) == [Self.receipt.blob])
        #expect(domain.blobReferences(in: event(detach)).isEmpty)
        #expect(domain.blobReferences(in: event(created)).isEmpty)
        #expect(domain.folder == nil, "no snapshots: only attaches refer to blobs")
        var broken = event(attach)
        broken.payload = .object(["file": .string("nonsense"), "op": .null])
        #expect(domain.blobReferences(in: broken).isEmpty)
    }
}
