package mlx5dv

import "github.com/goverbs/goverbs/abi"

// Member returns the C offset and size of member (a C path such as
// "qpn_ds" or "key.qkey.qkey") of struct cstruct, as gcc laid it out, and
// whether the table has it. Layout tests of the provider and the device
// model check their named offsets with it.
func Member(cstruct, member string) (off, size uintptr, ok bool) {
	for _, l := range StructLayouts {
		if l.CName != cstruct {
			continue
		}
		for _, f := range l.Fields {
			if f.CName == member {
				return f.Offset, f.Size, true
			}
		}
	}
	return 0, 0, false
}

// Sizeof returns sizeof(struct cstruct) and whether the table has it.
func Sizeof(cstruct string) (uintptr, bool) {
	for _, l := range StructLayouts {
		if l.CName == cstruct {
			return l.Size, true
		}
	}
	return 0, false
}

// Layout returns the whole layout of struct cstruct.
func Layout(cstruct string) (abi.StructLayout, bool) {
	for _, l := range StructLayouts {
		if l.CName == cstruct {
			return l, true
		}
	}
	return abi.StructLayout{}, false
}
