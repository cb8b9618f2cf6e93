import Foundation

/// How far a reader has read: the last `seq` seen per scope.
///
/// On the wire it is opaque: base64url (no padding) of canonical JSON `{"scope": seq, ...}`. Clients store
/// and return it as is; the server decodes and validates it.
public struct ScopeCursor: Hashable, Sendable {
    public private(set) var positions: [Scope: Int64]

    public init(_ positions: [Scope: Int64] = [:]) {
        self.positions = positions
    }

    /// The last `seq` read in `scope`; 0 when nothing was read.
    public subscript(scope: Scope) -> Int64 {
        get { positions[scope] ?? 0 }
        set { positions[scope] = newValue }
    }

    /// Moves `scope` forward to `seq`; never backwards.
    public mutating func advance(_ scope: Scope, to seq: Int64) {
        if seq > self[scope] { positions[scope] = seq }
    }

    /// The cursors partway through a page that was read after this cursor (`marks` of a pull or sync
    /// answer): the i-th is where the page would have ended after its first `(i + 1) * every` events, each
    /// scope at the last `seq` of those events (the page's events in order, as `(scope, seq)`). None for the
    /// page's end, whose cursor the answer carries. Storing a mark and pulling from it later reads exactly the
    /// events after those: none skipped, none twice.
    public func marks(through events: [(scope: Scope, seq: Int64)], every: Int) -> [String] {
        guard every > 0, events.count > every else { return [] }
        var cursor = self
        var marks: [String] = []
        marks.reserveCapacity((events.count - 1) / every)
        for (index, event) in events.enumerated() {
            cursor.advance(event.scope, to: event.seq)
            let count = index + 1
            if count % every == 0 && count < events.count { marks.append(cursor.encoded) }
        }
        return marks
    }

    /// The opaque string form; the empty cursor encodes to "".
    public var encoded: String {
        if positions.isEmpty { return "" }
        let object = JSONValue.object(Dictionary(uniqueKeysWithValues: positions.map { ($0.key.name, .int($0.value)) }))
        // base64url without padding, mapped byte by byte (`replacingOccurrences` goes through `NSString` on
        // Linux, and a device encodes its cursor for every request).
        var bytes = [UInt8](object.canonicalData().base64EncodedData())
        while bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
        Self.swap(&bytes, "+", "-", "/", "_")
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Decodes the opaque form; nil or "" is the beginning.
    /// - Throws: `SyncModelsError` with code `cursor.invalid` for anything that is not a cursor this
    ///   package made (bad base64, bad JSON, an invalid scope name, a negative seq).
    public init(encoded text: String?) throws {
        guard let text, !text.isEmpty else {
            self.init()
            return
        }
        let invalid = SyncModelsError.invalid("cursor", "the cursor is not one this server issued")
        guard text.utf8.count <= 64 * 1024 else { throw invalid }
        // Back to padded base64, byte by byte (see `encoded`).
        var bytes = Array(text.utf8)
        Self.swap(&bytes, "-", "+", "_", "/")
        bytes += repeatElement(UInt8(ascii: "="), count: (4 - bytes.count % 4) % 4)
        guard let data = Data(base64Encoded: Data(bytes)), case .object(let object) = try? JSONValue(parsing: data)
        else { throw invalid }
        var positions: [Scope: Int64] = [:]
        for (name, value) in object {
            guard let scope = try? Scope(name), case .int(let seq) = value, seq >= 0 else { throw invalid }
            positions[scope] = seq
        }
        self.init(positions)
    }

    /// Replaces `a` by `b` and `c` by `d` in `bytes` (between base64 and base64url).
    private static func swap(
        _ bytes: inout [UInt8], _ a: Unicode.Scalar, _ b: Unicode.Scalar, _ c: Unicode.Scalar, _ d: Unicode.Scalar
    ) {
        for index in bytes.indices {
            if bytes[index] == UInt8(ascii: a) {
                bytes[index] = UInt8(ascii: b)
            } else if bytes[index] == UInt8(ascii: c) {
                bytes[index] = UInt8(ascii: d)
            }
        }
    }
}
