package abi

import (
	"reflect"
	"testing"
)

// TestUcmaNotes checks the generated rdma_cm (ucma) structs against the
// sizes and offsets written down independently in ABI-NOTES.md §6: the
// command bodies (without the 8-byte header), conn_param's members and
// event_resp's.
func TestUcmaNotes(t *testing.T) {
	for _, c := range []struct {
		v    any
		size uintptr
	}{
		{RdmaUcmCmdHdr{}, 8},
		{RdmaUcmCreateId{}, 24},
		{RdmaUcmDestroyId{}, 16},
		{RdmaUcmBindIp{}, 40},
		{RdmaUcmResolveIp{}, 64},
		{RdmaUcmResolveRoute{}, 8},
		{RdmaUcmConnect{}, 288},
		{RdmaUcmListen{}, 8},
		{RdmaUcmAccept{}, 296},
		{RdmaUcmReject{}, 264},
		{RdmaUcmDisconnect{}, 4},
		{RdmaUcmInitQpAttr{}, 16},
		{RdmaUcmGetEvent{}, 8},
		{RdmaUcmEventResp{}, 336},
		{RdmaUcmSetOption{}, 24},
		{RdmaUcmQuery{}, 16},
		{RdmaUcmBind{}, 136},
		{RdmaUcmResolveAddr{}, 272},
		{RdmaUcmConnParam{}, 272},
		{IbUverbsQpAttr{}, 144},
	} {
		if typ := reflect.TypeOf(c.v); typ.Size() != c.size {
			t.Errorf("%s: %d bytes, ABI-NOTES says %d", typ.Name(), typ.Size(), c.size)
		}
	}
	for _, c := range []struct {
		typ  reflect.Type
		path string
		off  uintptr
	}{
		{reflect.TypeFor[RdmaUcmConnParam](), "QpNum", 0},
		{reflect.TypeFor[RdmaUcmConnParam](), "Qkey", 4},
		{reflect.TypeFor[RdmaUcmConnParam](), "PrivateData", 8},
		{reflect.TypeFor[RdmaUcmConnParam](), "PrivateDataLen", 264},
		{reflect.TypeFor[RdmaUcmConnParam](), "Srq", 265},
		{reflect.TypeFor[RdmaUcmConnParam](), "ResponderResources", 266},
		{reflect.TypeFor[RdmaUcmConnParam](), "InitiatorDepth", 267},
		{reflect.TypeFor[RdmaUcmConnParam](), "FlowControl", 268},
		{reflect.TypeFor[RdmaUcmConnParam](), "RetryCount", 269},
		{reflect.TypeFor[RdmaUcmConnParam](), "RnrRetryCount", 270},
		{reflect.TypeFor[RdmaUcmConnParam](), "Valid", 271},
		{reflect.TypeFor[RdmaUcmEventResp](), "Uid", 0},
		{reflect.TypeFor[RdmaUcmEventResp](), "Id", 8},
		{reflect.TypeFor[RdmaUcmEventResp](), "Event", 12},
		{reflect.TypeFor[RdmaUcmEventResp](), "Status", 16},
		{reflect.TypeFor[RdmaUcmEventResp](), "Param", 20},
		{reflect.TypeFor[RdmaUcmEventResp](), "Ece", 328},
		{reflect.TypeFor[RdmaUcmAccept](), "ConnParam", 8},
		{reflect.TypeFor[RdmaUcmAccept](), "Id", 280},
		{reflect.TypeFor[RdmaUcmConnect](), "Id", 272},
		{reflect.TypeFor[RdmaUcmReject](), "PrivateData", 8},
	} {
		if off, _ := goOffset(t, c.typ, c.path); off != c.off {
			t.Errorf("%s.%s at %d, ABI-NOTES says %d", c.typ.Name(), c.path, off, c.off)
		}
	}
}
