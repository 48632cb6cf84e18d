package main

import (
	"fmt"
	"io"

	"github.com/goverbs/goverbs/internal/xsrq"
	"github.com/goverbs/goverbs/uverbs"
)

// xrcdPath is the file ibv_xsrq_pingpong ties its XRC domain to.
const xrcdPath = "/tmp/xrc_domain"

// runXSRQ is the xsrq mode: ibv_xsrq_pingpong (package internal/xsrq).
// On a device without XRC (rxe, siw) it fails as rdma-core's does, at
// "Couldn't Open the XRC Domain", with goverbs' ErrNotSupported.
func runXSRQ(c config, out io.Writer) error {
	return xsrq.Run(xsrq.Config{TCPPort: c.tcpPort, IBPort: c.ibPort, Size: c.size, MTU: c.mtu, Clients: c.clients,
		NumTests: c.iters, SL: c.sl, Events: c.events, GIDIndex: c.gidx, Server: c.server, XRCDPath: xrcdPath,
		Open: func() (*uverbs.Context, error) { return openDevice(c.ibDev) }}, out)
}

// openDevice opens the device named name, or the first one for "".
func openDevice(name string) (*uverbs.Context, error) {
	devs, err := uverbs.Devices()
	if err != nil {
		return nil, failf("Failed to get IB devices list: %v", err)
	}
	for i := range devs {
		if name == "" || devs[i].Name == name {
			ctx, err := uverbs.Open(devs[i])
			if err != nil {
				return nil, failf("Couldn't get context for %s: %v", devs[i].Name, err)
			}
			return ctx, nil
		}
	}
	return nil, failf("IB device %s not found", name)
}

// usageXSRQ prints ibv_xsrq_pingpong's usage text.
func usageXSRQ(w io.Writer) {
	argv0 := "pingpong xsrq"
	fmt.Fprintf(w, "Usage:\n")
	fmt.Fprintf(w, "  %s            start a server and wait for connection\n", argv0)
	fmt.Fprintf(w, "  %s <host>     connect to server at <host>\n", argv0)
	fmt.Fprintf(w, "\nOptions:\n")
	fmt.Fprintf(w, "  -p, --port=<port>      listen on/connect to port <port> (default 18515)\n")
	fmt.Fprintf(w, "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n")
	fmt.Fprintf(w, "  -i, --ib-port=<port>   use port <port> of IB device (default 1)\n")
	fmt.Fprintf(w, "  -s, --size=<size>      size of message to exchange (default 4096)\n")
	fmt.Fprintf(w, "  -m, --mtu=<size>       path MTU (default 1024)\n")
	fmt.Fprintf(w, "  -c, --clients=<n>      number of clients (on server only, default 1)\n")
	fmt.Fprintf(w, "  -n, --num_tests=<n>    number of tests per client (default 5)\n")
	fmt.Fprintf(w, "  -l, --sl=<sl>          service level value\n")
	fmt.Fprintf(w, "  -e, --events           sleep on CQ events (default poll)\n")
	fmt.Fprintf(w, "  -o, --odp\t\t    use on demand paging\n")
	fmt.Fprintf(w, "  -g, --gid-idx=<gid index> local port gid index\n")
}
