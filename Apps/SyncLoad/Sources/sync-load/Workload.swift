import Foundation
import NotesDomain
import NotesStore
import SyncEngine
import SyncModels
import SyncToolSupport

/// The edits a device makes, with their relative weights (`--weights create=5,title=10,…`).
struct WorkloadWeights: Codable, Sendable, Hashable {
    enum Action: String, CaseIterable, Codable, Sendable {
        case create, title, body, tag, untag, checklist, check, view, pin, delete, attach
    }

    var weights: [Action: Int]

    static let standard = WorkloadWeights(weights: [
        .create: 6, .title: 8, .body: 30, .tag: 8, .untag: 4, .checklist: 10, .check: 8, .view: 16, .pin: 6,
        .delete: 4, .attach: 2,
    ])

    /// Parses `name=weight,…`; actions left out weigh 0.
    init(parsing text: String) throws {
        var weights: [Action: Int] = [:]
        for part in text.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, let action = Action(rawValue: pair[0]), let weight = Int(pair[1]), weight >= 0
            else {
                throw LoadError(
                    "--weights: \"\(part)\" is not ACTION=WEIGHT with ACTION one of "
                        + Action.allCases.map(\.rawValue).joined(separator: ", "))
            }
            weights[action] = weight
        }
        guard weights.values.reduce(0, +) > 0 else { throw LoadError("--weights: every weight is 0") }
        self.weights = weights
    }

    init(weights: [Action: Int]) { self.weights = weights }

    var description: String {
        Action.allCases.compactMap { action in weights[action].map { "\(action.rawValue)=\($0)" } }
            .joined(separator: ",")
    }

    func pick(using random: inout SplitMix64) -> Action {
        let total = weights.values.reduce(0, +)
        var draw = random.int(below: total)
        for action in Action.allCases {
            let weight = weights[action] ?? 0
            if draw < weight { return action }
            draw -= weight
        }
        return .view
    }
}

/// A person using the Notes app on one device: picks an action by weight, and types into bodies in bursts
/// of keystrokes (each a separate edit, 80–200 ms apart, as an editor saves them).
struct NotesUser {
    let scope: Scope
    let weights: WorkloadWeights
    var random: SplitMix64
    /// Live notes of the scope as this device last read them.
    private var known: [NoteID] = []
    private var sinceRefresh = Int.max

    static let words = [
        "milk", "plan", "call", "draft", "trip", "fix", "idea", "read", "buy", "ship", "meet", "note", "todo",
        "book", "code", "walk",
    ]

    init(scope: Scope, weights: WorkloadWeights, random: SplitMix64) {
        self.scope = scope
        self.weights = weights
        self.random = random
    }

    /// Performs one action; returns the edits it made (a typing burst makes several). `edited` is called
    /// after each, `pause` between keystrokes.
    mutating func act(
        on client: NotesClient, edited: () -> Void, pause: (Duration) async throws -> Void
    ) async throws {
        if sinceRefresh >= 20 {
            known = try await client.store.database.read { [scope] db in
                try String.fetchAll(
                    db, sql: "SELECT id FROM notes WHERE scope = ? AND created = 1 AND deleted = 0 LIMIT 200",
                    arguments: [scope.name]
                ).compactMap(NoteID.init)
            }
            sinceRefresh = 0
        }
        sinceRefresh += 1
        var action = weights.pick(using: &random)
        if known.isEmpty { action = .create }
        let word = random.pick(Self.words)
        if action == .create {
            let id = try await client.create(
                scope: scope, title: "\(word) \(random.int(below: 1000))", tags: [random.pick(NoteEditor.tags)])
            known.append(id)
            edited()
            return
        }
        let id = random.pick(known)
        guard let note = try await client.note(id), !note.deleted else {
            known.removeAll { $0 == id }
            return
        }
        switch action {
        case .create: break
        case .title: try await client.setTitle(id, "\(word) \(random.int(below: 1000))")
        case .body:
            // A burst: a word typed a key at a time at the end of the body, or a few characters deleted.
            var body = note.body
            if body.count > 400 || (body.count > 20 && random.chance(0.2)) {
                body.removeLast(min(body.count, random.int(1...8)))
                try await client.setBody(id, body)
            } else {
                for character in " \(word)" {
                    body.append(character)
                    try await client.setBody(id, body)
                    edited()
                    try await pause(.milliseconds(random.int(80...200)))
                }
                return
            }
        case .tag: try await client.addTag(id, random.pick(NoteEditor.tags))
        case .untag:
            guard let tag = note.tags.first else { return }
            try await client.removeTag(id, tag)
        case .checklist:
            if note.checklist.count >= 12, let item = note.checklist.first {
                try await client.removeChecklistItem(id, item: item.id)
            } else {
                try await client.addChecklistItem(id, text: word, after: note.checklist.last?.id)
            }
        case .check:
            guard let item = note.checklist.isEmpty ? nil : random.pick(note.checklist) else { return }
            try await client.setChecklistItemDone(id, item: item.id, done: !item.done)
        case .view: try await client.view(id)
        case .pin: try await client.setPinned(id, !note.pinned)
        case .delete:
            try await client.delete(id)
            known.removeAll { $0 == id }
        case .attach:
            let bytes = attachmentBytes()
            let blob = try await LocalBlobs(store: client.store).add(data: bytes, type: "application/octet-stream")
            try await client.attach(id, name: "\(word)-\(random.int(below: 10_000)).bin", blob: blob)
        }
        edited()
    }

    /// An attachment's bytes: mostly small files (1–64 KiB), one in fifty of 1–2 MiB; random, so neither
    /// compresses nor repeats another device's.
    mutating func attachmentBytes() -> Data {
        let size = random.chance(0.02) ? random.int((1 << 20)...(2 << 20)) : random.int(1024...(64 << 10))
        var data = Data(count: size)
        data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) in
            var index = 0
            while index < size {
                var word = random.next()
                withUnsafeBytes(of: &word) { word in
                    for offset in 0..<min(8, size - index) { buffer[index + offset] = word[offset] }
                }
                index += 8
            }
        }
        return data
    }
}

/// A user-facing error of sync-load (bad options, an unreachable server).
struct LoadError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
