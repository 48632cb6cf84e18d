package rsocket

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// The rs_conn_data librdmacm 44 sends from a little-endian host with
// rq_size 384, target SGL at 0x1122334455667788 (rkey 0xaabbccdd, 2
// entries), first buffer at 0x0102030405060708 (rkey 0x01020304, 64 KiB):
// version 1, flags IOMAP (2), credits be16 384, reserved, iomap size 0, then
// the two SGEs big-endian {addr, key, length}.
var goldenConnData = []byte{
	1, 2, 0x01, 0x80, 0, 0, 0, 0,
	0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0, 0, 2,
	0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x01, 0x02, 0x03, 0x04, 0, 1, 0, 0,
}

func TestConnDataWire(t *testing.T) {
	d := connData{Version: 1, Flags: connFlagIOMap, Credits: 384,
		TargetSGL:  sge{Addr: 0x1122334455667788, Key: 0xaabbccdd, Length: 2},
		DataBuffer: sge{Addr: 0x0102030405060708, Key: 0x01020304, Length: 64 << 10}}
	b := make([]byte, connDataLen)
	d.marshal(b)
	if !bytes.Equal(b, goldenConnData) {
		t.Fatalf("marshal:\n got %x\nwant %x", b, goldenConnData)
	}
	padded := append(append([]byte(nil), goldenConnData...), make([]byte, 16)...) // IB CMs pad to 56
	got, err := parseConnData(padded)
	if err != nil || got != d {
		t.Fatalf("parse: %+v, %v; want %+v", got, err, d)
	}
}

func TestConnDataRefused(t *testing.T) {
	bad := func(mod func(b []byte) []byte) []byte {
		return mod(append([]byte(nil), goldenConnData...))
	}
	for name, b := range map[string][]byte{
		"short":      goldenConnData[:39],
		"version 2":  bad(func(b []byte) []byte { b[0] = 2; return b }),
		"no entries": bad(func(b []byte) []byte { b[23] = 0; return b }),
		"no buffer":  bad(func(b []byte) []byte { b[37] = 0; return b }),
	} {
		if _, err := parseConnData(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseConnData(f *testing.F) {
	f.Add(goldenConnData)
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseConnData(b)
		if err != nil {
			return
		}
		out := make([]byte, connDataLen)
		d.marshal(out)
		// Reserved bytes are not kept; everything else round-trips.
		in := append([]byte(nil), b[:connDataLen]...)
		in[4], in[5], in[6] = 0, 0, 0
		if !bytes.Equal(out, in) {
			t.Fatalf("round trip %x → %x", in, out)
		}
	})
}

func TestMsg(t *testing.T) {
	for _, c := range []struct {
		op, data, want uint32
	}{
		{opData, 65536, 0x00010000},
		{opSGL, 384 + 17, 0x80000191},
		{opCtrl, ctrlShutdown, 0xe0000002},
		{opCtrl, ctrlDisconnect, 0xe0000000},
		{opIOMapSGL, 3, 0xc0000003},
		{opData, 1<<29 + 5, 5}, // data is 29 bits
	} {
		m := msgSet(c.op, c.data)
		if m != c.want || msgOp(m) != c.op || msgData(m) != c.data&msgDataMask {
			t.Errorf("msgSet(%d, %#x) = %#x (op %d data %#x), want %#x", c.op, c.data, m, msgOp(m), msgData(m), c.want)
		}
	}
}

func TestScaleToValue(t *testing.T) {
	for v, want := range map[int]int{0: 0, 1: 1, 128: 128, 129: 256, 130: 512, 255: 127 << 8} {
		if got := scaleToValue(v, 8); got != want {
			t.Errorf("scaleToValue(%d) = %d, want %d", v, got, want)
		}
	}
}

func TestSizes(t *testing.T) {
	s := (*Config)(nil).settings()
	s.spinMax = 0 // TestConfigWaitSpinMax's
	if s != (settings{sbuf: 128 << 10, rbuf: 128 << 10, sq: 384, rq: 384, inline: 64}) {
		t.Errorf("defaults: %+v", s)
	}
	s = (&Config{SendBuffer: 1, RecvBuffer: 5000, SendQueue: 1, RecvQueue: 1 << 20, Inline: -1}).settings()
	s.spinMax = 0
	if s != (settings{sbuf: 4096, rbuf: 5120, sq: 16, rq: 0xfffe, inline: 0}) {
		t.Errorf("clamped: %+v", s)
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestDeadline(t *testing.T) {
	var d deadline
	d.init()
	if closed(d.done()) || d.expired() || d.context().Err() != nil {
		t.Fatal("a deadline without a time has expired")
	}
	d.set(time.Now().Add(-time.Second))
	if !closed(d.done()) || !d.expired() || !errors.Is(d.context().Err(), context.DeadlineExceeded) {
		t.Fatal("a past deadline has not expired")
	}
	d.set(time.Time{})
	if closed(d.done()) || d.expired() {
		t.Fatal("a cleared deadline is still expired")
	}
	ch := d.done()
	d.set(time.Now().Add(time.Hour))
	d.set(time.Now().Add(20 * time.Millisecond)) // moved closer while someone waits on ch
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the deadline did not fire")
	}
	if !d.expired() {
		t.Fatal("fired but not expired")
	}
	d.set(time.Now().Add(time.Hour))
	ch = d.done()
	d.shutdown()
	if !closed(ch) || d.expired() {
		t.Fatal("shutdown did not wake the waiter, or counts as a timeout")
	}
	d.set(time.Time{})
	if !closed(d.done()) {
		t.Fatal("a deadline reopened after shutdown")
	}

	// A broken connection's channel stays closed; its time still counts.
	var b deadline
	b.init()
	b.interrupt()
	if !closed(b.done()) || b.expired() {
		t.Fatal("interrupt did not close the channel, or counts as a timeout")
	}
	b.set(time.Now().Add(-time.Second))
	if !b.expired() {
		t.Fatal("a past deadline after interrupt has not expired")
	}
	b.set(time.Time{})
	if b.expired() || !closed(b.done()) {
		t.Fatal("a cleared deadline after interrupt expired, or its channel reopened")
	}
}

// TestDeadlineContext: a deadline's context keeps the Context contract
// when a deadline that passed is moved on (its channel replaced): the old
// context's Err stays non-nil, and a context derived from it is canceled
// with that error. context's propagation goroutine panicked ("missing
// cancel error") when the deadline answered Err for its newer channel.
func TestDeadlineContext(t *testing.T) {
	var d deadline
	d.init()
	for i := 0; i < 100; i++ {
		old := d.context()
		child, cancel := context.WithTimeout(old, time.Hour) // watched by context's goroutine
		d.set(time.Now().Add(-time.Second))                  // passed: old's channel closes
		d.set(time.Now().Add(time.Hour))                     // moved on: a new channel
		select {
		case <-child.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("a context derived from a passed deadline was not canceled")
		}
		if !errors.Is(old.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
			t.Fatalf("after the deadline passed: Err %v, the derived context's %v; want context.DeadlineExceeded", old.Err(), child.Err())
		}
		if now := d.context(); now == old || now.Err() != nil {
			t.Fatalf("the moved deadline's context: the same one %v, Err %v; want a new one, nil", now == old, now.Err())
		}
		cancel()
		d.set(time.Time{})
	}
}

func TestFirstTransfer(t *testing.T) {
	for _, tc := range []struct {
		d    uverbs.DriverID
		want int
	}{
		{uverbs.DriverRXE, 65536}, {uverbs.DriverSIW, 65536},
		{uverbs.DriverMLX5, 2048}, {uverbs.DriverUnknown, 2048},
	} {
		if got := firstTransfer(tc.d); got != tc.want {
			t.Errorf("firstTransfer(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
