/*
 * barriers.c: what one ordered access costs the guest, as pairs: each
 * acquire load, release store or read-modify-write beside the plain access
 * with the one-way barrier rdma-core's code puts beside it (util/udma_barrier.h
 * on arm64: udma_from_device_barrier is "dmb oshld", udma_to_device_barrier
 * "dmb oshst"). Go's sync/atomic compiles its Load to LDAR, its Store to
 * STLR and its CompareAndSwap to an LDAXR/STLXR loop on arm64 (no LSE below
 * GOARM64=v8.1); under QEMU's TCG on an x86 host each of them carries a host
 * fence, where a DMB ISHLD/ISHST/OSHLD/OSHST carries none (barriers.sh).
 * On arm64 load-acquire is LDAR and store-release STLR; on amd64 both are
 * plain moves and only the CAS is a locked instruction. Prints ns per
 * operation for each row, REPS rounds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint32_t w;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

#define ROW(name, body)                                                   \
	do {                                                              \
		double t0 = now();                                        \
		for (long i = 0; i < n; i++) {                            \
			body;                                             \
		}                                                         \
		printf("%-24s %7.2f ns/op\n", name, (now() - t0) / n);    \
	} while (0)

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000000;
	int reps = argc > 2 ? atoi(argv[2]) : 3;
	uint32_t s = 0;

	for (int r = 0; r < reps; r++) {
		printf("round %d\n", r + 1);
		ROW("load", s += w);
		ROW("load-acquire", s += __atomic_load_n(&w, __ATOMIC_ACQUIRE));
#if defined(__aarch64__)
		ROW("load; dmb oshld", { s += w; __asm__ volatile("dmb oshld" ::: "memory"); });
#endif
		ROW("store", w = (uint32_t)i);
		ROW("store-release", __atomic_store_n(&w, (uint32_t)i, __ATOMIC_RELEASE));
#if defined(__aarch64__)
		ROW("dmb oshst; store", { __asm__ volatile("dmb oshst" ::: "memory"); w = (uint32_t)i; });
		ROW("dmb ish; store", { __asm__ volatile("dmb ish" ::: "memory"); w = (uint32_t)i; });
#endif
		ROW("cas acq_rel", {
			uint32_t old = (uint32_t)i;
			__atomic_compare_exchange_n(&w, &old, (uint32_t)i + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
		});
	}
	return s == 42; /* keep s live */
}
