// Package cmloop makes an rdma_cm connection between two ends in one
// process, on one local address: what iWARP needs before its RC QPs can
// move data (they reach RTS only through the connection manager). The siw
// tests and ibvcost's iWARP rows use it.
package cmloop

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// Connect listens on addr (port 0: any) with listen, dials it with dial,
// and accepts the request: with server's QP when server is not nil (it
// must be in RESET; dial.QP is the client's then), or with a QP rdma_cm
// creates from listen. The listener is closed before Connect returns. On
// an error neither connection is left open.
//
// A dial the kernel refuses (ECONNREFUSED) is tried again, with a new
// listener and the QPs back in RESET, up to refusedTries times in all.
// On siw the loopback connect was refused, rarely, by a listener Listen had
// just made (once in ~100 runs of provider/siw's TestStressRig, 7.3.4,
// the accept side seeing no request): rdma_cm hands out ports from its own
// port space, not TCP's, so a port it freed may still name a TCP socket of
// an earlier connection that the new connection's SYN then meets. That is
// the kernel's loopback, not what the tests test; a refusal on every try
// is still an error. The same meeting, from the dialing side, fails the
// connect with EADDRNOTAVAIL (siw's connect binds the port rdma_cm gave it
// and the kernel finds the address pair still in use: once in provider/siw's
// TestConformance on 5.10, session 51), and is tried again as well.
func Connect(ctx context.Context, addr netip.Addr, listen, dial *rdmacm.Config, server *uverbs.QP) (client, accepted *rdmacm.Conn, err error) {
	for try := 1; ; try++ {
		client, accepted, err = connectTry(ctx, addr, listen, dial, server)
		if err == nil || try == refusedTries || !retried(err) || ctx.Err() != nil {
			return client, accepted, err
		}
		qps := []*uverbs.QP{server}
		if dial != nil {
			qps = append(qps, dial.QP)
		}
		for _, qp := range qps {
			if qp != nil {
				if rerr := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateReset}, uverbs.QPAttrState); rerr != nil {
					return nil, nil, errors.Join(err, rerr)
				}
			}
		}
	}
}

// refusedTries is how many times Connect dials while the kernel refuses.
const refusedTries = 3

// retried reports whether Connect tries again after err: the refusals of
// a loopback connect that met an earlier connection's TCP socket.
func retried(err error) bool {
	return errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.EADDRNOTAVAIL)
}

// connectTry is one try of Connect: connectOnce, or a test's stand-in
// (cmloop_test.go refuses tries to check the retry).
var connectTry = connectOnce

// connectOnce is one try of Connect.
func connectOnce(ctx context.Context, addr netip.Addr, listen, dial *rdmacm.Config, server *uverbs.QP) (client, accepted *rdmacm.Conn, err error) {
	l, err := rdmacm.Listen(netip.AddrPortFrom(addr, 0), listen)
	if err != nil {
		return nil, nil, fmt.Errorf("rdmacm.Listen: %w", err)
	}
	defer l.Close()
	type res struct {
		c   *rdmacm.Conn
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := l.Accept(ctx)
		if err != nil {
			done <- res{nil, fmt.Errorf("rdmacm accept: %w", err)}
			return
		}
		var c *rdmacm.Conn
		if server != nil {
			c, err = r.AcceptQP(ctx, nil, server)
		} else {
			c, err = r.Accept(ctx, nil)
		}
		if err != nil {
			err = fmt.Errorf("rdmacm accept: %w", err)
		}
		done <- res{c, err}
	}()
	client, err = rdmacm.Dial(ctx, netip.AddrPortFrom(addr, l.Addr().Port()), dial)
	if err != nil {
		err = fmt.Errorf("rdmacm.Dial: %w", err)
		l.Close() // ends a pending Accept
	}
	r := <-done
	if err = errors.Join(err, r.err); err != nil {
		if client != nil {
			client.Close()
		}
		if r.c != nil {
			r.c.Close()
		}
		return nil, nil, err
	}
	return client, r.c, nil
}
