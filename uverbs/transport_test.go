package uverbs

import (
	"testing"

	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider/mlx5"
)

// The uverbs names of kernel numbers are the generated ABI's numbers.
func TestConstantsMatchABI(t *testing.T) {
	for _, c := range []struct {
		got  uint64
		want uint64
		name string
	}{
		{uint64(DriverUnknown), abi.RDMA_DRIVER_UNKNOWN, "DriverUnknown"},
		{uint64(DriverMLX5), abi.RDMA_DRIVER_MLX5, "DriverMLX5"},
		{uint64(DriverMLX4), abi.RDMA_DRIVER_MLX4, "DriverMLX4"},
		{uint64(DriverCXGB3), abi.RDMA_DRIVER_CXGB3, "DriverCXGB3"},
		{uint64(DriverCXGB4), abi.RDMA_DRIVER_CXGB4, "DriverCXGB4"},
		{uint64(DriverMTHCA), abi.RDMA_DRIVER_MTHCA, "DriverMTHCA"},
		{uint64(DriverBNXTRE), abi.RDMA_DRIVER_BNXT_RE, "DriverBNXTRE"},
		{uint64(DriverOCRDMA), abi.RDMA_DRIVER_OCRDMA, "DriverOCRDMA"},
		{uint64(DriverNES), abi.RDMA_DRIVER_NES, "DriverNES"},
		{uint64(DriverI40IW), abi.RDMA_DRIVER_I40IW, "DriverI40IW"},
		{uint64(DriverIRDMA), abi.RDMA_DRIVER_IRDMA, "DriverIRDMA"},
		{uint64(DriverVMWPVRDMA), abi.RDMA_DRIVER_VMW_PVRDMA, "DriverVMWPVRDMA"},
		{uint64(DriverQEDR), abi.RDMA_DRIVER_QEDR, "DriverQEDR"},
		{uint64(DriverHNS), abi.RDMA_DRIVER_HNS, "DriverHNS"},
		{uint64(DriverUSNIC), abi.RDMA_DRIVER_USNIC, "DriverUSNIC"},
		{uint64(DriverRXE), abi.RDMA_DRIVER_RXE, "DriverRXE"},
		{uint64(DriverHFI1), abi.RDMA_DRIVER_HFI1, "DriverHFI1"},
		{uint64(DriverQIB), abi.RDMA_DRIVER_QIB, "DriverQIB"},
		{uint64(DriverEFA), abi.RDMA_DRIVER_EFA, "DriverEFA"},
		{uint64(DriverSIW), abi.RDMA_DRIVER_SIW, "DriverSIW"},
		{uint64(DriverERDMA), abi.RDMA_DRIVER_ERDMA, "DriverERDMA"},
		{uint64(NodeCA), abi.RDMA_NODE_IB_CA, "NodeCA"},
		{uint64(NodeSwitch), abi.RDMA_NODE_IB_SWITCH, "NodeSwitch"},
		{uint64(NodeRouter), abi.RDMA_NODE_IB_ROUTER, "NodeRouter"},
		{uint64(NodeRNIC), abi.RDMA_NODE_RNIC, "NodeRNIC"},
		{uint64(NodeUSNIC), abi.RDMA_NODE_USNIC, "NodeUSNIC"},
		{uint64(NodeUSNICUDP), abi.RDMA_NODE_USNIC_UDP, "NodeUSNICUDP"},
		{uint64(NodeUnspecified), abi.RDMA_NODE_UNSPECIFIED, "NodeUnspecified"},
		{uint64(CommandNone), uint64(abi.TransportNone), "CommandNone"},
		{uint64(CommandIoctl), uint64(abi.TransportIoctl), "CommandIoctl"},
		{uint64(CommandWrite), uint64(abi.TransportWrite), "CommandWrite"},
		{uint64(PolicyAuto), uint64(PolicyAuto), "PolicyAuto"},
		{uint64(PolicyIoctl), uint64(PolicyIoctl), "PolicyIoctl"},
		{uint64(PolicyWrite), uint64(PolicyWrite), "PolicyWrite"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, the ABI says %d", c.name, c.got, c.want)
		}
	}
	for tr := abi.TransportNone; tr <= abi.TransportWrite; tr++ {
		if CommandTransport(tr).String() != tr.String() {
			t.Errorf("CommandTransport(%d) = %q, abi says %q", tr, CommandTransport(tr), tr)
		}
	}
	if CommandIoctl.String() != "ioctl" || PolicyWrite.String() != "write" || CommandPolicy(9).String() != "policy(9)" {
		t.Errorf("CommandPolicy strings: %v %v", PolicyWrite, CommandPolicy(9))
	}
}

// OpenOptions.MLX5 reaches the mlx5 provider; other drivers are unchanged.
func TestDriverOptions(t *testing.T) {
	d := driverWith(DriverMLX5, OpenOptions{MLX5: MLX5Options{CQESize: 128, NoBlueFlame: true}})
	if m, ok := d.(mlx5.Driver); !ok || m.CQESize != 128 || !m.NoBlueFlame {
		t.Errorf("mlx5 driver with options = %#v", d)
	}
	if m, ok := driverWith(DriverMLX5, OpenOptions{}).(mlx5.Driver); !ok || m != (mlx5.Driver{}) {
		t.Errorf("mlx5 driver without options = %#v", m)
	}
	if d := driverWith(DriverRXE, OpenOptions{MLX5: MLX5Options{CQESize: 128}}); d != driverFor(DriverRXE) {
		t.Errorf("rxe driver = %#v", d)
	}
}

// TestNoteTransportFollowsChanges: the record's cache (transportSeen)
// never hides a change of a verb's transport, nor a verb that shares its
// cache slot with another.
func TestNoteTransportFollowsChanges(t *testing.T) {
	c := &Context{}
	verbs := []string{"AllocPD", "ModifyQP", "QueryGID"}
	for round, tr := range []abi.Transport{abi.TransportIoctl, abi.TransportWrite, abi.TransportWrite, abi.TransportIoctl, abi.TransportNone} {
		for _, v := range verbs {
			c.noteTransport(v, tr)
		}
		got := c.Transports()
		for _, v := range verbs {
			if got[v] != CommandTransport(tr) {
				t.Fatalf("round %d: Transports()[%s] = %v, want %v", round, v, got[v], tr)
			}
		}
	}
	// Every verb in one slot: each note still reaches the record.
	for i := range c.transportSeen {
		c.transportSeen[i].Store(uint64(stringAddr("AllocPD"))<<2 | uint64(abi.TransportWrite))
	}
	c.noteTransport("ModifyQP", abi.TransportWrite)
	if got := c.Transports()["ModifyQP"]; got != CommandWrite {
		t.Fatalf("ModifyQP after a foreign slot: %v, want write", got)
	}
}
