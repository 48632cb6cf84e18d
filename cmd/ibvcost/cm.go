package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// cmSpecs are the connection manager's rows (package rdmacm; verbs_cost.c
// times librdmacm's calls under the same names).
func cmSpecs() []spec {
	return []spec{
		{"cm_create_id", "cm", "EventChannel.CreateID", 0},
		{"cm_resolve_addr", "cm", "ID.ResolveAddr", 0},
		{"cm_resolve_route", "cm", "ID.ResolveRoute", 0},
		{"cm_destroy_id", "cm", "ID.Close", 0},
		{"cm_connect", "cm", "Dial", 0},
		{"cm_accept", "cm", "ConnRequest.Accept", 0},
		{"cm_disconnect", "cm", "Conn.Disconnect", 0},
	}
}

// cmTimeout bounds every connection-manager step.
const cmTimeout = 30 * time.Second

// cmRows times connection set-up through rdma_cm on the IPv4 address of
// the device's netdev, to a listener of the same program (loopback), on
// event channels opened beforehand (a long-lived program's):
//
//	cm_create_id      CreateID (RDMA_PS_TCP)
//	cm_resolve_addr   ResolveAddr to ADDR_RESOLVED
//	cm_resolve_route  ResolveRoute to ROUTE_RESOLVED
//	cm_destroy_id     Close of that resolved id (no QP)
//	cm_connect        Dial's CONNECT to ESTABLISHED: from its QP in INIT
//	                  (Config.Prepare) to its return with the QP in RTS
//	cm_accept         the listener's accept of the request to ESTABLISHED:
//	                  from its QP in INIT (AcceptWith's prepare) to
//	                  AcceptWith's return, in a goroutine of its own while
//	                  the dialer waits
//	cm_disconnect     Disconnect to the DISCONNECTED event
//
// The QPs are RC with one WR and SGE each way. Only the timing pass
// measures them: their work spans the event channel's goroutine, which
// the per-thread syscall counters do not see (verbs_cost.c leaves them
// uncounted too).
func (w *workload) cmRows() error {
	if w.b.countPass {
		return nil
	}
	// The rows run on a goroutine of their own, not locked to an OS thread
	// as ibvcost's main goroutine is (for the syscall counters, which these
	// rows do not use): a Go program waits for CM events so, and a locked
	// waiter pays an OS thread switch (futex wake, sleep) for every event
	// the channel's reader goroutine hands it. On 6.1 under TCG (session
	// 5, one boot each, a loaded host) the rows went from 1.35-3.55 times
	// librdmacm's, locked, to 1.04-2.24 times, unlocked; cm_connect,
	// cm_accept and cm_disconnect stayed ~1.6-1.8 times (not explained
	// yet: rdmacm's TestRigCMSteps, against cmtime's server, is faster
	// than cmtime on every kernel).
	errc := make(chan error, 1)
	go func() { errc <- w.cmRowsUnlocked() }()
	return <-errc
}

func (w *workload) cmRowsUnlocked() error {
	ip, err := netdevIPv4(w.dev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(w.n+2)*cmTimeout)
	defer cancel()
	ch, err := rdmacm.Open()
	if err != nil {
		return err
	}
	defer ch.Close()
	cfg := rdmacm.Config{Channel: ch, Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
	lcfg := cfg
	lcfg.Channel = nil
	l, err := rdmacm.Listen(netip.AddrPortFrom(ip, 0), &lcfg)
	if err != nil {
		return err
	}
	defer l.Close()
	dst := netip.AddrPortFrom(ip, l.Addr().Port())
	return w.b.cycle(w.n, func(p *phase) error {
		var id *rdmacm.ID
		if err := p.do("cm_create_id", nil, func() (err error) { id, err = ch.CreateID(rdmacm.PSTCP); return }); err != nil {
			return err
		}
		err := p.do("cm_resolve_addr", nil, func() error { return id.ResolveAddr(ctx, netip.AddrPort{}, dst) })
		if err == nil {
			err = p.do("cm_resolve_route", nil, func() error { return id.ResolveRoute(ctx) })
		}
		if err != nil {
			id.Close()
			return err
		}
		if err := p.do("cm_destroy_id", nil, id.Close); err != nil {
			return err
		}

		type accepted struct {
			d   time.Duration
			err error
		}
		acc := make(chan accepted, 1)
		go func() {
			r, err := l.Accept(ctx)
			if err != nil {
				acc <- accepted{err: err}
				return
			}
			var t0 time.Duration
			c, err := r.AcceptWith(ctx, nil, func(*rdmacm.Conn) error { t0 = now(); return nil })
			d := now() - t0
			if err == nil {
				<-c.Done() // the dialer's disconnect
				c.Close()
			}
			acc <- accepted{d, err}
		}()
		var prepared time.Duration
		c := cfg
		c.Prepare = func(*rdmacm.Conn) error { prepared = now(); return nil }
		conn, err := rdmacm.Dial(ctx, dst, &c)
		connected := now()
		if err != nil {
			l.Close() // ends the accepting goroutine's wait
			<-acc
			return p.fail("cm_connect", err)
		}
		err = p.sample("cm_connect", connected-prepared)
		if err == nil {
			err = p.do("cm_disconnect", nil, func() error {
				if err := conn.Disconnect(); err != nil {
					return err
				}
				ev, err := conn.NextEvent(ctx)
				if err == nil && ev.Type != rdmacm.EventDisconnected {
					err = fmt.Errorf("%v after Disconnect, want DISCONNECTED", ev.Type)
				}
				return err
			})
		}
		conn.Close()
		a := <-acc
		if err != nil {
			return err
		}
		if a.err != nil {
			return p.fail("cm_accept", a.err)
		}
		return p.sample("cm_accept", a.d)
	})
}
