package cmloop

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// TestConnectRetriesRefused: Connect tries again while the kernel refuses
// (ECONNREFUSED, or EADDRNOTAVAIL on the dialing side), up to refusedTries
// tries, and not after another error or once its context is done. The
// tries are stand-ins (no device); the QPs are nil, so no reset is made
// (the rig's siw tests dial for real).
func TestConnectRetriesRefused(t *testing.T) {
	refused := fmt.Errorf("rdmacm.Dial: %w", unix.ECONNREFUSED)
	other := fmt.Errorf("rdmacm.Dial: %w", unix.ETIMEDOUT)
	inUse := fmt.Errorf("rdmacm.Dial: rdmacm: Connect: %w", unix.EADDRNOTAVAIL)
	for _, tc := range []struct {
		name     string
		results  []error // the tries' errors, in order; nil is a connection
		cancel   bool    // the context is cancelled before Connect
		wantErr  error
		wantRuns int
	}{
		{"first try", []error{nil}, false, nil, 1},
		{"refused once", []error{refused, nil}, false, nil, 2},
		{"refused twice", []error{refused, refused, nil}, false, nil, 3},
		{"refused every time", []error{refused, refused, refused, nil}, false, unix.ECONNREFUSED, refusedTries},
		{"another error", []error{other, nil}, false, unix.ETIMEDOUT, 1},
		{"address pair in use", []error{inUse, nil}, false, nil, 2},
		{"in use, then refused, every time", []error{inUse, refused, inUse, nil}, false, unix.EADDRNOTAVAIL, refusedTries},
		{"context done", []error{refused, nil}, true, unix.ECONNREFUSED, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			connectTry = func(context.Context, netip.Addr, *rdmacm.Config, *rdmacm.Config, *uverbs.QP) (*rdmacm.Conn, *rdmacm.Conn, error) {
				err := tc.results[runs]
				runs++
				return nil, nil, err
			}
			defer func() { connectTry = connectOnce }()
			ctx, cancel := context.WithCancel(context.Background())
			if tc.cancel {
				cancel()
			}
			defer cancel()
			_, _, err := Connect(ctx, netip.MustParseAddr("127.0.0.1"), nil, nil, nil)
			if (tc.wantErr == nil) != (err == nil) || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Connect = %v, want %v", err, tc.wantErr)
			}
			if runs != tc.wantRuns {
				t.Errorf("%d tries, want %d", runs, tc.wantRuns)
			}
		})
	}
}
