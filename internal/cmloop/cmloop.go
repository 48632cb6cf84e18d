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
)

// Connect listens on addr (port 0: any) with listen, dials it with dial,
// and accepts the request: with server's QP when server is not nil (it
// must be in RESET; dial.QP is the client's then), or with a QP rdma_cm
// creates from listen. The listener is closed before Connect returns. On
// an error neither connection is left open.
func Connect(ctx context.Context, addr netip.Addr, listen, dial *rdmacm.Config, server *uverbs.QP) (client, accepted *rdmacm.Conn, err error) {
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
