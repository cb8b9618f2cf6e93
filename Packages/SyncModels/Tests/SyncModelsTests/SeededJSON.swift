@testable import SyncModels

/// A JSON value made from `seeds` (a property-based test's input): nulls, booleans, integers, doubles with
/// fractions, strings with characters that need escaping, arrays and objects, nested up to about five levels.
func seededJSONValue(_ seeds: [Int]) -> JSONValue {
    var iterator = seeds.makeIterator()
    func next() -> Int { iterator.next() ?? 0 }
    func value(_ depth: Int) -> JSONValue {
        switch next() % (depth > 3 ? 5 : 7) {
        case 0: return .null
        case 1: return .bool(next() % 2 == 0)
        case 2: return .int(Int64(next() % 2_000_001) - 1_000_000)
        case 3: return .double(Double(next() % 10_000) / 64)
        case 4: return .string(String(repeating: "ab\"\\/é\n\u{1}", count: next() % 3))
        case 5: return .array((0..<(next() % 4)).map { _ in value(depth + 1) })
        default:
            return .object(
                Dictionary(
                    (0..<(next() % 4)).map { _ in ("k\(next() % 10)", value(depth + 1)) },
                    uniquingKeysWith: { a, _ in a }))
        }
    }
    return value(0)
}
