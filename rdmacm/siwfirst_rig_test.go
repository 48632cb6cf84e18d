package rdmacm_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/mmap"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// firstEnd is one side of a first-message exchange: a registered page,
// a receive posted at 0 before the connection is up.
type firstEnd struct {
	mem *mmap.Region
	mr  *uverbs.MR
	c   *rdmacm.Conn
}

func (e *firstEnd) prepare(c *rdmacm.Conn) error {
	var err error
	if e.mem, err = mmap.Anonymous(4096); err != nil {
		return err
	}
	if e.mr, err = c.PD().RegMR(e.mem.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return err
	}
	e.c = c
	_, err = c.QP.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{{Addr: e.mr.Addr(), Length: 64, LKey: e.mr.LKey()}}}})
	return err
}

func (e *firstEnd) send(msg string) error {
	copy(e.mem.Bytes()[2048:], msg)
	_, err := e.c.QP.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{{Addr: e.mr.Addr() + 2048, Length: uint32(len(msg)), LKey: e.mr.LKey()}}}})
	return err
}

// nudge posts an unsignaled zero-length RDMA WRITE: the peer's siw places
// and completes nothing for it (siw_proc_write).
func (e *firstEnd) nudge() error {
	_, err := e.c.QP.PostSend([]uverbs.SendWR{{ID: 3, Opcode: uverbs.WRRDMAWrite}})
	return err
}

// recv waits for the receive's completion (sends' are skipped) and
// returns the message.
func (e *firstEnd) recv(ctx context.Context) (string, error) {
	wc := make([]uverbs.WorkCompletion, 4)
	for {
		n, err := e.c.CQ.Wait(ctx, wc)
		if err != nil {
			return "", err
		}
		for _, w := range wc[:n] {
			if w.Status != uverbs.WCSuccess {
				return "", fmt.Errorf("completion %d: %v", w.ID, w.Status)
			}
			if w.ID == 1 {
				return string(e.mem.Bytes()[:w.ByteLen]), nil
			}
		}
	}
}

func (e *firstEnd) close() {
	if e.mr != nil {
		e.mr.Close()
	}
	if e.c != nil {
		e.c.Close()
	}
	if e.mem != nil {
		e.mem.Close()
	}
}

// TestRigSIWFirstMessage: the client's first message, sent the moment its
// connect returns, reaches the server. siw's accept (siw_accept in
// siw_cm.c, 6.1 to 7.x) sends the MPA reply before it gives the socket's
// receive callback to the QP; an FPDU that arrives in between wakes the
// CM's callback, which ignores data once in RDMA mode, and stays unread in
// the server's socket until more data comes: a server waiting for that
// message and a client waiting for the answer wait forever. This is the
// hang seen once in ~60 under TCG in perftest -R and rping on siw0. Each
// round connects RDMACM_SIW_FIRST (default 40) clients, 4 at a time; a
// client with no answer after 3 s counts as stuck, notes whether the
// server's socket holds unread bytes, and nudges with a zero-length RDMA
// WRITE (what goverbs' perftest and rping clients do): every answer must
// then come.
func TestRigSIWFirstMessage(t *testing.T) {
	rigtest.Require(t)
	rigtest.Device(t, "siw0")
	n := 40
	if s := os.Getenv("RDMACM_SIW_FIRST"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("RDMACM_SIW_FIRST=%q", s)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	l, err := rdmacm.Listen(netip.AddrPortFrom(addrSIW0, 0), &rdmacm.Config{Backlog: 8})
	if err != nil {
		t.Fatal(err)
	}
	la, err := l.ID.LocalAddr()
	if err != nil || la.Port() == 0 {
		l.Close()
		t.Fatalf("the listener's address: %v, %v", la, err)
	}
	port := la.Port()
	var srv sync.WaitGroup
	acceptDone := make(chan struct{})
	defer func() {
		// The accept loop reports inside the test: it ends at Close.
		l.Close()
		<-acceptDone
		srv.Wait()
	}()
	go func() {
		defer close(acceptDone)
		for {
			r, err := l.Accept(ctx)
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, rdmacm.ErrClosed) {
					t.Errorf("Accept: %v", err)
				}
				return
			}
			srv.Add(1)
			go func() {
				defer srv.Done()
				e := &firstEnd{}
				defer e.close()
				if _, err := r.AcceptWith(ctx, nil, e.prepare); err != nil {
					t.Errorf("accept: %v", err)
					return
				}
				msg, err := e.recv(ctx)
				if err != nil {
					t.Errorf("server: %v", err)
					return
				}
				if err := e.send("re: " + msg); err != nil {
					t.Errorf("server send: %v", err)
					return
				}
				<-e.c.Done() // until the client disconnects
			}()
		}
	}()
	var mu sync.Mutex
	var stuck, unread []string
	var dialFailed sync.Once
	sem := make(chan struct{}, 4)
	var cli sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		cli.Add(1)
		go func() {
			defer cli.Done()
			defer func() { <-sem }()
			e := &firstEnd{}
			defer e.close()
			if _, err := rdmacm.Dial(ctx, netip.AddrPortFrom(addrSIW0, port), &rdmacm.Config{Prepare: e.prepare}); err != nil {
				t.Errorf("client %d: Dial: %v", i, err)
				// Once: what the kernel shows then, so a refusal can be
				// told apart (no siw socket listening on the port?).
				dialFailed.Do(func() {
					t.Logf("first failed Dial: TCP listening on port %d: %v\n%s", port, rigtest.TCPListening(int(port)), rigtest.KernelState())
				})
				return
			}
			msg := fmt.Sprintf("hello %d", i)
			if err := e.send(msg); err != nil {
				t.Errorf("client %d: send: %v", i, err)
				return
			}
			wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
			got, err := e.recv(wctx)
			wcancel()
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				local, _ := e.c.ID.LocalAddr()
				var u []string
				for _, s := range rigtest.UnreadOn(int(port)) {
					if strings.Contains(s, " "+local.String()+" ") {
						u = append(u, s)
					}
				}
				mu.Lock()
				stuck = append(stuck, local.String())
				unread = append(unread, u...)
				mu.Unlock()
				for try := 0; try < 10 && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil; try++ {
					if nerr := e.nudge(); nerr != nil {
						t.Errorf("client %d: nudge: %v", i, nerr)
						return
					}
					wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
					got, err = e.recv(wctx)
					wcancel()
				}
			}
			if err != nil || got != "re: "+msg {
				t.Errorf("client %d: answer %q, %v", i, got, err)
			}
		}()
	}
	cli.Wait()
	t.Logf("%d connections to port %d: %d first messages stuck until a nudge (%v); the server's socket held unread bytes for %d: %q",
		n, port, len(stuck), stuck, len(unread), unread)
}
