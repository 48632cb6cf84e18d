package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/goverbs/goverbs/rdmacm"
)

// runCM is the loop of the connection manager's verbs (cm_id, cm_resolve)
// on one event channel, as librdmacm's programs use one.
func runCM(verb string, n int, args []string) error {
	ch, err := rdmacm.Open()
	if err != nil {
		return err
	}
	defer ch.Close()
	var f func() error
	switch verb {
	case "cm_id":
		f = func() error {
			id, err := ch.CreateID(rdmacm.PSTCP)
			if err != nil {
				return err
			}
			return id.Close()
		}
	case "cm_resolve":
		if len(args) != 1 {
			return errors.New("cm_resolve needs ADDR")
		}
		dst, err := netip.ParseAddr(args[0])
		if err != nil {
			return err
		}
		ctx := context.Background()
		f = func() error {
			id, err := ch.CreateID(rdmacm.PSTCP)
			if err != nil {
				return err
			}
			err = id.ResolveAddr(ctx, netip.AddrPort{}, netip.AddrPortFrom(dst, 7471))
			if err == nil {
				err = id.ResolveRoute(ctx)
			}
			return errors.Join(err, id.Close())
		}
	default:
		return fmt.Errorf("no verb %s", verb)
	}
	return loop(verb, n, f)
}
