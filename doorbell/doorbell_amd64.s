// Barriers and MMIO stores for amd64; see doorbell_unsafe.go for what each
// function is for and why it uses these instructions.

#include "textflag.h"

// func ToDevice()
// A call is a compiler barrier; x86 TSO orders the stores themselves.
// func FromDevice()
TEXT ·FromDevice(SB), NOSPLIT, $0-0
	LFENCE
	RET

// func FlushWC()
TEXT ·FlushWC(SB), NOSPLIT, $0-0
	SFENCE
	RET

// func Store64BE(addr unsafe.Pointer, v uint64)
TEXT ·Store64BE(SB), NOSPLIT, $0-16
	MOVQ	addr+0(FP), AX
	MOVQ	v+8(FP), BX
	BSWAPQ	BX
	MOVQ	BX, (AX)
	RET

// func Store32BE(addr unsafe.Pointer, v uint32)
TEXT ·Store32BE(SB), NOSPLIT, $0-12
	MOVQ	addr+0(FP), AX
	MOVL	v+8(FP), BX
	BSWAPL	BX
	MOVL	BX, (AX)
	RET

// COPY64 copies the 64 bytes at SI to DI: all eight words loaded first,
// then stored in ascending order (Copy64's body; CopyWC64's between its
// fences).
#define COPY64 \
	MOVQ	0(SI), AX; \
	MOVQ	8(SI), BX; \
	MOVQ	16(SI), CX; \
	MOVQ	24(SI), DX; \
	MOVQ	32(SI), R8; \
	MOVQ	40(SI), R9; \
	MOVQ	48(SI), R10; \
	MOVQ	56(SI), R11; \
	MOVQ	AX, 0(DI); \
	MOVQ	BX, 8(DI); \
	MOVQ	CX, 16(DI); \
	MOVQ	DX, 24(DI); \
	MOVQ	R8, 32(DI); \
	MOVQ	R9, 40(DI); \
	MOVQ	R10, 48(DI); \
	MOVQ	R11, 56(DI)

// func Copy64(dst, src unsafe.Pointer)
TEXT ·Copy64(SB), NOSPLIT, $0-16
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	COPY64
	RET

// func CopyWC64(dst, src unsafe.Pointer)
TEXT ·CopyWC64(SB), NOSPLIT, $0-16
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	SFENCE
	COPY64
	SFENCE
	RET
