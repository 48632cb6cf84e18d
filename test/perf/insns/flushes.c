/*
 * flushes.c: a QEMU TCG plugin that counts the guest instructions after
 * which QEMU's TCG may flush its soft TLB: WRPKRU (always a change: Linux
 * writes PKRU only when it differs), XRSTOR (a flush when it loads a
 * different PKRU; Linux leaves PKRU out of a context switch's restore),
 * MOV to CR3 and CR4, INVLPG; and three that cost TCG an exit or a helper:
 * PAUSE (helper_pause leaves the execution loop: a spin-wait hint is dear),
 * RDTSC/RDTSCP, and SYSCALL (user code entering the kernel). At QEMU's exit
 * it prints, summed over vCPUs,
 *   PKCOUNT wrpkru=N xrstor_kernel=N xrstor_user=N mov_cr3=N mov_cr4=N invlpg=N
 *     pause_kernel=N pause_user=N rdtsc_kernel=N rdtsc_user=N syscall=N
 * on its stderr, which the rig's console log collects. Compare two boots
 * that run the same workload with different programs (the boot's own share
 * is the same in both); a boot running only `true` gives that share.
 *   gcc -O2 -shared -fPIC -fvisibility=hidden -o flushes.so test/perf/insns/flushes.c
 *   RIG_ACCEL=tcg test/rig/run.sh --kernel 6.1 --qemu -plugin --qemu $PWD/flushes.so \
 *     --qemu -d --qemu plugin -- 'CMD'
 * QEMU's plugin API: qemu_plugin.h.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qemu_plugin.h"

enum { WRPKRU, XRSTOR_KERNEL, XRSTOR_USER, MOV_CR3, MOV_CR4, INVLPG, PAUSE_KERNEL, PAUSE_USER, RDTSC_KERNEL, RDTSC_USER,
       SYSCALL, NKINDS };
static const char *const names[NKINDS] = {"wrpkru", "xrstor_kernel", "xrstor_user", "mov_cr3", "mov_cr4", "invlpg",
					  "pause_kernel", "pause_user", "rdtsc_kernel", "rdtsc_user", "syscall"};

/* counts[v][k]: executions of kind k on vCPU v; each vCPU writes its own row. */
static uint64_t counts[MAX_VCPUS][NKINDS];

static void hit(unsigned int v, void *kind)
{
	if (v < MAX_VCPUS)
		counts[v][(uintptr_t)kind]++;
}

/* classify returns the kind of the instruction p[0:n] at va, or -1. */
static int classify(const uint8_t *p, size_t n, uint64_t va)
{
	size_t i = 0;
	int rep = 0, kernel = va >= 0xffff800000000000ULL;
	/* legacy prefixes and REX */
	while (i < n && (p[i] == 0x66 || p[i] == 0xf2 || p[i] == 0xf3 || (p[i] & 0xf0) == 0x40))
		rep |= p[i++] == 0xf3;
	if (rep && i + 1 == n && p[i] == 0x90) /* PAUSE: TCG leaves its execution loop (helper_pause) */
		return kernel ? PAUSE_KERNEL : PAUSE_USER;
	if (i + 1 < n && p[i] == 0x0f && p[i + 1] == 0x31) /* RDTSC */
		return kernel ? RDTSC_KERNEL : RDTSC_USER;
	if (i + 1 < n && p[i] == 0x0f && p[i + 1] == 0x05) /* SYSCALL */
		return SYSCALL;
	if (i + 2 >= n || p[i] != 0x0f) /* 0F, the opcode and ModRM */
		return -1;
	uint8_t op = p[i + 1], modrm = p[i + 2], reg = (modrm >> 3) & 7, mod = modrm >> 6;
	if (op == 0x01 && modrm == 0xf9) /* RDTSCP */
		return kernel ? RDTSC_KERNEL : RDTSC_USER;
	if (op == 0x01 && modrm == 0xef)
		return WRPKRU;
	if (op == 0xae && reg == 5 && mod != 3) /* mod 3 is LFENCE */
		return kernel ? XRSTOR_KERNEL : XRSTOR_USER;
	if (op == 0x22 && reg == 3)
		return MOV_CR3;
	if (op == 0x22 && reg == 4)
		return MOV_CR4;
	if (op == 0x01 && reg == 7 && mod != 3)
		return INVLPG;
	return -1;
}

static void trans_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	size_t n = qemu_plugin_tb_n_insns(tb);
	for (size_t j = 0; j < n; j++) {
		struct qemu_plugin_insn *in = qemu_plugin_tb_get_insn(tb, j);
		int k = classify(qemu_plugin_insn_data(in), qemu_plugin_insn_size(in), qemu_plugin_insn_vaddr(in));
		if (k >= 0)
			qemu_plugin_register_vcpu_insn_exec_cb(in, hit, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)k);
	}
}

static void report(qemu_plugin_id_t id, void *userdata)
{
	(void)id;
	(void)userdata;
	char buf[512];
	int o = snprintf(buf, sizeof buf, "PKCOUNT");
	for (int k = 0; k < NKINDS; k++) {
		uint64_t s = 0;
		for (int v = 0; v < MAX_VCPUS; v++)
			s += counts[v][k];
		o += snprintf(buf + o, sizeof buf - (size_t)o, " %s=%" PRIu64, names[k], s);
	}
	snprintf(buf + o, sizeof buf - (size_t)o, "\n");
	qemu_plugin_outs(buf);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	(void)info;
	(void)argc;
	(void)argv;
	qemu_plugin_register_vcpu_tb_trans_cb(id, trans_tb);
	qemu_plugin_register_atexit_cb(id, report, NULL);
	return 0;
}
