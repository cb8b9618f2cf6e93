/// A point on a manual clock: tests move time by hand instead of sleeping.
struct ManualInstant: InstantProtocol, CustomStringConvertible {
    var offset: Duration

    static let zero = ManualInstant(offset: .zero)

    func advanced(by duration: Duration) -> ManualInstant { ManualInstant(offset: offset + duration) }
    func duration(to other: ManualInstant) -> Duration { other.offset - offset }
    static func < (lhs: ManualInstant, rhs: ManualInstant) -> Bool { lhs.offset < rhs.offset }
    var description: String { "t+\(offset)" }
}
