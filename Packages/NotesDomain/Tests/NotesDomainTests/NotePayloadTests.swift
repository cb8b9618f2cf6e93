import Foundation
import NotesDomain
import SyncCRDT
import SyncEventStoreTestSupport
import SyncModels
import SyncTestSupport
import Testing

/// The typed payloads of note events: the exact JSON clients write (golden), decoding back, the rules, and
/// the in-place reader agreeing with `Codable` everywhere.
@Suite(.onOwnThreads) struct NotePayloadTests {
    static let replica = ReplicaID(high: 0x0123_4567_89ab_cdef, low: 0x0fed_cba9_8765_4321)
    static let item = "018f4e3a-0000-7000-8000-000000000001"

    /// One payload of every type, made from one note's CRDTs as the client makes them, and the canonical
    /// JSON the client wrote for it before the payloads were typed.
    static func goldenSamples() -> [(NotePayload, String)] {
        var state = NoteState()
        let replica = Self.replica
        let item = Self.item
        let body = state.body.replace(with: "milk", replica: replica)
        let add = state.tags.add("food", replica: replica)
        let remove = state.tags.remove("food", replica: replica)
        let view = state.views.add(1, at: Dot(replica: replica, counter: 1))
        let insert = state.checklist.insertElement(item, at: 0, replica: replica)
        let delete = state.checklist.removeElement(item, replica: replica)!
        let file = NoteAttachment(
            name: "list v2.txt",
            blob: BlobReference(hash: try! BlobHash(String(repeating: "0f", count: 32)), size: 12, type: "text/plain")
        ).element
        let attach = state.attachments.add(file, replica: replica)
        let detach = state.attachments.remove(file, replica: replica)
        let dot1 = #"{"counter":1,"replica":"0123456789abcdef0fedcba987654321"}"#
        let dot2 = #"{"counter":2,"replica":"0123456789abcdef0fedcba987654321"}"#
        return [
            (.created(.init(title: "Groceries \"Sat\"\n é")), #"{"title":"Groceries \"Sat\"\n é"}"#),
            (.titleSet(.init(title: "Groceries")), #"{"title":"Groceries"}"#),
            (
                .titleSet(.init(title: "Groceries", overwrites: [Dot(replica: replica, counter: 1)])),
                #"{"overwrites":[\#(dot1)],"title":"Groceries"}"#
            ),
            (
                .bodyEdited(.init(ops: body)),
                #"{"ops":[{"insert":{"count":4,"elements":"milk","id":\#(dot1)}}]}"#
            ),
            (
                .tagAdded(.init(tag: "food", op: add)),
                #"{"op":{"dot":\#(dot1),"element":"food","isAdd":true,"observed":[],"#
                    + #""observedUpTo":{"counters":{},"version":1}},"tag":"food"}"#
            ),
            (
                .tagRemoved(.init(tag: "food", op: remove)),
                #"{"observed":[\#(dot1)],"op":{"dot":\#(dot2),"element":"food","isAdd":false,"#
                    + #""observed":[\#(dot1)],"observedUpTo":{"counters":{},"version":1}},"tag":"food"}"#
            ),
            (.pinnedSet(.init(pinned: true)), #"{"pinned":true}"#),
            (
                .viewed(.init(count: 1, op: view)),
                #"{"count":1,"op":{"decrements":0,"dot":\#(dot1),"increments":1}}"#
            ),
            (
                .checklistItemAdded(.init(item: item, text: "eggs", op: insert)),
                #"{"item":"\#(item)","op":{"insert":{"count":1,"elements":["\#(item)"],"id":\#(dot1)}},"#
                    + #""text":"eggs"}"#
            ),
            (.checklistItemTextSet(.init(item: item, text: "eggs x12")), #"{"item":"\#(item)","text":"eggs x12"}"#),
            (.checklistItemDoneSet(.init(item: item, done: false)), #"{"done":false,"item":"\#(item)"}"#),
            (
                .checklistItemRemoved(.init(item: item, op: delete)),
                #"{"item":"\#(item)","op":{"delete":{"id":\#(dot2),"targets":"#
                    + #"[{"count":1,"first":1,"replica":"0123456789abcdef0fedcba987654321"}]}}}"#
            ),
            (.deleted(.init()), "{}"),
            (
                .attachmentAdded(.init(attachment: file, op: attach)),
                #"{"attachment":"\#(file)","op":{"dot":\#(dot1),"element":"\#(file)","isAdd":true,"observed":[],"#
                    + #""observedUpTo":{"counters":{},"version":1}}}"#
            ),
            (
                .attachmentRemoved(.init(attachment: file, op: detach)),
                #"{"attachment":"\#(file)","observed":[\#(dot1)],"op":{"dot":\#(dot2),"element":"\#(file)","#
                    + #""isAdd":false,"observed":[\#(dot1)],"observedUpTo":{"counters":{},"version":1}}}"#
            ),
            (
                .snapshot(.init(state: NoteState())),
                #"{"state":"\#(Data(NoteState().binaryEncoded).base64EncodedString())"}"#
            ),
        ]
    }

    @Test func everyTypeWritesTodaysJSONDecodesBackAndPassesTheRules() throws {
        let samples = Self.goldenSamples()
        #expect(Set(samples.map(\.0.type)) == Set(NoteEventType.allCases), "one sample per type")
        let stream = NoteID().stream
        for (payload, golden) in samples {
            let type = payload.type
            #expect(Swift.type(of: payload.payload) == type.payloadType)
            let bytes = payload.json.canonicalData()
            #expect(String(decoding: bytes, as: UTF8.self) == golden, "\(type.rawValue)")
            #expect(try NotePayload(type: type, json: payload.json) == payload, "\(type.rawValue) from JSONValue")
            let read = try bytes.withUnsafeBytes { bytes in
                try Result { () throws(NotePayloadError) in try NotePayload(type: type, jsonBytes: bytes) }.get()
            }
            #expect(read == payload, "\(type.rawValue) from bytes")
            // Snapshots are the server's: devices are refused them whatever they hold.
            let refused = type == .snapshot ? "note.snapshot events are written only by the server's compaction" : nil
            #expect(NoteRules.violation(type: type.rawValue, stream: stream, payload: payload.json) == refused)
            #expect(NoteRules.violation(payload) == refused)
            // The keys a type lists are the keys it writes (its optional ones when it has them).
            guard case .object(let members) = payload.json else {
                Issue.record("\(type.rawValue) is not an object")
                continue
            }
            let written = Set(members.keys.compactMap(NotePayloadKey.init(rawValue:)))
            #expect(written.count == members.count, "\(type.rawValue) writes only its keys")
            #expect(written.isSubset(of: Set(type.payloadType.keys)), "\(type.rawValue)")
            #expect(Set(type.payloadType.requiredKeys).isSubset(of: written), "\(type.rawValue)")
        }
    }

    /// Other keys are ignored: a payload decodes as another type exactly when it has that type's keys.
    @Test func aPayloadDecodesAsAnotherTypeOnlyWithItsKeys() {
        for (payload, _) in Self.goldenSamples() {
            guard case .object(let members) = payload.json else { continue }
            let keys = Set(members.keys.compactMap(NotePayloadKey.init(rawValue:)))
            for other in NoteEventType.allCases {
                let decodes = (try? NotePayload(type: other, json: payload.json)) != nil
                #expect(
                    decodes == Set(other.payloadType.requiredKeys).isSubset(of: keys),
                    "\(payload.type.rawValue) as \(other.rawValue)")
            }
        }
    }

    /// A payload that does not decode names its first missing or malformed field, in the type's order.
    @Test func malformedPayloadsNameTheirField() {
        func field(_ type: NoteEventType, _ json: JSONValue) -> NotePayloadKey?? {
            do {
                _ = try NotePayload(type: type, json: json)
                return .none
            } catch {
                #expect(error.code == "payload.malformed" && error.type == type)
                #expect(!error.message.contains("secret"), "no payload text in the message")
                return .some(error.field)
            }
        }
        #expect(field(.created, [:]) == .some(.title))
        #expect(field(.created, ["title": 3]) == .some(.title))
        #expect(field(.created, ["title": "secret"]) == .none)
        #expect(field(.tagAdded, ["tag": "secret"]) == .some(.op))
        #expect(field(.tagAdded, ["op": 1]) == .some(.tag), "the first in the type's order")
        #expect(field(.tagRemoved, ["tag": "t", "observed": [1]]) == .some(.observed))
        #expect(field(.viewed, ["count": 1.5]) == .some(.count))
        #expect(field(.checklistItemAdded, ["item": "x", "text": "secret", "op": ["insert": [:]]]) == .some(.op))
        #expect(field(.deleted, [1]) == .some(nil), "not an object")
        #expect(field(.deleted, ["anything": "secret"]) == .none)
    }

    /// Rules check fields in the payload's order, a malformed field after the ones that break their rule.
    @Test func rulesReportTheFirstFieldAtFault() {
        let stream = NoteID().stream
        func violation(_ type: NoteEventType, _ payload: JSONValue) -> String? {
            NoteRules.violation(type: type.rawValue, stream: stream, payload: payload)
        }
        let long = JSONValue.string(String(repeating: "x", count: 40))
        #expect(violation(.tagAdded, ["tag": long]) == "tag names are 1-32 characters", "before the missing op")
        #expect(violation(.tagAdded, ["tag": 3]) == "tag is a string")
        #expect(violation(.tagRemoved, ["tag": "t", "op": 1]) == "observed is an array of dots")
        #expect(violation(.tagRemoved, ["tag": "t", "observed": [1]]) == "observed is an array of dots")
        #expect(violation(.viewed, ["count": 0]) == "count is an integer from 1 to 1000000")
        #expect(violation(.viewed, ["count": "1"]) == "count is an integer from 1 to 1000000")
        #expect(violation(.bodyEdited, ["ops": 3]) == "ops is an array")
        #expect(violation(.bodyEdited, [:]) == "ops is an array")
        let tooMany = JSONValue.array(Array(repeating: 1, count: NoteRules.maxBodyOpsPerEvent + 1))
        #expect(violation(.bodyEdited, ["ops": tooMany]) == "at most 10000 body operations per event")
        #expect(violation(.checklistItemAdded, ["item": "x", "text": "t"]) == "item is an id", "before the op")
        let longText = JSONValue.string(String(repeating: "x", count: NoteRules.maxChecklistTextLength + 1))
        #expect(
            violation(.checklistItemAdded, ["item": .string(Self.item), "text": longText])
                == "checklist items are at most 500 characters")
        #expect(violation(.checklistItemAdded, ["item": 1, "text": longText]) == "item is an id", "item comes first")
        #expect(violation(.checklistItemTextSet, ["item": .string(Self.item), "text": 1]) == "text is a string")
        #expect(violation(.checklistItemDoneSet, ["item": .string(Self.item), "done": "yes"]) == "done is a boolean")
        #expect(violation(.pinnedSet, ["pinned": 1]) == "pinned is a boolean")
        #expect(violation(.created, ["title": .string(String(repeating: "x", count: 201))]) != nil)
        #expect(violation(.deleted, [1]) == "a note event's payload is an object")
        let overwritesMessage =
            "overwrites is an array of at most 1000 distinct dots (the titles the writer saw)"
        #expect(violation(.titleSet, ["title": "t", "overwrites": 1]) == overwritesMessage)
        #expect(violation(.titleSet, ["title": "t", "overwrites": [1]]) == overwritesMessage)
        #expect(violation(.titleSet, ["title": 1, "overwrites": [1]]) == "title is a string", "title comes first")
        let dot = NotePayload.titleSet(.init(title: "t", overwrites: [Dot(replica: Self.replica, counter: 1)]))
        #expect(NoteRules.violation(dot) == nil)
        #expect(violation(.titleSet, ["title": "t", "overwrites": []]) == nil)
        let twice = Dot(replica: Self.replica, counter: 3)
        #expect(NoteRules.violation(.titleSet(.init(title: "t", overwrites: [twice, twice]))) == overwritesMessage)
        let zero = Dot(replica: Self.replica, counter: 0)
        #expect(NoteRules.violation(.titleSet(.init(title: "t", overwrites: [zero]))) == overwritesMessage)
        let many = (1...1001).map { Dot(replica: Self.replica, counter: UInt64($0)) }
        #expect(NoteRules.violation(.titleSet(.init(title: "t", overwrites: many))) == overwritesMessage)
    }

    // MARK: - The reader agrees with Codable

    /// Seeded random payloads of every type, made from evolving CRDTs of two replicas (text with escapes,
    /// non-ASCII and control characters).
    static func randomSamples(seed: UInt64, count: Int) -> [NotePayload] {
        var random = SplitMix64(seed: seed)
        var state = NoteState()
        let replicas = [ReplicaID(high: seed, low: 1), ReplicaID(high: seed, low: 2)]
        var items: [String] = []
        var payloads: [NotePayload] = []
        let pieces = ["a", "tag", " ", "\"", "\\", "/", "\n", "\u{1}", "é", "🙂", "✓", "x y"]
        func text(_ random: inout SplitMix64, length: ClosedRange<Int> = 0...12) -> String {
            (0..<Int.random(in: length, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
        }
        for index in 0..<count {
            let replica = replicas[index % 2]
            let kind = NoteEventType.allCases.randomElement(using: &random)!
            let payload: NotePayload
            switch kind {
            case .created: payload = .created(.init(title: text(&random)))
            case .titleSet:
                let overwrites = (0..<Int.random(in: 0...2, using: &random)).map {
                    Dot(replica: replicas[$0], counter: UInt64(index + 1))
                }
                payload = .titleSet(
                    .init(title: text(&random), overwrites: Bool.random(using: &random) ? overwrites : nil))
            case .bodyEdited:
                payload = .bodyEdited(
                    .init(ops: state.body.replace(with: text(&random, length: 0...40), replica: replica)))
            case .tagAdded:
                let tag = text(&random, length: 1...3)
                payload = .tagAdded(.init(tag: tag, op: state.tags.add(tag, replica: replica)))
            case .tagRemoved:
                let tag = state.tags.elements.sorted().randomElement(using: &random) ?? text(&random, length: 1...3)
                payload = .tagRemoved(.init(tag: tag, op: state.tags.remove(tag, replica: replica)))
            case .pinnedSet: payload = .pinnedSet(.init(pinned: Bool.random(using: &random)))
            case .viewed:
                let views = Int.random(in: 1...5, using: &random)
                let dot = Dot(replica: replica, counter: state.views.increments[replica] + 1)
                payload = .viewed(.init(count: views, op: state.views.add(Int64(views), at: dot)))
            case .checklistItemAdded:
                let item = NoteID(uuid: UUID()).description
                let position = Int.random(in: 0...items.count, using: &random)
                items.insert(item, at: position)
                let op = state.checklist.insertElement(item, at: position, replica: replica)
                payload = .checklistItemAdded(.init(item: item, text: text(&random), op: op))
            case .checklistItemRemoved:
                guard !items.isEmpty else { continue }
                let item = items.remove(at: Int.random(in: 0..<items.count, using: &random))
                payload = .checklistItemRemoved(
                    .init(item: item, op: state.checklist.removeElement(item, replica: replica)!))
            case .checklistItemTextSet:
                payload = .checklistItemTextSet(.init(item: items.first ?? Self.item, text: text(&random)))
            case .checklistItemDoneSet:
                payload = .checklistItemDoneSet(.init(item: items.last ?? Self.item, done: Bool.random(using: &random)))
            case .deleted: payload = .deleted(.init())
            case .snapshot: payload = .snapshot(.init(state: state))
            case .attachmentAdded:
                let attachment = NoteAttachment(
                    name: text(&random, length: 1...4),
                    blob: BlobReference(
                        hash: BlobHash(digest: (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }),
                        size: Int64.random(in: 0...1 << 40, using: &random), type: "image/png")
                ).element
                payload = .attachmentAdded(
                    .init(attachment: attachment, op: state.attachments.add(attachment, replica: replica)))
            case .attachmentRemoved:
                let attachment = state.attachments.elements.sorted().randomElement(using: &random) ?? text(&random)
                payload = .attachmentRemoved(
                    .init(attachment: attachment, op: state.attachments.remove(attachment, replica: replica)))
            }
            payloads.append(payload)
        }
        return payloads
    }

    /// The reader gives what `JSONDecoder` gives whenever it does not bail, and `init(jsonBytes:)` always
    /// gives what `JSONDecoder` gives.
    static func agree<P: NoteEventPayload>(_: P.Type, _ text: String) -> (read: P?, decoded: P?) {
        let data = Data(text.utf8)
        let decoded = try? JSONDecoder().decode(P.self, from: data)
        let read: P? = data.withUnsafeBytes { bytes in
            var reader = JSONReader(bytes)
            do throws(JSONReader.Bail) {
                let value = try P(reading: &reader)
                return reader.atEnd() ? value : nil
            } catch {
                return nil
            }
        }
        if let read { #expect(read == decoded, "\(P.type.rawValue): \(text)") }
        let full = data.withUnsafeBytes { bytes in try? P(jsonBytes: bytes) }
        #expect(full == decoded, "\(P.type.rawValue): \(text)")
        return (read, decoded)
    }

    static func agree(_ payload: NotePayload, _ text: String) -> (read: Bool, decoded: Bool) {
        func check<P: NoteEventPayload>(_ type: P.Type) -> (read: Bool, decoded: Bool) {
            let (read, decoded) = agree(type, text)
            return (read != nil, decoded != nil)
        }
        return check(payload.type.payloadType)
    }

    /// Variants of a payload's canonical JSON: spaced out, with an unknown key, each key missing, each value
    /// of another type, a key repeated, integers written as fractions.
    static func variants(of json: JSONValue) -> [String] {
        guard case .object(let members) = json else { return [] }
        let canonical = String(decoding: json.canonicalData(), as: UTF8.self)
        func write(_ members: [String: JSONValue]) -> String {
            String(decoding: JSONValue.object(members).canonicalData(), as: UTF8.self)
        }
        var variants = [
            canonical.replacingOccurrences(of: ",", with: " ,\n\t").replacingOccurrences(of: ":", with: " : "),
            write(members.merging(["unknown": ["nested": [1, 2]]]) { $1 }),
            canonical.replacingOccurrences(of: ":1}", with: ":1.0}"),
            canonical.replacingOccurrences(of: ":1,", with: ":1e0,"),
            canonical + " ",
            canonical + "x",
            "[" + canonical + "]",
        ]
        for key in members.keys {
            var missing = members
            missing[key] = nil
            variants.append(write(missing))
            for other: JSONValue in [.null, 1, -1, "s", true, [], [:], 1e300] {
                var changed = members
                changed[key] = other
                variants.append(write(changed))
            }
            let value = String(decoding: members[key]!.canonicalData(), as: UTF8.self)
            variants.append(String(canonical.dropLast()) + ",\"\(key)\":\(value)}")
        }
        return variants
    }

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func theReaderAndCodableAgreeOnRandomPayloads(seed: UInt64) {
        print("NotePayloadTests seed \(seed)")
        let stream = NoteID().stream
        var typed = NoteState()
        var fromJSON = NoteState()
        var fromBytes = NoteState()
        for (index, payload) in Self.randomSamples(seed: seed, count: 300).enumerated() {
            let canonical = payload.json.canonicalData()
            let result = Self.agree(payload, String(decoding: canonical, as: UTF8.self))
            #expect(result.read && result.decoded, "canonical JSON reads in place")
            for variant in Self.variants(of: payload.json) { _ = Self.agree(payload, variant) }
            #expect(
                NoteRules.violation(type: payload.type.rawValue, stream: stream, payload: payload.json)
                    == NoteRules.violation(payload))
            // The state applies the same payload alike from its value, its JSON value and its bytes.
            let replica = ReplicaID(high: seed, low: UInt64(index % 2 + 1))
            let dot = Dot(replica: replica, counter: UInt64(index + 1))
            let hlc = HLCTimestamp(physical: 1_700_000_000_000 + UInt64(index), counter: 0, node: replica.high)
            typed.apply(payload, hlc: hlc, dot: dot)
            fromJSON.apply(type: payload.type.rawValue, payload: payload.json, hlc: hlc, dot: dot)
            canonical.withUnsafeBytes { fromBytes.apply(payload.type, payloadBytes: $0, hlc: hlc, dot: dot) }
        }
        #expect(typed == fromJSON && typed == fromBytes)
        #expect(typed.created && !typed.tags.context.versionVector.counters.isEmpty)
    }
}
