package abi

// The structs (ztypes.go), constants (zconst.go) and C layout table
// (zlayout.go, zlayout_test.go) are generated from the uapi headers in
// /usr/include/rdma (Debian: linux-libc-dev) by abi/internal/abigen, which
// compiles them with gcc and reads the DWARF. gcc is needed only here.
//
//go:generate go run ./internal/abigen
