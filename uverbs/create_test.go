package uverbs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// TestCreateQPClosedCQ: a CreateQP that names a closed CQ fails with
// ErrClosed, naming which, and gives back exactly the references it took
// on the other objects: the PD and the receive CQ still close (a
// reference dropped twice or kept would make their Close wait forever).
func TestCreateQPClosedCQ(t *testing.T) {
	// Closed by hand: after the failure this test looks for, the
	// context's Close would wait forever too.
	c := openAllocsOpen(t, uverbs.DriverSIW)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	send, err := c.CreateCQ(16, uverbs.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recv, err := c.CreateCQ(16, uverbs.CQOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := send.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = pd.CreateQP(uverbs.QPInit{Type: uverbs.QPTypeRC, SendCQ: send, RecvCQ: recv,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if !errors.Is(err, uverbs.ErrClosed) || !strings.Contains(err.Error(), "send CQ") {
		t.Fatalf("CreateQP with a closed send CQ: %v; want ErrClosed naming the send CQ", err)
	}
	closed := make(chan error, 2)
	go func() { closed <- recv.Close() }()
	go func() { closed <- pd.Close() }()
	for i := 0; i < 2; i++ {
		select {
		case err := <-closed:
			if err != nil {
				t.Errorf("Close after the refused CreateQP: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the receive CQ's or the PD's Close waits for a reference the refused CreateQP left")
		}
	}
	if err := recv.Resize(32); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Resize of the closed receive CQ: %v; want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}
