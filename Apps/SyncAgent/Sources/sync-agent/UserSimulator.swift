import Foundation
import NotesDomain
import NotesStore
import SyncModels

/// Edits like a user: in bursts of 20 seconds at `ratePerSecond`, then 10 quiet seconds (in which replicas
/// catch up and converge); creates notes, retitles, types into bodies, tags, pins, adds checklist items.
struct UserSimulator {
    let client: NotesClient
    let scope: Scope

    func run(ratePerSecond: Double) async throws {
        var random = SystemRandomNumberGenerator()
        var notes: [NoteID] = []
        let words = ["milk", "plan", "call", "draft", "trip", "fix", "idea", "read", "buy", "ship"]
        var edits = 0
        let start = ContinuousClock.now
        while !Task.isCancelled {
            try await Task.sleep(for: .milliseconds(Int(1000 / ratePerSecond)))
            let phase = (ContinuousClock.now - start).components.seconds % 30
            if phase >= 20 {
                try await Task.sleep(for: .seconds(30 - phase))
                continue
            }
            edits += 1
            let word = words.randomElement(using: &random)!
            if notes.isEmpty || Int.random(in: 0..<10, using: &random) == 0 {
                notes.append(try await client.create(scope: scope, title: "\(word) \(edits)", tags: [word]))
                continue
            }
            let note = notes.randomElement(using: &random)!
            guard let current = try await client.note(note), !current.deleted else { continue }
            switch Int.random(in: 0..<6, using: &random) {
            case 0: try await client.setTitle(note, "\(word) \(edits)")
            case 1: try await client.setBody(note, current.body + " \(word)")
            case 2: try await client.addTag(note, word)
            case 3: try await client.setPinned(note, !current.pinned)
            case 4: try await client.addChecklistItem(note, text: word, after: current.checklist.last?.id)
            default: try await client.view(note)
            }
        }
    }
}
