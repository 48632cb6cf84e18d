// Barriers and MMIO stores for arm64; see doorbell_unsafe.go for what each
// function is for and why it uses these instructions.
//
// The Go assembler takes the DMB/DSB option as its 4-bit CRm value:
// 1 OSHLD, 2 OSHST, 3 OSH, 9 ISHLD, 10 ISHST, 11 ISH, 13 LD, 14 ST, 15 SY.

#include "textflag.h"

// func ToDevice()
// DMB OSHST: earlier stores before later stores, outer shareable.
TEXT ·ToDevice(SB), NOSPLIT|NOFRAME, $0-0
	DMB	$2
	RET

// func FromDevice()
// DMB OSHLD: earlier loads before later loads and stores, outer shareable.
TEXT ·FromDevice(SB), NOSPLIT|NOFRAME, $0-0
	DMB	$1
	RET

// func FlushWC()
// DSB ST: wait until every earlier store has completed.
TEXT ·FlushWC(SB), NOSPLIT|NOFRAME, $0-0
	DSB	$14
	RET

// func Store64BE(addr unsafe.Pointer, v uint64)
TEXT ·Store64BE(SB), NOSPLIT|NOFRAME, $0-16
	MOVD	addr+0(FP), R0
	MOVD	v+8(FP), R1
	REV	R1, R1
	MOVD	R1, (R0)
	RET

// func Store32BE(addr unsafe.Pointer, v uint32)
TEXT ·Store32BE(SB), NOSPLIT|NOFRAME, $0-12
	MOVD	addr+0(FP), R0
	MOVWU	v+8(FP), R1
	REVW	R1, R1
	MOVW	R1, (R0)
	RET

// COPY64 copies the 64 bytes at R1 to R0: all eight words loaded first,
// then stored pairwise in ascending order (Copy64's body; CopyWC64's
// between its DSBs).
#define COPY64 \
	LDP	0(R1), (R2, R3); \
	LDP	16(R1), (R4, R5); \
	LDP	32(R1), (R6, R7); \
	LDP	48(R1), (R8, R9); \
	STP	(R2, R3), 0(R0); \
	STP	(R4, R5), 16(R0); \
	STP	(R6, R7), 32(R0); \
	STP	(R8, R9), 48(R0)

// func Copy64(dst, src unsafe.Pointer)
TEXT ·Copy64(SB), NOSPLIT|NOFRAME, $0-16
	MOVD	dst+0(FP), R0
	MOVD	src+8(FP), R1
	COPY64
	RET

// func CopyWC64(dst, src unsafe.Pointer)
// DSB ST, Copy64's loads and pairwise stores, DSB ST.
TEXT ·CopyWC64(SB), NOSPLIT|NOFRAME, $0-16
	MOVD	dst+0(FP), R0
	MOVD	src+8(FP), R1
	DSB	$14
	COPY64
	DSB	$14
	RET
