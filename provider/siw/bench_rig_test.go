package siw_test

import (
	"context"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/verbsbench"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// Benchmarks on siw0 in the rig (a real kernel under TCG: absolute times
// are the emulator's, ratios are what matter), over a loopback connection
// made by rdma_cm. Each reports allocations and syscalls per operation
// (the command file's counter).
//
//	test/rig/run.sh --bin DIR -- 'siw.test -test.run NONE -test.bench . -test.benchtime 2000x'

// newBenchPair connects a loopback pair on siw0 whose queues hold depth
// requests each way: a is rdma_cm's client, b its server.
func newBenchPair(b *testing.B, depth uint32) verbsbench.Pair {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	b.Cleanup(cancel)
	cfg := rdmacm.Config{Cap: uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1},
		CQEntries: int(4 * depth)}
	client, server := connect(b, ctx, cfg)
	end := func(c *rdmacm.Conn) *verbsbench.End {
		m := newBuf(b, c.PD(), 1<<16)
		return &verbsbench.End{Ctx: c.PD().Context(), QP: c.QP, CQ: c.CQ, Buf: m.mem.Bytes(), MR: m.mr}
	}
	return verbsbench.Pair{A: end(client), B: end(server)}
}

// The benchmark bodies are internal/verbsbench's, shared with rxe.

// BenchmarkPostSend: one 8-byte RDMA WRITE per call, every 16th
// signaled, up to 64 in flight, completions reaped inside the timing as a
// streaming sender does. syscalls/op is the doorbell rule at work: one
// per PostSend on an idle queue, none on a busy one.
func BenchmarkPostSend(b *testing.B) { verbsbench.PostSend(b, newBenchPair(b, 64), 64, 1) }

// BenchmarkPostSendList8: lists of eight WRITEs; an op is one work
// request.
func BenchmarkPostSendList8(b *testing.B) { verbsbench.PostSend(b, newBenchPair(b, 64), 64, 8) }

// BenchmarkPostRecv: one receive per call; when the queue is full the
// peer consumes it outside the timing.
func BenchmarkPostRecv(b *testing.B) { verbsbench.PostRecv(b, newBenchPair(b, 256), 256) }

// BenchmarkPollCQ: one completion per Poll call, from a CQ filled outside
// the timing.
func BenchmarkPollCQ(b *testing.B) { verbsbench.PollCQ(b, newBenchPair(b, 256), 256) }

// BenchmarkPollCQEmpty: the cost of finding nothing.
func BenchmarkPollCQEmpty(b *testing.B) { verbsbench.PollCQEmpty(b, newBenchPair(b, 16)) }

// BenchmarkPingPong: an 8-byte SEND each way, each side busy-polling its
// CQ; one op is a round trip, latency-ns half of it.
func BenchmarkPingPong(b *testing.B) { verbsbench.PingPong(b, newBenchPair(b, 16)) }

// BenchmarkMessageRate: 8-byte SENDs in lists of 16, receives kept
// posted; an op is one message, msgs/s the rate.
func BenchmarkMessageRate(b *testing.B) { verbsbench.MessageRate(b, newBenchPair(b, 128), 128, 16) }
