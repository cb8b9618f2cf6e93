import SyncCRDT
import SyncModels
import TasksModel

/// One event of the tests' in-memory replicas: a payload and the HLC its event would carry.
struct Delivery: Sendable {
    var payload: TaskPayload
    var hlc: HLCTimestamp
}

/// A replica of one task, in memory: what a device's projection does with the task's events, without the
/// store. Each edit is applied here at once and returned for delivery to the others.
struct Device {
    let replica: ReplicaID
    var state = TaskState()
    /// Milliseconds of this replica's clock; every edit moves it on.
    var clock: UInt64

    init(_ high: UInt64, clock: UInt64 = 1_000) {
        replica = ReplicaID(high: high, low: high)
        self.clock = clock
    }

    /// Makes an edit from the current state, applies it, and returns it for the other replicas.
    mutating func edit(_ make: (inout TaskState, ReplicaID) -> TaskPayload) -> Delivery {
        clock += 1
        let payload = make(&state, replica)
        let delivery = Delivery(payload: payload, hlc: HLCTimestamp(physical: clock, counter: 0, node: replica.high))
        state.apply(delivery.payload, hlc: delivery.hlc)
        return delivery
    }

    /// Applies another replica's edits (and moves this clock past them, as an HLC does).
    mutating func receive(_ deliveries: [Delivery]) {
        for delivery in deliveries {
            state.apply(delivery.payload, hlc: delivery.hlc)
            clock = max(clock, delivery.hlc.physical)
        }
    }

    // Edits, as TasksClient makes them.

    mutating func create(_ title: String) -> Delivery {
        edit { state, replica in .created(.init(op: state.title.assign(title, replica: replica))) }
    }

    mutating func retitle(_ title: String) -> Delivery {
        edit { state, replica in .titled(.init(op: state.title.assign(title, replica: replica))) }
    }

    mutating func complete() -> Delivery {
        edit { state, replica in .completed(.init(op: state.lifecycle.done.complete(replica: replica))) }
    }

    mutating func reopen() -> Delivery {
        edit { state, replica in .reopened(.init(op: state.lifecycle.done.reopen(replica: replica))) }
    }

    mutating func tag(_ tag: String) -> Delivery {
        edit { state, replica in .tagged(.init(tag: tag, op: state.tags.add(tag, replica: replica))) }
    }

    mutating func untag(_ tag: String) -> Delivery {
        edit { state, replica in .untagged(.init(tag: tag, op: state.tags.remove(tag, replica: replica))) }
    }

    mutating func addSubtask(_ id: String, _ title: String, at position: Int) -> Delivery {
        edit { state, replica in
            .subtaskAdded(
                .init(subtask: id, title: title, op: state.subtasks.insert(id, at: position, replica: replica)))
        }
    }

    mutating func attach(_ file: TaskFile) -> Delivery {
        edit { state, replica in
            .fileAttached(.init(file: file.element, op: state.files.add(file.element, replica: replica)))
        }
    }

    /// Detaches every file of that name this replica sees, as `TasksClient.detach` does.
    mutating func detach(_ name: String) -> [Delivery] {
        state.fileList.filter { $0.name == name }.map { file in
            edit { state, replica in
                .fileDetached(.init(file: file.element, op: state.files.remove(file.element, replica: replica)))
            }
        }
    }

    mutating func removeSubtask(at position: Int) -> Delivery {
        edit { state, replica in
            let id = state.subtasks.elements[position]
            return .subtaskRemoved(.init(subtask: id, op: state.subtasks.remove(at: position, replica: replica)!))
        }
    }
}

/// The state `deliveries` give a fresh replica, applied in that order.
func state(of deliveries: [Delivery]) -> TaskState {
    var state = TaskState()
    for delivery in deliveries { state.apply(delivery.payload, hlc: delivery.hlc) }
    return state
}
