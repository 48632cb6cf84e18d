package uverbs

import (
	"reflect"
	"testing"
)

func TestConnectSteps(t *testing.T) {
	gidA := [16]byte{15: 1}
	gidB := [16]byte{15: 2}
	local := Endpoint{QPN: 17, PSN: 0x1abcdef, LID: 3, GID: gidA, GIDIndex: 1, Port: 1, MTU: MTU4096}
	remote := Endpoint{QPN: 18, PSN: 0x123456, LID: 4, GID: gidB, GIDIndex: 7, Port: 2, MTU: MTU1024}
	for _, c := range []struct {
		name          string
		typ           QPType
		local, remote Endpoint
		o             ConnectOptions
		want          []QPTransition
	}{{
		name: "RC defaults", typ: QPTypeRC, local: local, remote: remote,
		o: ConnectOptions{Access: AccessRemoteWrite},
		want: []QPTransition{
			{QPAttr{State: QPStateInit, PortNum: 1, AccessFlags: AccessRemoteWrite},
				QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
			{QPAttr{State: QPStateRTR, PathMTU: MTU1024, DestQPN: 18, RQPSN: 0x123456, MaxDestRDAtomic: 1, MinRNRTimer: 12,
				AH: AHAttr{DLID: 4, PortNum: 1, GRH: &GlobalRoute{DGID: gidB, SGIDIndex: 1, HopLimit: 64}}},
				QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRDAtomic | QPAttrMinRNRTimer},
			{QPAttr{State: QPStateRTS, SQPSN: 0xabcdef, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1},
				QPAttrState | QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRDAtomic},
		},
	}, {
		name: "RC explicit, LID-routed, zeros", typ: QPTypeRC, local: local, remote: Endpoint{QPN: 9, PSN: 5, LID: 8},
		o: ConnectOptions{MTU: MTU2048, PKeyIndex: 2, SL: 3, MaxRDAtomic: 4, MaxDestRDAtomic: -1, Timeout: -1,
			RetryCnt: 3, RNRRetry: -1, MinRNRTimer: 1},
		want: []QPTransition{
			{QPAttr{State: QPStateInit, PortNum: 1, PKeyIndex: 2},
				QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
			{QPAttr{State: QPStateRTR, PathMTU: MTU2048, DestQPN: 9, RQPSN: 5, MinRNRTimer: 1,
				AH: AHAttr{DLID: 8, SL: 3, PortNum: 1}},
				QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRDAtomic | QPAttrMinRNRTimer},
			{QPAttr{State: QPStateRTS, SQPSN: 0xabcdef, RetryCnt: 3, MaxRDAtomic: 4},
				QPAttrState | QPAttrSQPSN | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRDAtomic},
		},
	}, {
		name: "UC, no MTU anywhere", typ: QPTypeUC, local: Endpoint{Port: 2, PSN: 1}, remote: Endpoint{QPN: 5, GID: gidB},
		o: ConnectOptions{Access: AccessRemoteWrite, HopLimit: 1, TrafficClass: 4, FlowLabel: 9},
		want: []QPTransition{
			{QPAttr{State: QPStateInit, PortNum: 2, AccessFlags: AccessRemoteWrite},
				QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags},
			{QPAttr{State: QPStateRTR, PathMTU: MTU1024, DestQPN: 5,
				AH: AHAttr{PortNum: 2, GRH: &GlobalRoute{DGID: gidB, HopLimit: 1, TrafficClass: 4, FlowLabel: 9}}},
				QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN},
			{QPAttr{State: QPStateRTS, SQPSN: 1}, QPAttrState | QPAttrSQPSN},
		},
	}, {
		name: "UD", typ: QPTypeUD, local: local, remote: remote, o: ConnectOptions{QKey: 0x11111111, Access: AccessRemoteWrite},
		want: []QPTransition{
			{QPAttr{State: QPStateInit, PortNum: 1, QKey: 0x11111111}, QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrQKey},
			{QPAttr{State: QPStateRTR}, QPAttrState},
			{QPAttr{State: QPStateRTS, SQPSN: 0xabcdef}, QPAttrState | QPAttrSQPSN},
		},
	}} {
		got := ConnectSteps(c.typ, c.local, c.remote, c.o)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d steps, want %d", c.name, len(got), len(c.want))
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], c.want[i]) {
				t.Errorf("%s: step %d:\n got %+v (GRH %+v)\nwant %+v (GRH %+v)", c.name, i,
					got[i], got[i].Attr.AH.GRH, c.want[i], c.want[i].Attr.AH.GRH)
			}
		}
	}
	// The path MTU is the smaller side's.
	if m := pathMTU(Endpoint{MTU: MTU1024}, Endpoint{MTU: MTU4096}, ConnectOptions{}); m != MTU1024 {
		t.Errorf("pathMTU(1024, 4096) = %v", m)
	}
	if m := pathMTU(Endpoint{}, Endpoint{MTU: MTU512}, ConnectOptions{}); m != MTU512 {
		t.Errorf("pathMTU(none, 512) = %v", m)
	}
}
