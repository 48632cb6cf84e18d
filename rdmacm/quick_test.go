package rdmacm

import (
	"testing"

	"github.com/goverbs/goverbs/abi"
)

// TestQuickCommand: the connection commands are raw syscalls only on an ID
// whose device runs the IB CM (they post a MAD there; on iWARP, or before
// the device is known, they may block on a TCP socket); the others keep
// their rule whatever the device.
func TestQuickCommand(t *testing.T) {
	for _, tc := range []struct {
		cmd  uint32
		name string
		ib   bool // quick on an IB CM device
		iw   bool // quick otherwise
	}{
		{abi.RDMA_USER_CM_CMD_CONNECT, "CONNECT", true, false},
		{abi.RDMA_USER_CM_CMD_ACCEPT, "ACCEPT", true, false},
		{abi.RDMA_USER_CM_CMD_REJECT, "REJECT", true, false},
		{abi.RDMA_USER_CM_CMD_DISCONNECT, "DISCONNECT", true, false},
		{abi.RDMA_USER_CM_CMD_LISTEN, "LISTEN", false, false},
		{abi.RDMA_USER_CM_CMD_JOIN_MCAST, "JOIN_MCAST", false, false},
		{abi.RDMA_USER_CM_CMD_MIGRATE_ID, "MIGRATE_ID", false, false},
		{abi.RDMA_USER_CM_CMD_INIT_QP_ATTR, "INIT_QP_ATTR", true, true},
		{abi.RDMA_USER_CM_CMD_DESTROY_ID, "DESTROY_ID", true, true},
		{abi.RDMA_USER_CM_CMD_RESOLVE_ROUTE, "RESOLVE_ROUTE", true, true},
	} {
		if got := quickCommand(tc.cmd, true); got != tc.ib {
			t.Errorf("%s on an IB CM device: quick %v, want %v", tc.name, got, tc.ib)
		}
		if got := quickCommand(tc.cmd, false); got != tc.iw {
			t.Errorf("%s on iWARP or an unknown device: quick %v, want %v", tc.name, got, tc.iw)
		}
	}
}
