#include "textflag.h"

// func ticks() int64
// The time stamp counter, as perftest's get_cycles reads it (RDTSC).
TEXT ·ticks(SB), NOSPLIT, $0-8
	RDTSC
	SHLQ	$32, DX
	ORQ	DX, AX
	MOVQ	AX, ret+0(FP)
	RET
