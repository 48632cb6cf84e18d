/*
 * lookups.c: a QEMU TCG plugin that counts the translation blocks a guest
 * enters by a lookup rather than by a chained jump, by where the entered
 * block is (the kernel, a static Go binary, a PIE program, shared
 * libraries, other user code: plugin.c's buckets). Under TCG a block's
 * exit is chained to the next block (a direct jump in the host code) only
 * when it is a direct jump, call or fall-through whose target lies on the
 * same guest page as the block's start (QEMU 7.2, translator_use_goto_tb);
 * a return, an indirect call or jump, a syscall or sysret, and any exit to
 * another page look the target up in the vCPU's jump cache (4,096
 * entries, one table for user and kernel code) and, when it is not there,
 * in QEMU's global hash table. Each such entry can evict another's, so the
 * count is what one side's code costs the other's under emulation
 * (docs/COST.md, session 53). The count follows each vCPU's sequence of
 * executed blocks: entering block B after block A counts when A ended in
 * an indirect branch or when A started on another page than B; interrupts
 * and exceptions, which also leave the execution loop, count only when
 * that rule says so. Each time the guest runs the marker program (mark.c,
 * linked at MARK_BASE) the plugin prints the running totals, summed over
 * vCPUs, in plugin.c's format, so that table.awk reads them (its table
 * then reads "lookups per op"):
 *   INSNS <seq> kernel=N go=N exe=N lib=N other=N
 *   gcc -O2 -shared -fPIC -fvisibility=hidden -o lookups.so test/perf/insns/lookups.c
 *   RIG_ACCEL=tcg test/rig/run.sh --kernel 6.1 --qemu -plugin --qemu $PWD/lookups.so \
 *     --qemu -d --qemu plugin -- 'CMD with icmark between runs'
 * QEMU's plugin API and the buckets: qemu_plugin.h.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qemu_plugin.h"

/* Per vCPU, written only by that vCPU's thread: the lookups by the
 * entered block's bucket, and the last block's page and ending. */
static struct {
	uint64_t n[NBUCKETS];
	uint64_t last_page;
	int last_indirect;
	char pad[64 - (NBUCKETS * 8 + 16) % 64];
} vc[MAX_VCPUS];
static uint64_t seq;

/* indirect reports whether an instruction leaves its block without a
 * chainable jump: RET (C3, C2, CB, CA), IRET (CF), SYSCALL (0F 05), SYSRET
 * (0F 07), SYSENTER/SYSEXIT (0F 34/35), or FF /2 to /5 (indirect CALL and
 * JMP), after any legacy and REX prefixes. */
static int indirect(const uint8_t *p, size_t n)
{
	size_t i = 0;
	while (i < n && (p[i] == 0x66 || p[i] == 0x67 || p[i] == 0xf2 || p[i] == 0xf3 || p[i] == 0x2e ||
			 p[i] == 0x3e || p[i] == 0x26 || p[i] == 0x36 || p[i] == 0x64 || p[i] == 0x65 ||
			 p[i] == 0xf0 || (p[i] & 0xf0) == 0x40))
		i++;
	if (i >= n)
		return 0;
	switch (p[i]) {
	case 0xc3: case 0xc2: case 0xcb: case 0xca: case 0xcf:
		return 1;
	case 0x0f:
		return i + 1 < n && (p[i + 1] == 0x05 || p[i + 1] == 0x07 || p[i + 1] == 0x34 || p[i + 1] == 0x35);
	case 0xff:
		if (i + 1 < n) {
			int reg = (p[i + 1] >> 3) & 7;
			return reg >= 2 && reg <= 5;
		}
		return 0;
	}
	return 0;
}

/* A block's userdata packs its page (bits 12-63, canonical addresses kept
 * by the shift's sign), its bucket (bits 0-2) and whether it ends in an
 * indirect branch (bit 3). */
static void exec_tb(unsigned int vcpu, void *udata)
{
	uintptr_t u = (uintptr_t)udata;
	unsigned v = vcpu % MAX_VCPUS;
	uint64_t page = (uint64_t)u >> 12;
	if (vc[v].last_indirect || vc[v].last_page != page)
		vc[v].n[u & 7]++;
	vc[v].last_page = page;
	vc[v].last_indirect = (int)((u >> 3) & 1);
}

static void exec_mark(unsigned int vcpu, void *udata)
{
	uint64_t t[NBUCKETS] = {0};
	char line[256];
	int len;
	(void)udata;
	for (int v = 0; v < MAX_VCPUS; v++)
		for (int b = 0; b < NBUCKETS; b++)
			t[b] += __atomic_load_n(&vc[v].n[b], __ATOMIC_RELAXED);
	uint64_t sq = __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
	len = format_totals(line, sizeof(line), sq, t);
	snprintf(line + len, sizeof(line) - len, "\n");
	qemu_plugin_outs(line);
	vc[vcpu % MAX_VCPUS].last_indirect = 1; /* the marker's blocks count for nothing */
}

static void trans_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t va = qemu_plugin_tb_vaddr(tb);
	size_t n = qemu_plugin_tb_n_insns(tb);
	(void)id;
	if (va >= MARK_BASE && va < MARK_END) {
		qemu_plugin_register_vcpu_tb_exec_cb(tb, exec_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
		return;
	}
	int ind = 0;
	if (n > 0) {
		struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
		ind = indirect(qemu_plugin_insn_data(last), qemu_plugin_insn_size(last));
	}
	uintptr_t u = (uintptr_t)((va >> 12) << 12) | (uintptr_t)ind << 3 | (uintptr_t)bucket(va);
	qemu_plugin_register_vcpu_tb_exec_cb(tb, exec_tb, QEMU_PLUGIN_CB_NO_REGS, (void *)u);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	(void)info;
	(void)argc;
	(void)argv;
	qemu_plugin_register_vcpu_tb_trans_cb(id, trans_tb);
	return 0;
}
