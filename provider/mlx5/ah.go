package mlx5

import (
	"github.com/goverbs/goverbs/abi"
	"github.com/goverbs/goverbs/provider"
)

// ah is an address handle: the address vector a UD WQE carries, built once.
type ah struct {
	av [avSize]byte
}

// Close releases nothing: the AV lives on the Go heap and the kernel AH is
// destroyed by uverbs.
func (a *ah) Close() error { return nil }

// Address vector bits (the AV's grh_gid_fl word and fl_mlid byte; PRM
// "address path", as rdma-core's mlx5_create_ah fills them).
const (
	avGRH         = 1 << 30 // grh_gid_fl: a GRH follows
	avSGIDShift   = 20      // grh_gid_fl: source GID index
	avFlowMask    = 0xfffff // grh_gid_fl: flow label
	avPathBitMask = 0x7f    // fl_mlid: source path bits
)

// buildAV encodes a for a UD WQE. dmac is the destination MAC the kernel
// resolved (RoCE), or zero.
func buildAV(a *provider.AHAttr, dmac [6]byte) (av [avSize]byte) {
	roce := dmac != [6]byte{}
	if roce {
		av[avStatRateSl] = a.StaticRate<<4 | (a.SL&7)<<1
		copy(av[avRmac:], dmac[:])
	} else {
		av[avStatRateSl] = a.StaticRate<<4 | a.SL&0xf
	}
	av[avFlMlid] = a.SrcPathBits & avPathBitMask
	be.PutUint16(av[avRlid:], a.DLID)
	if a.IsGlobal {
		av[avTclass] = a.TrafficClass
		av[avHopLimit] = a.HopLimit
		be.PutUint32(av[avGrhGidFl:], avGRH|uint32(a.SGIDIndex)<<avSGIDShift|a.FlowLabel&avFlowMask)
		copy(av[avRgid:], a.DGID[:])
	}
	return av
}

// ahSetup is a CREATE_AH in progress.
type ahSetup struct {
	attr provider.AHAttr
	out  []byte // mlx5_ib_create_ah_resp, when the kernel takes one
}

func (s *ahSetup) Udata() (in, out []byte) { return nil, s.out }

func (s *ahSetup) Complete(provider.AHCreated) (provider.AH, error) {
	var dmac [6]byte
	if len(s.out) > 0 {
		var resp abi.Mlx5IbCreateAhResp
		copy(abi.Bytes(&resp), s.out)
		dmac = resp.Dmac
	}
	return &ah{av: buildAV(&s.attr, dmac)}, nil
}

func (s *ahSetup) Abort() {}
