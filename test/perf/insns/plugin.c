/*
 * plugin.c: a QEMU TCG plugin that counts the instructions a guest
 * executes, by where they are: the kernel, a static Go binary (goverbs'
 * tools, linked at 0x400000), a position-independent program (rdma-core's
 * tools, 0x55...), shared libraries and the vDSO (0x7f...), other user
 * code. Each time the guest runs the marker program (mark.c, linked at
 * MARK_BASE) the plugin prints the running totals, summed over vCPUs, as
 *   INSNS <seq> kernel=N go=N exe=N lib=N other=N
 * on QEMU's stderr, which the rig's console log collects. The difference
 * of two such lines is what ran between two marks. Per-vCPU counters,
 * updated from an execution callback (not an inline add, which is not
 * atomic across MTTCG's vCPU threads), so the totals are exact.
 *
 * With the argument sample=US (-plugin insns.so,sample=200) it is also a
 * sampling profiler of host time: a thread of its own wakes every US
 * microseconds and marks each vCPU; the next block that vCPU runs is the
 * sample (its start address and bucket), and a vCPU idle in the guest's
 * halt at that moment counts as idle. Under TCG guest instructions differ
 * in cost (a page-table walk, a helper call, an exit to the host), so time
 * is not instructions; this says where the time went. Each mark then also
 * prints the samples since the previous mark. With vcpu=N (alone or with
 * sample=) only vCPU N is sampled and each INSNS line also carries that
 * vCPU's own counts (vkernel=N vgo=N ...): with the guest's programs pinned
 * (taskset), one program's CPU.
 *   SAMPLES <seq> idle=N kernel=N go=N exe=N lib=N other=N
 *   SAMPLE <seq> <address> <count>      (the 400 most frequent block starts)
 *
 * QEMU's plugin API and the buckets: qemu_plugin.h.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include "qemu_plugin.h"

/* counts[v][b]: instructions vCPU v ran in bucket b; each vCPU writes only
 * its own row. Padded to a cache line per vCPU. */
static struct {
	uint64_t n[NBUCKETS];
	char pad[64 - (NBUCKETS * 8) % 64];
} counts[MAX_VCPUS];
static uint64_t seq;

/* Sampling (sample=US). pending[v]: the timer asked vCPU v for a sample;
 * idle[v]: v sits in the guest's halt. Each vCPU keeps its own table of
 * sampled block addresses (open addressing); a mark merges and clears
 * them (a sample racing with the clear may be lost: a statistic). */
#define TABLE 8192
static unsigned period_us;
static int only_vcpu = -1; /* vcpu=N: sample that vCPU alone */
static int pending[MAX_VCPUS], idle[MAX_VCPUS];
static struct sampled {
	uint64_t va, n;
} table[MAX_VCPUS][TABLE];
static uint64_t samples[MAX_VCPUS][NBUCKETS + 1]; /* the last: idle */

static void sample(unsigned v, uint64_t va, int b)
{
	uint64_t h = (va * 0x9e3779b97f4a7c15ULL) >> 51; /* 13 bits: TABLE */
	samples[v][b]++;
	for (int i = 0; i < TABLE; i++, h = (h + 1) % TABLE) {
		if (table[v][h].va == va || table[v][h].va == 0) {
			table[v][h].va = va;
			table[v][h].n++;
			return;
		}
	}
}

static void *ticker(void *arg)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)period_us * 1000};
	(void)arg;
	for (;;) {
		nanosleep(&ts, NULL);
		for (int v = 0; v < MAX_VCPUS; v++) {
			if (only_vcpu >= 0 && v != only_vcpu)
				continue;
			if (__atomic_load_n(&idle[v], __ATOMIC_RELAXED))
				__atomic_add_fetch(&samples[v][NBUCKETS], 1, __ATOMIC_RELAXED);
			else
				__atomic_store_n(&pending[v], 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

static void vcpu_idle(qemu_plugin_id_t id, unsigned int v)
{
	(void)id;
	__atomic_store_n(&idle[v % MAX_VCPUS], 1, __ATOMIC_RELAXED);
}

static void vcpu_resume(qemu_plugin_id_t id, unsigned int v)
{
	(void)id;
	__atomic_store_n(&pending[v % MAX_VCPUS], 0, __ATOMIC_RELAXED); /* not the wake-up's block */
	__atomic_store_n(&idle[v % MAX_VCPUS], 0, __ATOMIC_RELAXED);
}

static int by_count(const void *a, const void *b)
{
	const struct sampled *x = a, *y = b;
	return (y->n > x->n) - (y->n < x->n);
}

/* report_samples prints and clears the samples since the last mark. */
static void report_samples(uint64_t sq)
{
	static struct sampled all[TABLE];
	uint64_t t[NBUCKETS + 1] = {0};
	char line[256];
	int len, n = 0;
	memset(all, 0, sizeof(all));
	for (int v = 0; v < MAX_VCPUS; v++) {
		for (int b = 0; b <= NBUCKETS; b++)
			t[b] += __atomic_exchange_n(&samples[v][b], 0, __ATOMIC_RELAXED);
		for (int i = 0; i < TABLE; i++) {
			if (table[v][i].va == 0)
				continue;
			int j;
			for (j = 0; j < n && all[j].va != table[v][i].va; j++)
				;
			if (j == n && n < TABLE)
				all[n++].va = table[v][i].va;
			if (j < TABLE)
				all[j].n += table[v][i].n;
			table[v][i].va = 0;
			table[v][i].n = 0;
		}
	}
	len = snprintf(line, sizeof(line), "SAMPLES %" PRIu64 " idle=%" PRIu64, sq, t[NBUCKETS]);
	for (int b = 0; b < NBUCKETS; b++)
		len += snprintf(line + len, sizeof(line) - len, " %s=%" PRIu64, bucket_name(b), t[b]);
	snprintf(line + len, sizeof(line) - len, "\n");
	qemu_plugin_outs(line);
	qsort(all, n, sizeof(all[0]), by_count);
	for (int i = 0; i < n && i < 400; i++) {
		snprintf(line, sizeof(line), "SAMPLE %" PRIu64 " 0x%" PRIx64 " %" PRIu64 "\n", sq, all[i].va, all[i].n);
		qemu_plugin_outs(line);
	}
}

/* A TB's userdata packs its bucket (bits 0-2), its instruction count
 * (bits 3-15; a TB has at most 512) and the low 48 bits of its address
 * (bits 16-63; canonical addresses sign-extend from bit 47). */
static uintptr_t pack(uint64_t va, uintptr_t n, int b)
{
	return (uintptr_t)(va << 16) | n << 3 | (uintptr_t)b;
}

static uint64_t unpack_va(uintptr_t u)
{
	return (uint64_t)((int64_t)u >> 16);
}

static void exec_tb(unsigned int vcpu, void *udata)
{
	uintptr_t u = (uintptr_t)udata;
	unsigned v = vcpu % MAX_VCPUS;
	counts[v].n[u & 7] += (u >> 3) & 0x1fff;
	if (__builtin_expect(__atomic_load_n(&pending[v], __ATOMIC_RELAXED), 0)) {
		__atomic_store_n(&pending[v], 0, __ATOMIC_RELAXED);
		sample(v, unpack_va(u), (int)(u & 7));
	}
}

static void exec_mark(unsigned int vcpu, void *udata)
{
	uint64_t t[NBUCKETS] = {0};
	char line[512];
	int len;
	(void)vcpu;
	(void)udata;
	for (int v = 0; v < MAX_VCPUS; v++)
		for (int b = 0; b < NBUCKETS; b++)
			t[b] += __atomic_load_n(&counts[v].n[b], __ATOMIC_RELAXED);
	uint64_t sq = __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
	len = format_totals(line, sizeof(line), sq, t);
	if (only_vcpu >= 0) /* the chosen vCPU's own counts: vkernel=, vgo=, ... */
		for (int b = 0; b < NBUCKETS; b++)
			len += snprintf(line + len, sizeof(line) - len, " v%s=%" PRIu64, bucket_name(b),
					__atomic_load_n(&counts[only_vcpu].n[b], __ATOMIC_RELAXED));
	snprintf(line + len, sizeof(line) - len, "\n");
	qemu_plugin_outs(line);
	if (period_us)
		report_samples(sq);
}

static void trans_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t va = qemu_plugin_tb_vaddr(tb);
	uintptr_t n = qemu_plugin_tb_n_insns(tb);
	(void)id;
	if (va >= MARK_BASE && va < MARK_END) {
		qemu_plugin_register_vcpu_tb_exec_cb(tb, exec_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
		return; /* the marker's own few instructions count for nothing */
	}
	qemu_plugin_register_vcpu_tb_exec_cb(tb, exec_tb, QEMU_PLUGIN_CB_NO_REGS, (void *)pack(va, n, bucket(va)));
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	(void)info;
	for (int i = 0; i < argc; i++) {
		if (strncmp(argv[i], "sample=", 7) == 0)
			period_us = (unsigned)strtoul(argv[i] + 7, NULL, 10);
		else if (strncmp(argv[i], "vcpu=", 5) == 0)
			only_vcpu = (int)(strtoul(argv[i] + 5, NULL, 10) % MAX_VCPUS);
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, trans_tb);
	if (period_us) {
		pthread_t t;
		qemu_plugin_register_vcpu_idle_cb(id, vcpu_idle);
		qemu_plugin_register_vcpu_resume_cb(id, vcpu_resume);
		if (pthread_create(&t, NULL, ticker, NULL) != 0)
			return -1;
		pthread_detach(t);
	}
	return 0;
}
