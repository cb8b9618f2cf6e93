/// Exponential backoff with full jitter ("Exponential Backoff And Jitter", AWS Architecture Blog, 2015):
/// the n-th retry waits a uniformly random time in `0...min(cap, base * 2^n)`. Full jitter spreads the
/// retries of many devices that failed together, so they do not return in lockstep.
public struct BackoffPolicy: Sendable, Hashable {
    public var base: Duration
    public var cap: Duration

    public init(base: Duration = .milliseconds(500), cap: Duration = .seconds(60)) {
        precondition(base > .zero && cap >= base, "backoff needs 0 < base <= cap")
        self.base = base
        self.cap = cap
    }

    /// The upper bound of the wait before retry number `attempt` (0 for the first retry).
    public func ceiling(attempt: Int) -> Duration {
        let exponent = min(max(attempt, 0), 40)
        let seconds = min(cap.seconds, base.seconds * Double(UInt64(1) << UInt64(exponent)))
        return .milliseconds(Int64(seconds * 1000))
    }

    /// The wait before retry number `attempt`: random in `0...ceiling(attempt)`, but never shorter than a
    /// server's `Retry-After`.
    public func delay<R: RandomNumberGenerator>(attempt: Int, retryAfter: Duration? = nil, using random: inout R)
        -> Duration
    {
        let ceilingMilliseconds = max(0, Int64(ceiling(attempt: attempt).seconds * 1000))
        let jittered = Duration.milliseconds(Int64.random(in: 0...ceilingMilliseconds, using: &random))
        guard let retryAfter else { return jittered }
        return max(jittered, retryAfter)
    }
}

extension Duration {
    /// The duration in seconds as a `Double`.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
