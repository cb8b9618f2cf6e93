// A test imports SyncTestSupport alone: the seeded generator (`SplitMix64`) and `ChildProcess`, which the
// shipped programs use too and so live in SyncToolSupport, come along.
@_exported import SyncToolSupport
