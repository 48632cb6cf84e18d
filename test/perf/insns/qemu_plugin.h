/*
 * qemu_plugin.h: the part of QEMU's TCG plugin API the plugins here use,
 * version 1 (QEMU 7.2, the rig host's; include/qemu/qemu-plugin.h),
 * written out because Debian ships no development package with that
 * header. Each plugin includes it once: it also defines the version
 * symbol QEMU checks at load.
 */
#ifndef GOVERBS_QEMU_PLUGIN_H
#define GOVERBS_QEMU_PLUGIN_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t; /* not read */
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
					  enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
					    enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_idle_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_resume_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_outs(const char *string);

#define EXPORT __attribute__((visibility("default")))
EXPORT int qemu_plugin_version = 1;

#define MAX_VCPUS 64

/* mark.c's link address: a guest running it asks a plugin for its counts. */
#define MARK_BASE 0x13370000ULL
#define MARK_END (MARK_BASE + 0x10000ULL)

/* Where a guest address is: the kernel, a static Go binary (goverbs'
 * tools, linked at 0x400000), a position-independent program (rdma-core's
 * tools, 0x55...), shared libraries and the vDSO (0x7f...), other user
 * code. plugin.c and lookups.c count by these. */
enum { KERNEL, GO, EXE, LIB, OTHER, NBUCKETS };

static inline int bucket(uint64_t va)
{
	if (va >= 0xffff800000000000ULL)
		return KERNEL;
	if (va >= 0x400000ULL && va < 0x10000000ULL)
		return GO;
	if (va >= 0x500000000000ULL && va < 0x600000000000ULL)
		return EXE;
	if (va >= 0x7f0000000000ULL && va < 0x800000000000ULL)
		return LIB;
	return OTHER;
}

static inline const char *bucket_name(int b)
{
	static const char *const names[NBUCKETS] = {"kernel", "go", "exe", "lib", "other"};
	return names[b];
}

/* format_totals writes a mark's line, "INSNS <seq> kernel=N go=N ...",
 * without its newline, from t (summed over vCPUs) into line, and returns
 * its length: what table.awk and samples.awk read. */
static inline int format_totals(char *line, size_t size, uint64_t sq, const uint64_t t[NBUCKETS])
{
	int len = snprintf(line, size, "INSNS %" PRIu64, sq);
	for (int b = 0; b < NBUCKETS; b++)
		len += snprintf(line + len, size - len, " %s=%" PRIu64, bucket_name(b), t[b]);
	return len;
}

#endif
