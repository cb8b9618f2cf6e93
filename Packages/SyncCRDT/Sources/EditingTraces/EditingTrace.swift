import Foundation
import SyncCompression
import SyncModels

/// One edit of a trace: delete `deleteCount` scalars at `position`, then insert `insert` there.
public struct TracePatch: Sendable, Decodable {
    public var position: Int
    public var deleteCount: Int
    public var insert: String

    public init(position: Int, deleteCount: Int, insert: String) {
        self.position = position
        self.deleteCount = deleteCount
        self.insert = insert
    }

    public init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        position = try container.decode(Int.self)
        deleteCount = try container.decode(Int.self)
        insert = try container.decode(String.self)
    }
}

/// A sequential editing trace: one author, one transaction after another.
public struct SequentialTrace: Sendable, Decodable {
    public struct Transaction: Sendable, Decodable {
        public var patches: [TracePatch]
    }

    public var startContent: String
    public var endContent: String
    public var txns: [Transaction]

    /// The number of patches.
    public var patchCount: Int { txns.reduce(0) { $0 + $1.patches.count } }
}

/// A history of several agents editing concurrently: each transaction applies to the document as of its
/// parents. Both the concurrent trace format and the conformance format load into it.
public struct ConcurrentHistory: Sendable {
    public struct Transaction: Sendable {
        /// Indices of the parent transactions (earlier in the list).
        public var parents: [Int]
        /// Index into `agents`.
        public var agent: Int
        /// The counter of the transaction's first edit (one per inserted or deleted scalar, from 1).
        public var firstCounter: UInt64
        public var patches: [TracePatch]
    }

    /// Agent names; their replica ids order as the names do.
    public var agents: [String]
    public var transactions: [Transaction]
    public var endContent: String

    /// The replica id standing for each agent: its name's bytes, so that replica order is name order.
    public var replicaIDs: [ReplicaID] { agents.map(Self.replicaID(forAgent:)) }

    /// A replica id whose order among others equals the order of the agent names (names up to 16 bytes).
    public static func replicaID(forAgent name: String) -> ReplicaID {
        var bytes = Array(name.utf8.prefix(16))
        bytes += [UInt8](repeating: 0, count: 16 - bytes.count)
        let high = bytes[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let low = bytes[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return ReplicaID(high: high, low: low)
    }

    /// The number of patches.
    public var patchCount: Int { transactions.reduce(0) { $0 + $1.patches.count } }
}

/// Loading the trace files.
public enum EditingTraces {
    /// `Packages/SyncCRDT/Data/editing-traces` in the repository (with its licence in the folder's README),
    /// found from this source file's path.
    public static var directory: URL {
        var url = URL(fileURLWithPath: #filePath)
        // .../Packages/SyncCRDT/Sources/EditingTraces/EditingTrace.swift -> Packages/SyncCRDT
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.appendingPathComponent("Data/editing-traces")
    }

    /// The sequential trace files.
    public static var sequentialFiles: [URL] {
        let folder = directory.appendingPathComponent("sequential")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { $0.hasSuffix(".json.gz") }.sorted().map { folder.appendingPathComponent($0) }
    }

    /// The bytes of `url`, gunzipped when it ends in `.gz`.
    public static func data(at url: URL) throws -> Data {
        let raw = try Data(contentsOf: url)
        return url.pathExtension == "gz" ? try Gzip.decompress(raw) : raw
    }

    public static func sequential(at url: URL) throws -> SequentialTrace {
        try JSONDecoder().decode(SequentialTrace.self, from: data(at: url))
    }

    private struct ConcurrentFile: Decodable {
        struct Transaction: Decodable {
            var parents: [Int]
            var agent: Int
            var patches: [TracePatch]
        }
        var endContent: String
        var numAgents: Int
        var txns: [Transaction]
    }

    /// A concurrent trace (`concurrent/*.json.gz`): agents are numbered; counters follow each agent's edits.
    public static func concurrent(at url: URL) throws -> ConcurrentHistory {
        let file = try JSONDecoder().decode(ConcurrentFile.self, from: data(at: url))
        var next = [UInt64](repeating: 1, count: file.numAgents)
        var transactions: [ConcurrentHistory.Transaction] = []
        transactions.reserveCapacity(file.txns.count)
        for txn in file.txns {
            transactions.append(
                ConcurrentHistory.Transaction(
                    parents: txn.parents, agent: txn.agent, firstCounter: next[txn.agent], patches: txn.patches))
            next[txn.agent] += UInt64(txn.patches.reduce(0) { $0 + $1.deleteCount + $1.insert.unicodeScalars.count })
        }
        // Agent names "0", "1", ... order as their numbers for fewer than ten agents.
        return ConcurrentHistory(
            agents: (0..<file.numAgents).map { String($0) }, transactions: transactions, endContent: file.endContent)
    }

    private struct ConformanceCase: Decodable {
        struct Transaction: Decodable {
            var span: [Int]
            var parents: [Int]
            var agent: String
            var seqStart: UInt64
            var ops: [TracePatch]
        }
        var txns: [Transaction]
        var endContent: String
    }

    /// The conformance cases (`conformance/conformance.json.gz`); parents (local versions) become transaction
    /// indices.
    public static func conformance(at url: URL) throws -> [ConcurrentHistory] {
        let cases = try JSONDecoder().decode([ConformanceCase].self, from: data(at: url))
        return cases.map { item in
            var agents: [String] = []
            var txnByLastVersion: [Int: Int] = [:]
            var transactions: [ConcurrentHistory.Transaction] = []
            for (index, txn) in item.txns.enumerated() {
                txnByLastVersion[txn.span[1] - 1] = index
                if !agents.contains(txn.agent) { agents.append(txn.agent) }
            }
            let sortedAgents = agents.sorted()
            for txn in item.txns {
                transactions.append(
                    ConcurrentHistory.Transaction(
                        parents: txn.parents.map { txnByLastVersion[$0]! },
                        agent: sortedAgents.firstIndex(of: txn.agent)!,
                        firstCounter: txn.seqStart + 1, patches: txn.ops))
            }
            return ConcurrentHistory(agents: sortedAgents, transactions: transactions, endContent: item.endContent)
        }
    }
}
