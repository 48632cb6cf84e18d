package mlx5_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
	"golang.org/x/sys/unix"
)

// TestXRCD: XRC domains on the model, with the kernel's rules of
// ib_uverbs_open_xrcd: a domain without a file is the opener's own; one
// tied to a file is shared by every open of that inode on the device
// (another context included), needs O_CREAT to come into being (EAGAIN
// without), refuses O_EXCL once it exists (EINVAL), and lives until its
// last open closes. A device without XRC is refused by the capability
// check.
func TestXRCD(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	n := openNode(t, d, dev, uverbs.OpenOptions{})
	a, err := n.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if a.CapFlags&uverbs.DeviceXRC == 0 {
		t.Fatalf("the model reports no XRC: %v", a.CapFlags)
	}
	own, err := n.ctx.OpenXRCD(uverbs.XRCDOptions{})
	if err != nil {
		t.Fatalf("OpenXRCD without a file: %v", err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "xrc"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := n.ctx.OpenXRCD(uverbs.XRCDOptions{File: f}); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("OpenXRCD of a file without a domain, no Create: %v, want EAGAIN", err)
	}
	x1, err := n.ctx.OpenXRCD(uverbs.XRCDOptions{File: f, Create: true, Exclusive: true})
	if err != nil {
		t.Fatalf("OpenXRCD(Create, Exclusive): %v", err)
	}
	if _, err := n.ctx.OpenXRCD(uverbs.XRCDOptions{File: f, Create: true, Exclusive: true}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("OpenXRCD(Exclusive) of an existing domain: %v, want EINVAL", err)
	}
	if _, err := n.ctx.OpenXRCD(uverbs.XRCDOptions{Exclusive: true}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Exclusive without Create: %v, want EINVAL", err)
	}
	n2 := openNode(t, d, dev, uverbs.OpenOptions{Transport: uverbs.PolicyWrite})
	x2, err := n2.ctx.OpenXRCD(uverbs.XRCDOptions{File: f})
	if err != nil {
		t.Fatalf("OpenXRCD of the file's domain from a second context: %v", err)
	}
	if tied, opens := d.XRCDomains(); tied != 1 || opens != 3 {
		t.Errorf("the device holds %d tied domains in %d opens, want 1 in 3", tied, opens)
	}
	for _, x := range []*uverbs.XRCD{x1, own} {
		if err := x.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if err := x1.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if tied, opens := d.XRCDomains(); tied != 1 || opens != 1 {
		t.Errorf("after two closes: %d tied domains in %d opens, want 1 in 1", tied, opens)
	}
	if err := x2.Close(); err != nil {
		t.Fatal(err)
	}
	if tied, _ := d.XRCDomains(); tied != 0 {
		t.Errorf("the file's domain outlived its last open")
	}

	nd, ndev := newModel(t, nil, model.Options{NoXRC: true})
	nn := openNode(t, nd, ndev, uverbs.OpenOptions{})
	if _, err := nn.ctx.OpenXRCD(uverbs.XRCDOptions{}); !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("OpenXRCD on a device without XRC: %v, want ErrNotSupported", err)
	}
}
