package rdmacm_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/rdmacm"
)

// A server and a client on the same RoCE address (the rig's rxe0): the
// client's private data reaches the server's ConnRequest, the server's
// reaches the client's Conn.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := rdmacm.Listen(netip.MustParseAddrPort("10.0.2.15:0"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	accepted, served := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(served)
		r, err := l.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("request: %q\n", r.PrivateData()[:5])
		c, err := r.Accept(ctx, []byte("world"))
		if err != nil {
			log.Fatal(err)
		}
		close(accepted)
		<-c.Done() // until the client disconnects
		c.Close()
	}()
	c, err := rdmacm.Dial(ctx, netip.AddrPortFrom(netip.MustParseAddr("10.0.2.15"), l.Addr().Port()),
		&rdmacm.Config{PrivateData: []byte("hello")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("accepted: %q on %s, QP %v\n", c.PeerData[:5], c.ID.Device().Name, c.QP.State())
	<-accepted // the server's side is established too: closing now cancels nothing of its
	c.Close()
	<-served
}
