import ArgumentParser
import EditingTraces
import Foundation
import SyncCRDT

/// `sync-bench trace FILE`: replays a real editing trace into a `FugueText` (release build), checks the result
/// against the trace's `endContent`, and reports operations, milliseconds (median of `--runs`), operations per
/// second, peak memory, the compact encoding's size per operation and next to the final text, and the
/// metadata compaction drops. Exits nonzero when the text differs.
///
/// `--concurrent` takes a concurrent trace: each agent edits its own replica at its transaction's parent
/// version (operations generated once, untimed), and the timed part merges every operation into a fresh
/// replica.
struct TraceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trace",
        abstract: "Replay an editing trace into the text CRDT; report speed, memory and encoded size.")

    @Argument(
        help:
            "A trace file (.json or .json.gz), e.g. Packages/SyncCRDT/Data/editing-traces/sequential/rustcode.json.gz."
    )
    var file: String

    @Flag(help: "The file is a concurrent trace (transactions with parents).")
    var concurrent = false

    @Option(help: "Timed replays; the median is reported.")
    var runs: Int = 5

    struct Result: Codable {
        var trace: String
        var kind: String
        var ops: Int
        var element_ops: Int
        var runs: Int
        var replay_ms_median: Double
        var replay_ms_min: Double
        /// The in-run baseline (sequential traces): the same patches applied to a plain array of scalars.
        var plain_replay_ms: Double?
        var replay_to_plain: Double?
        var ops_per_s: Double
        var generate_ms: Double?
        var peak_rss_bytes: Int
        var rss_before_replay_bytes: Int
        var document_bytes: Int
        var final_utf8_bytes: Int
        var encoded_bytes: Int
        var encoded_bytes_per_op: Double
        var encoded_to_final_text: Double
        var encoded_with_deleted_content_bytes: Int
        var encode_ms: Double
        var decode_ms: Double
        var state_metadata_bytes_before_compaction: Int
        var state_metadata_bytes_after_compaction: Int
        var encoded_bytes_after_compaction: Int
        var tombstones_before_compaction: Int
        var tombstones_after_compaction: Int
        var runs_before_compaction: Int
        var runs_after_compaction: Int
        var history_entries_before_compaction: Int
        var history_entries_after_compaction: Int
        var matches_end_content: Bool
    }

    func run() async throws {
        let url = URL(fileURLWithPath: file)
        let endContent: String
        let ops: Int
        let elementOps: Int
        var generateMilliseconds: Double?
        let replay: () -> FugueText
        var plainReplay: (() -> Int)?
        if concurrent {
            let history = try EditingTraces.concurrent(at: url)
            endContent = history.endContent
            ops = history.patchCount
            elementOps = history.transactions.reduce(0) { total, txn in
                txn.patches.reduce(total) { $0 + $1.deleteCount + $1.insert.unicodeScalars.count }
            }
            let start = ContinuousClock.now
            let operations = history.generateOperations()
            generateMilliseconds = milliseconds(ContinuousClock.now - start)
            replay = { history.mergeAll(operations) }
        } else {
            let trace = try EditingTraces.sequential(at: url)
            endContent = trace.endContent
            let patches = trace.preparedPatches()
            ops = patches.count
            elementOps = patches.reduce(0) { $0 + $1.deleteCount + $1.insert.count }
            replay = {
                var text = FugueText()
                SequentialTrace.replay(patches, into: &text)
                return text
            }
            plainReplay = {
                var scalars: [Unicode.Scalar] = []
                for patch in patches {
                    scalars.replaceSubrange(
                        patch.position..<(patch.position + patch.deleteCount), with: patch.insert)
                }
                return scalars.count
            }
        }

        _ = replay()  // warm-up
        let residentBefore = ProcessMemory.resident
        ProcessMemory.resetPeak()
        var times: [Double] = []
        var text = FugueText()
        for _ in 0..<max(1, runs) {
            text = FugueText()
            let start = ContinuousClock.now
            text = replay()
            times.append(milliseconds(ContinuousClock.now - start))
        }
        let peak = ProcessMemory.peak
        let matches = text.text == endContent
        var plainTimes: [Double] = []
        var plainMatches = true
        if let plainReplay {
            _ = plainReplay()  // warm-up
            for _ in 0..<max(1, runs) {
                let start = ContinuousClock.now
                let count = plainReplay()
                plainTimes.append(milliseconds(ContinuousClock.now - start))
                plainMatches = plainMatches && count == endContent.unicodeScalars.count
            }
        }

        var encodeTimes: [Double] = []
        var decodeTimes: [Double] = []
        var encoded: [UInt8] = []
        var decodedMatches = true
        for _ in 0..<max(1, runs) {
            var start = ContinuousClock.now
            encoded = text.encoded()
            encodeTimes.append(milliseconds(ContinuousClock.now - start))
            start = ContinuousClock.now
            let decoded = try FugueText(encoded: encoded)
            decodeTimes.append(milliseconds(ContinuousClock.now - start))
            decodedMatches = decodedMatches && decoded.text == endContent
        }
        let withDeleted = text.encoded(includingDeletedContent: true).count

        var compacted = text
        compacted.compact(stableAt: text.version.versionVector)
        let compactionKeepsText = compacted.text == text.text

        let finalBytes = endContent.utf8.count
        let medianTime = median(times)
        let result = Result(
            trace: url.lastPathComponent, kind: concurrent ? "concurrent" : "sequential", ops: ops,
            element_ops: elementOps, runs: times.count, replay_ms_median: medianTime, replay_ms_min: times.min() ?? 0,
            plain_replay_ms: plainTimes.isEmpty ? nil : median(plainTimes),
            replay_to_plain: plainTimes.isEmpty ? nil : medianTime / median(plainTimes),
            ops_per_s: Double(ops) / (medianTime / 1000), generate_ms: generateMilliseconds, peak_rss_bytes: peak,
            rss_before_replay_bytes: residentBefore, document_bytes: text.memoryFootprint, final_utf8_bytes: finalBytes,
            encoded_bytes: encoded.count,
            encoded_bytes_per_op: Double(encoded.count) / Double(ops),
            encoded_to_final_text: Double(encoded.count) / Double(max(1, finalBytes)),
            encoded_with_deleted_content_bytes: withDeleted, encode_ms: median(encodeTimes),
            decode_ms: median(decodeTimes), state_metadata_bytes_before_compaction: text.stateMetadataByteCount,
            state_metadata_bytes_after_compaction: compacted.stateMetadataByteCount,
            encoded_bytes_after_compaction: compacted.encoded().count,
            tombstones_before_compaction: text.totalCount - text.count,
            tombstones_after_compaction: compacted.totalCount - compacted.count, runs_before_compaction: text.runCount,
            runs_after_compaction: compacted.runCount, history_entries_before_compaction: text.historyCount,
            history_entries_after_compaction: compacted.historyCount,
            matches_end_content: matches && decodedMatches && compactionKeepsText && plainMatches)

        let megabyte = 1024.0 * 1024.0
        print(
            "\(result.trace) (\(result.kind)): \(ops) ops (\(elementOps) element ops), final text \(finalBytes) bytes")
        if let generateMilliseconds {
            print(String(format: "  generate (agents editing their replicas): %.1f ms", generateMilliseconds))
        }
        print(
            String(
                format: "  %@: %.2f ms median of %d (min %.2f ms), %.0f ops/s",
                concurrent ? "merge into a fresh replica" : "replay", medianTime, times.count, result.replay_ms_min,
                result.ops_per_s))
        if let plain = result.plain_replay_ms, let ratio = result.replay_to_plain {
            print(String(format: "  baseline: the same patches into a plain array %.2f ms (CRDT %.2f×)", plain, ratio))
        }
        print(
            String(
                format:
                    "  memory: the document holds %.2f MB; process peak %.1f MB (%.1f MB resident before the timed replays, mostly the parsed trace)",
                Double(result.document_bytes) / megabyte, Double(peak) / megabyte, Double(residentBefore) / megabyte))
        print(
            String(
                format:
                    "  encoded %d bytes = %.3f bytes/op = %.2f× the final text (with deleted content: %d bytes); encode %.2f ms, decode %.2f ms",
                result.encoded_bytes, result.encoded_bytes_per_op, result.encoded_to_final_text, withDeleted,
                result.encode_ms, result.decode_ms))
        print(
            "  compaction at the final version (everything stable): tombstones \(result.tombstones_before_compaction) -> "
                + "\(result.tombstones_after_compaction) elements, runs \(result.runs_before_compaction) -> "
                + "\(result.runs_after_compaction), history entries \(result.history_entries_before_compaction) -> "
                + "\(result.history_entries_after_compaction)")
        print(
            "    state metadata (snapshot encoding minus the text) \(result.state_metadata_bytes_before_compaction) -> "
                + "\(result.state_metadata_bytes_after_compaction) bytes; whole encoding \(result.encoded_bytes) -> "
                + "\(result.encoded_bytes_after_compaction) bytes (a compacted list encodes as a snapshot)")
        print("  result \(result.matches_end_content ? "matches" : "DIFFERS FROM") endContent")
        print(String(decoding: try JSONEncoder.sortedKeys.encode(result), as: UTF8.self))
        guard result.matches_end_content else { throw ExitCode(1) }
    }
}
