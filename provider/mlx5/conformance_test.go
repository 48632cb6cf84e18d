package mlx5_test

import (
	"testing"

	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/test/conformance"
	"github.com/goverbs/goverbs/uverbs"
)

// TestConformance runs the provider-agnostic verbs suite on the device
// model, unchanged, in loopback and across two modelled devices, and in
// each configuration the provider must handle: dynamic
// UARs (a current kernel), static UARs (a kernel without the UAR object),
// every command by write() (no ioctl at all, or by policy), 128-byte CQEs
// and doorbells without BlueFlame, and an old kernel that knows neither
// DEVX nor lib_caps nor CQE version 1 (CQEs found by QP number).
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name   string
		model  model.Options
		open   uverbs.OpenOptions
		lid    bool
		cqe128 bool
		peer   bool
	}{
		{name: "dynamic-uar"},
		{name: "two-devices", peer: true},
		{name: "lid-routed-two-devices", peer: true, lid: true},
		{name: "static-uar", model: model.Options{NoDynamicUAR: true}},
		{name: "no-ioctl", model: model.Options{NoIoctl: true}},
		{name: "no-invoke-write", model: model.Options{NoInvokeWrite: true}},
		{name: "write-policy", open: uverbs.OpenOptions{Transport: uverbs.PolicyWrite}},
		{name: "cqe128-no-blueflame", model: model.Options{NoBlueFlame: true}, cqe128: true},
		// A device without memory windows (no imaicl): the window tests
		// check the refusal.
		{name: "no-mem-windows", model: model.Options{NoMemWindows: true}},
		// A 4.x kernel: no DEVX, no lib_caps (static UARs), CQE version 0.
		{name: "old-kernel-cqe-v0", model: model.Options{RejectDEVX: true, KnownReqLen: 16, NoDynamicUAR: true, NoWC: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.cqe128 {
				t.Setenv("MLX5_CQE_SIZE", "128")
			}
			f := model.NewFabric()
			d, dev := newModel(t, f, c.model)
			gid := d.GID(1)
			// rdma-core's mlx5_bind_mw posts a type 1 bind as a BIND_MW
			// work request (a UMR WQE with QPN 0xffffff).
			o := conformance.Options{GIDIndex: 1, GID: &gid, LIDRouted: c.lid, DoorbellsPerPostSend: 0, OpenOptions: c.open,
				MWType1ByPostSend: true, Skip: map[string]string{}}
			if c.model.NoIoctl || c.open.Transport == uverbs.PolicyWrite {
				// Without QUERY_GID_TABLE the GID table comes from sysfs,
				// which the model does not fake.
				o.Skip["AHFromWC"] = "the model has no sysfs GID table for the write-only path"
			}
			devs := []*model.Device{d}
			if c.peer {
				p, pdev := newModel(t, f, c.model)
				pgid := p.GID(1)
				o.Peer, o.PeerGIDIndex, o.PeerGID = &pdev, 1, &pgid
				devs = append(devs, p)
			}
			// The model allocates as it executes requests, in this
			// process: the allocation counts hold it.
			o.HoldDevice = func() func() {
				for _, x := range devs {
					x.Pause()
				}
				return func() {
					for _, x := range devs {
						x.Resume()
					}
				}
			}
			conformance.Run(t, dev, o)
			var s model.Stats
			for _, x := range devs {
				xs := x.Stats()
				t.Logf("model %s: %+v", x.Name(), xs)
				s.MissedDoorbells += xs.MissedDoorbells
				s.MissedArms += xs.MissedArms
				s.Doorbells += xs.Doorbells
				s.BlueFlames += xs.BlueFlames
				s.Arms += xs.Arms
				s.Events += xs.Events
			}
			if s.MissedDoorbells != 0 || s.MissedArms != 0 {
				t.Errorf("doorbells without their UAR write: %d sends, %d arms", s.MissedDoorbells, s.MissedArms)
			}
			if s.Doorbells == 0 || s.Arms == 0 || s.Events == 0 {
				t.Errorf("the model saw no doorbells, arms or events: %+v", s)
			}
			if !c.model.NoBlueFlame && s.BlueFlames == 0 {
				t.Errorf("no BlueFlame copy seen")
			}
		})
	}
}
