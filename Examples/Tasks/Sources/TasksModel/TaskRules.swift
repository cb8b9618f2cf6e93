import Foundation
import SyncCRDT
import SyncModels

/// The rules any replica can check alone, on one event: what a payload may hold (a file's element reads as
/// a `TaskFile`) and that its operation says what the event type says. Clients check them before they write (`TasksValidator`) and the server
/// checks them again (`OpenTaskLimitRule`), so a client of another build or another author cannot put an
/// event into the lists that every other replica would have to ignore.
///
/// The open-task limit is not here: no device can check it, since only the server sees every device's
/// tasks.
public enum TaskRules {
    /// Longest title of a task or a subtask, in characters.
    public static let maxTitleLength = 200
    /// Longest tag, in characters.
    public static let maxTagLength = 32

    /// Why the event breaks the rules, or nil when it follows them (and for types of other domains).
    public static func violation(type: String, stream: String, payload: JSONValue) -> String? {
        guard type.hasPrefix(TaskEventType.prefix) else { return nil }
        guard let kind = TaskEventType(rawValue: type) else { return "\(type) is not a task event type" }
        guard TaskID(stream)?.stream == stream else {
            return "\(type) must be on a stream named task:<uuid>, the UUID in lowercase"
        }
        let decoded: TaskPayload
        do {
            decoded = try TaskPayload(type: kind, json: payload)
        } catch {
            return error.description
        }
        return violation(decoded)
    }

    /// Why the payload breaks the rules, or nil.
    public static func violation(_ payload: TaskPayload) -> String? {
        switch payload {
        case .created(let created): return titleViolation(created.op.value, of: "a task")
        case .titled(let titled): return titleViolation(titled.op.value, of: "a task")
        case .completed(let completed):
            return completed.op.element == CompletionFlag.mark && completed.op.isAdd
                ? nil : "a task.completed operation adds \(CompletionFlag.mark)"
        case .reopened(let reopened):
            return reopened.op.element == CompletionFlag.mark && !reopened.op.isAdd
                ? nil : "a task.reopened operation removes \(CompletionFlag.mark)"
        case .tagged(let tagged):
            if let violation = tagViolation(tagged.tag) { return violation }
            return tagged.op.element == tagged.tag && tagged.op.isAdd ? nil : "a task.tagged operation adds its tag"
        case .untagged(let untagged):
            if let violation = tagViolation(untagged.tag) { return violation }
            return untagged.op.element == untagged.tag && !untagged.op.isAdd
                ? nil : "a task.untagged operation removes its tag"
        case .subtaskAdded(let added):
            if let violation = subtaskIDViolation(added.subtask) { return violation }
            if let violation = titleViolation(added.title, of: "a subtask") { return violation }
            guard case .insert(let insertion) = added.op, insertion.elements == [added.subtask] else {
                return "a task.subtask.added operation inserts its subtask's id alone"
            }
            return nil
        case .subtaskRemoved(let removed):
            if let violation = subtaskIDViolation(removed.subtask) { return violation }
            guard case .delete = removed.op else { return "a task.subtask.removed operation is a deletion" }
            return nil
        case .fileAttached(let attached):
            if let violation = fileViolation(attached.file) { return violation }
            return attached.op.element == attached.file && attached.op.isAdd
                ? nil : "a task.fileAttached operation adds its file"
        case .fileDetached(let detached):
            if let violation = fileViolation(detached.file) { return violation }
            return detached.op.element == detached.file && !detached.op.isAdd
                ? nil : "a task.fileDetached operation removes its file"
        case .deleted:
            return nil
        }
    }

    /// The message a creation or reopen past the server's limit is rejected with, which clients show.
    public static func openLimitMessage(limit: Int) -> String {
        "the list already has \(limit) open tasks, the most it may have: complete or delete one first"
    }

    static func titleViolation(_ title: String, of what: String) -> String? {
        let length = title.count
        guard length >= 1, length <= maxTitleLength else {
            return "the title of \(what) is 1-\(maxTitleLength) characters"
        }
        return nil
    }

    static func tagViolation(_ tag: String) -> String? {
        guard (1...maxTagLength).contains(tag.count), !tag.contains(where: \.isWhitespace) else {
            return "a tag is 1-\(maxTagLength) characters without spaces"
        }
        return nil
    }

    /// A file's element must read as a `TaskFile` (and so write back the same string): a blob reference
    /// every replica and the server can read, and a name.
    static func fileViolation(_ element: String) -> String? {
        guard TaskFile(element: element) != nil else {
            return "a file is \"<hash> <size> <type> <name>\": a lowercase SHA-256, a size, a media type, a name"
        }
        return nil
    }

    static func subtaskIDViolation(_ id: String) -> String? {
        guard id.utf8.count == 36, UUID(uuidString: id) != nil, id == id.lowercased() else {
            return "a subtask id is a lowercase UUID"
        }
        return nil
    }
}
