import NIOCore

/// One direction of a proxied connection: the chunks read from one side, each with the time it may leave,
/// written to the other side in order, no faster than the bandwidth cap, and not at all in a black hole.
///
/// The queue is bounded: the source is read only while the queue holds less than ``bufferLimit`` bytes (one
/// read adds at most a few chunks more), so a slow or stalled destination holds the source back through TCP.
final class Flow {
    struct Chunk {
        var bytes: ByteBuffer
        let release: NIODeadline
    }

    /// Bytes queued past which the source is not read.
    static let bufferLimit = 256 * 1024
    /// While black-holed, the flow looks again this often.
    static let blackholeRecheck = TimeAmount.milliseconds(50)

    unowned let connection: ProxyConnection
    let destination: ProxyConnection.Side
    var source: ProxyConnection.Side { destination == .client ? .upstream : .client }

    private var queue = CircularBuffer<Chunk>()
    private(set) var queuedBytes = 0
    /// The release time of the last chunk queued: a chunk never leaves before the one ahead of it.
    private var lastRelease = NIODeadline.uptimeNanoseconds(0)
    /// Under a bandwidth cap, the time from which the next bytes may leave.
    private var paceCursor = NIODeadline.uptimeNanoseconds(0)
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    /// Bytes written to the destination so far.
    private(set) var forwarded = 0
    /// The source closed: once the queue is empty, the destination is closed too.
    var sourceEnded = false
    private(set) var destinationClosed = false
    private var pumping = false
    private var pumpAgain = false

    init(connection: ProxyConnection, destination: ProxyConnection.Side) {
        self.connection = connection
        self.destination = destination
    }

    var hasRoom: Bool { queuedBytes < Self.bufferLimit }

    /// Queues bytes read from the source, with their release time: now plus the latency and a jitter draw,
    /// or the previous chunk's release time if that is later.
    func enqueue(_ buffer: ByteBuffer) {
        guard !destinationClosed, buffer.readableBytes > 0 else { return }
        let settings = connection.proxy.settings
        var delay = TimeAmount(settings.latency)
        if settings.jitter > .zero {
            let jitter = TimeAmount(settings.jitter).nanoseconds
            delay = delay + .nanoseconds(Int64(Double.random(in: -1...1, using: &connection.random) * Double(jitter)))
        }
        delay = max(delay, .zero)
        let release = max(NIODeadline.now() + delay, lastRelease)
        lastRelease = release
        if delay > .zero {
            let count = buffer.readableBytes
            connection.proxy.record { $0.bytesDelayed += count }
        }
        queue.append(Chunk(bytes: buffer, release: release))
        queuedBytes += buffer.readableBytes
        pump()
    }

    /// The destination closed: what is queued for it is dropped.
    func discard() {
        destinationClosed = true
        queue.removeAll()
        queuedBytes = 0
        timer?.cancel()
        timer = nil
        timerDeadline = nil
    }

    /// Writes every chunk that is due, as far as the destination takes them; schedules itself for the next.
    func pump() {
        if pumping {
            pumpAgain = true
            return
        }
        pumping = true
        defer { pumping = false }
        repeat {
            pumpAgain = false
            pumpOnce()
        } while pumpAgain
    }

    private func pumpOnce() {
        guard !connection.resetting, !destinationClosed, let context = connection.context(destination) else { return }
        let settings = connection.proxy.settings
        if settings.blackhole && !queue.isEmpty {
            connection.noteBlackholed()
            schedule(at: .now() + Self.blackholeRecheck)
            return
        }
        var written = 0
        while !queue.isEmpty {
            let now = NIODeadline.now()
            var due = queue[queue.startIndex].release
            if settings.bandwidth > 0 { due = max(due, paceCursor) }
            if due > now {
                schedule(at: due)
                break
            }
            guard context.channel.isWritable else { break }
            var count = queue[queue.startIndex].bytes.readableBytes
            if settings.bandwidth > 0 {
                // Slices of a fiftieth of a second's worth: the rate holds over short spans too.
                count = min(count, max(1, settings.bandwidth / 50))
                let nanoseconds = Int64(count) * 1_000_000_000 / Int64(settings.bandwidth)
                paceCursor = max(paceCursor, now) + .nanoseconds(nanoseconds)
            }
            var resetNow = false
            if destination == .client, let at = connection.resetPoint(forwarded: forwarded, settings: settings),
                forwarded + count >= at
            {
                count = at - forwarded
                resetNow = true
            }
            let slice = queue[queue.startIndex].bytes.readSlice(length: count)!
            if queue[queue.startIndex].bytes.readableBytes == 0 { queue.removeFirst() }
            queuedBytes -= count
            forwarded += count
            written += count
            if resetNow {
                record(written: written, throttled: settings.bandwidth > 0)
                connection.reset(after: context.writeAndFlush(NIOAny(slice)))
                return
            }
            context.write(NIOAny(slice), promise: nil)
        }
        if written > 0 {
            context.flush()
            record(written: written, throttled: settings.bandwidth > 0)
        }
        if queue.isEmpty && sourceEnded {
            destinationClosed = true
            context.close(promise: nil)
            return
        }
        connection.maybeRead(source)
    }

    private func record(written: Int, throttled: Bool) {
        let toClient = destination == .client
        connection.proxy.record { stats in
            if toClient { stats.bytesToClients += written } else { stats.bytesToUpstream += written }
            if throttled { stats.bytesThrottled += written }
        }
    }

    private func schedule(at deadline: NIODeadline) {
        if timer != nil, let timerDeadline, timerDeadline <= deadline { return }
        timer?.cancel()
        timerDeadline = deadline
        timer = connection.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            timer = nil
            timerDeadline = nil
            pump()
        }
    }
}
