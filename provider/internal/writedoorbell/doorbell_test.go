package writedoorbell

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/goverbs/goverbs/abi"

	"golang.org/x/sys/unix"
)

// TestCommand: the bytes the kernel's legacy POST_SEND reads.
func TestCommand(t *testing.T) {
	if CmdSize != 32 || SendWRSize != 56 {
		t.Fatalf("CmdSize %d, SendWRSize %d; want 32 and 56", CmdSize, SendWRSize)
	}
	d := New(0x1234)
	ne := binary.NativeEndian
	c := d.Cmd[:]
	if ne.Uint32(c) != abi.IB_USER_VERBS_CMD_POST_SEND || ne.Uint16(c[4:]) != 8 || ne.Uint16(c[6:]) != 1 || ne.Uint32(c[16:]) != 0x1234 ||
		ne.Uint32(c[20:]) != 0 || ne.Uint32(c[24:]) != 0 || ne.Uint32(c[28:]) != 56 {
		t.Errorf("command % x", c)
	}
	if a, b := ne.Uint64(c[8:]), ne.Uint64(New(1).Cmd[8:]); a == 0 || a == b {
		t.Errorf("response addresses %#x and %#x: each doorbell needs its own", a, b)
	}
	if h, ok := Parse(c); !ok || h != 0x1234 {
		t.Errorf("Parse(New(0x1234)) = %#x, %v", h, ok)
	}
	bad := d.Cmd
	bad[20] = 1 // a work request
	if _, ok := Parse(bad[:]); ok {
		t.Error("Parse took a command with wr_count 1")
	}
	if _, ok := Parse(c[:CmdSize-4]); ok {
		t.Error("Parse took a short command")
	}
}

func TestError(t *testing.T) {
	err := error(&Error{Provider: "siw", Posted: 3, Err: unix.ENOTCONN})
	if !errors.Is(err, unix.ENOTCONN) {
		t.Error("Error does not unwrap to its cause")
	}
	want := "siw: PostSend: 3 work requests placed in the send queue, but the doorbell write failed: transport endpoint is not connected"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}
