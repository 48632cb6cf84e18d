/* verbs_cost: the workload of goverbs' cmd/ibvcost, through rdma-core's
 * libibverbs, for comparison. Same rows, same attributes, same order, same
 * counting and timing method; prints the same JSON (ibvcost's Report type)
 * on stdout. Not part of goverbs: a reference built by test/cost/compare.sh
 * against Debian's libibverbs-dev.
 *
 *   verbs_cost [-d dev] [-n calls] [-b big-calls] [-m max-mr-bytes] [-g gid-index]
 *              [-p slow,fast,cm]   the paths measured (ibvcost's -paths)
 *              [-c cpu]            pin this (one) thread to CPU cpu (ibvcost's -cpu)
 *   verbs_cost -H     hold the syscall tracepoint registered until killed
 *
 * The workload runs twice. The counting pass makes COUNTED calls of every
 * row with a perf counter group on the raw_syscalls:sys_enter tracepoint
 * read around each call (attached to this thread: all syscalls, ioctl,
 * write, mmap+munmap, and the runtime/clock set that cmd/ibvcost/counter.go
 * excludes). The timing pass, with the counters closed, makes one warm-up
 * call and n timed calls of every row, each timed with two
 * clock_gettime(CLOCK_MONOTONIC) reads minus the median cost of an empty
 * pair. Medians and p99s are nearest-rank, as in ibvcost.
 *
 * Build: gcc -O2 -Wall -o verbs_cost verbs_cost.c -libverbs -lrdmacm -lm */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <linux/perf_event.h>
#include <linux/if_packet.h>
#include <math.h>
#include <net/if.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define COUNTED 3
#define PORT 1
#define CQ_ENTRIES 256
#define QP_DEPTH 64
#define MAX_INLINE 64
#define START_PSN 0x100
#define BIG_MR (16 << 20)
#define FAST_BUF (128 << 10)
#define WINDOW 32
#define SIGNAL_GAP 8
#define CHUNK 256
#define BATCH_RECV 32
#define BATCH_POLL 100
#define BATCH_HIT 16
#define WAIT_NS (30LL * 1000000000LL)
#define MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

enum { K_ALL, K_IOCTL, K_WRITE, K_MMAP, K_RT, NK };

static const long long mr_sizes[] = { 4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20 };
static const long long msg_sizes[] = { 8, 64, 4 << 10, 64 << 10 };
static const struct { const char *name; enum ibv_wr_opcode op; } ops[] = {
	{ "send", IBV_WR_SEND }, { "write", IBV_WR_RDMA_WRITE }, { "read", IBV_WR_RDMA_READ },
};

/* ---- rows ---- */

struct row {
	char name[48];
	const char *path, *verb;
	long long size;
	long long *samples;
	int ns, scap;
	double (*counts)[NK];
	int nc, ccap;
	char skipped[256];
	int failed;
};

static struct row rows[64];
static int nrows;

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "verbs_cost: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static void add_row(const char *name, const char *path, const char *verb, long long size)
{
	struct row *r = &rows[nrows++];
	snprintf(r->name, sizeof r->name, "%s", name);
	r->path = path;
	r->verb = verb;
	r->size = size;
}

static struct row *row(const char *name)
{
	for (int i = 0; i < nrows; i++)
		if (!strcmp(rows[i].name, name))
			return &rows[i];
	die("no row %s", name);
	return NULL;
}

static void size_name(char *b, size_t n, long long z)
{
	if (z >= 1 << 20 && z % (1 << 20) == 0)
		snprintf(b, n, "%lldMiB", z >> 20);
	else if (z >= 1 << 10 && z % (1 << 10) == 0)
		snprintf(b, n, "%lldKiB", z >> 10);
	else
		snprintf(b, n, "%lldB", z);
}

static void post_send_row(char *b, size_t n, const char *op, long long z)
{
	char s[24];
	size_name(s, sizeof s, z);
	snprintf(b, n, "post_send_%s_%s%s", op, s, z == 8 && strcmp(op, "read") ? "_inline" : "");
}

static void mr_row(char *b, size_t n, const char *what, long long z)
{
	char s[24];
	size_name(s, sizeof s, z);
	snprintf(b, n, "%s_mr_%s", what, s);
}

static void specs(void)
{
	char b[48];
	add_row("open_device", "slow", "ibv_open_device", 0);
	add_row("close_device", "slow", "ibv_close_device", 0);
	add_row("query_device", "slow", "ibv_query_device_ex", 0);
	add_row("query_port", "slow", "ibv_query_port", 0);
	add_row("query_gid", "slow", "ibv_query_gid", 0);
	add_row("alloc_pd", "slow", "ibv_alloc_pd", 0);
	add_row("dealloc_pd", "slow", "ibv_dealloc_pd", 0);
	for (size_t i = 0; i < sizeof mr_sizes / sizeof mr_sizes[0]; i++) {
		mr_row(b, sizeof b, "reg", mr_sizes[i]);
		add_row(b, "slow", "ibv_reg_mr", mr_sizes[i]);
		mr_row(b, sizeof b, "dereg", mr_sizes[i]);
		add_row(b, "slow", "ibv_dereg_mr", mr_sizes[i]);
	}
	add_row("create_cq", "slow", "ibv_create_cq", 0);
	add_row("destroy_cq", "slow", "ibv_destroy_cq", 0);
	add_row("create_qp", "slow", "ibv_create_qp", 0);
	add_row("destroy_qp", "slow", "ibv_destroy_qp", 0);
	add_row("modify_qp_init", "slow", "ibv_modify_qp", 0);
	add_row("modify_qp_rtr", "slow", "ibv_modify_qp", 0);
	add_row("modify_qp_rts", "slow", "ibv_modify_qp", 0);
	add_row("modify_qp_err", "slow", "ibv_modify_qp", 0);
	add_row("modify_qp_reset", "slow", "ibv_modify_qp", 0);
	add_row("create_ah", "slow", "ibv_create_ah", 0);
	add_row("destroy_ah", "slow", "ibv_destroy_ah", 0);
	for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
		for (size_t i = 0; i < sizeof msg_sizes / sizeof msg_sizes[0]; i++) {
			post_send_row(b, sizeof b, ops[o].name, msg_sizes[i]);
			add_row(b, "fast", "ibv_post_send", msg_sizes[i]);
		}
	add_row("post_recv", "fast", "ibv_post_recv", 0);
	add_row("poll_cq_empty", "fast", "ibv_poll_cq", 0);
	add_row("poll_cq", "fast", "ibv_poll_cq", 0);
	add_row("pingpong_send_64B", "fast", "ibv_post_send+ibv_poll_cq", 64);
	add_row("msg_rate_write_64B", "fast", "ibv_post_send+ibv_poll_cq", 64);
	add_row("cm_create_id", "cm", "rdma_create_id", 0);
	add_row("cm_resolve_addr", "cm", "rdma_resolve_addr", 0);
	add_row("cm_resolve_route", "cm", "rdma_resolve_route", 0);
	add_row("cm_destroy_id", "cm", "rdma_destroy_id", 0);
	add_row("cm_connect", "cm", "rdma_connect", 0);
	add_row("cm_accept", "cm", "rdma_accept", 0);
	add_row("cm_disconnect", "cm", "rdma_disconnect", 0);
}

static void skip(const char *name, const char *why)
{
	struct row *r = row(name);
	if (!r->failed && !r->skipped[0])
		snprintf(r->skipped, sizeof r->skipped, "%s", why);
}

/* skip_rest marks every row of path (NULL: any) not yet reached. */
static void skip_rest(const char *path, const char *why)
{
	for (int i = 0; i < nrows; i++)
		if ((!path || !strcmp(rows[i].path, path)) && !rows[i].ns && !rows[i].nc && !rows[i].failed &&
		    !rows[i].skipped[0])
			snprintf(rows[i].skipped, sizeof rows[i].skipped, "%s", why);
}

/* ---- the clock ---- */

static long long now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int rank_of(int n, double q)
{
	int i = (int)ceil(q * n) - 1;
	return i < 0 ? 0 : i >= n ? n - 1 : i;
}

static long long floor_ns;

static void measure_floor(void)
{
	enum { N = 2001 };
	static long long d[N];
	for (int i = 0; i < N; i++) {
		long long t0 = now();
		d[i] = now() - t0;
	}
	qsort(d, N, sizeof d[0], cmp_ll);
	floor_ns = d[rank_of(N, 0.5)];
}

/* ---- the syscall counters (cmd/ibvcost/counter.go) ---- */

static int ctr_fd[NK] = { -1, -1, -1, -1, -1 };
static uint64_t ctr_base[NK];
static char counter_desc[512] = "perf:raw_syscalls:sys_enter";

static long tracepoint_id(void)
{
	static const char *paths[] = { "/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
				       "/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id" };
	for (size_t i = 0; i < 2; i++) {
		FILE *f = fopen(paths[i], "r");
		long id;
		if (!f)
			continue;
		if (fscanf(f, "%ld", &id) != 1)
			id = -1;
		fclose(f);
		if (id >= 0)
			return id;
	}
	return -1;
}

static void ctr_read(uint64_t v[NK])
{
	uint64_t buf[1 + NK];
	if (read(ctr_fd[K_ALL], buf, sizeof buf) != (ssize_t)sizeof buf || buf[0] != NK)
		die("reading the syscall counters: %s", strerror(errno));
	memcpy(v, buf + 1, sizeof(uint64_t) * NK);
}

static void ctr_close(void)
{
	for (int k = NK - 1; k >= 0; k--)
		if (ctr_fd[k] >= 0) {
			close(ctr_fd[k]);
			ctr_fd[k] = -1;
		}
}

/* ctr_open opens the group and calibrates it; 0 or an error text. */
static const char *ctr_open(void)
{
	static char err[1024];
	static const int rt[] = { SYS_futex, SYS_rt_sigreturn, SYS_rt_sigprocmask, SYS_rt_sigaction,
				  SYS_sigaltstack, SYS_sched_yield, SYS_nanosleep, SYS_clock_gettime,
				  SYS_clock_nanosleep, SYS_gettimeofday, SYS_gettid, SYS_tgkill,
				  SYS_getpid, SYS_clone, SYS_clone3, SYS_epoll_pwait };
	char filters[NK][512] = { "" };
	long id = tracepoint_id();
	if (id < 0)
		return "no raw_syscalls:sys_enter tracepoint under /sys/kernel/tracing or /sys/kernel/debug/tracing "
		       "(mount tracefs: mount -t tracefs nodev /sys/kernel/tracing)";
	snprintf(filters[K_IOCTL], sizeof filters[0], "id == %d", SYS_ioctl);
	snprintf(filters[K_WRITE], sizeof filters[0], "id == %d", SYS_write);
	snprintf(filters[K_MMAP], sizeof filters[0], "id == %d || id == %d", SYS_mmap, SYS_munmap);
	for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++) {
		size_t l = strlen(filters[K_RT]);
		snprintf(filters[K_RT] + l, sizeof filters[0] - l, "%sid == %d", i ? " || " : "", rt[i]);
	}
	struct perf_event_attr a = { .type = PERF_TYPE_TRACEPOINT, .size = sizeof a, .config = id,
				     .read_format = PERF_FORMAT_GROUP };
	for (int k = 0; k < NK; k++) {
		ctr_fd[k] = syscall(SYS_perf_event_open, &a, 0, -1, k ? ctr_fd[K_ALL] : -1, PERF_FLAG_FD_CLOEXEC);
		if (ctr_fd[k] < 0) {
			snprintf(err, sizeof err, "perf_event_open(raw_syscalls:sys_enter): %s (needs root or CAP_PERFMON)",
				 strerror(errno));
			ctr_close();
			return err;
		}
		if (filters[k][0] && ioctl(ctr_fd[k], PERF_EVENT_IOC_SET_FILTER, filters[k]) < 0) {
			snprintf(err, sizeof err, "perf filter %.200s: %s", filters[k], strerror(errno));
			ctr_close();
			return err;
		}
	}
	for (int k = 0; k < NK; k++)
		ctr_base[k] = UINT64_MAX;
	for (int i = 0; i < 7; i++) {
		uint64_t x[NK], y[NK];
		ctr_read(x);
		ctr_read(y);
		for (int k = 0; k < NK; k++)
			if (y[k] - x[k] < ctr_base[k])
				ctr_base[k] = y[k] - x[k];
	}
	return NULL;
}

/* ---- measuring one call ---- */

/* A measured call's mode: timed, counted, or a warm-up that measures nothing. */
enum { TIMED, COUNTED_CALL, WARM };

struct meas {
	struct row *r;
	int mode;
	long long t0;
	uint64_t c0[NK];
};

static void m_begin(struct meas *m, struct row *r, int mode)
{
	m->r = r;
	m->mode = mode;
	if (mode == COUNTED_CALL) {
		if (ctr_fd[K_ALL] >= 0)
			ctr_read(m->c0);
	} else if (mode == TIMED) {
		m->t0 = now();
	}
}

/* m_end records the call: err is 0 or an errno, what the failing call. */
static int m_end(struct meas *m, int err, const char *what, int keep, int per)
{
	long long t1 = 0;
	uint64_t c1[NK];
	if (m->mode == COUNTED_CALL) {
		if (ctr_fd[K_ALL] >= 0)
			ctr_read(c1);
	} else if (m->mode == TIMED) {
		t1 = now();
	}
	struct row *r = m->r;
	if (err) {
		r->failed = 1;
		snprintf(r->skipped, sizeof r->skipped, "%s: %s", what, strerror(err));
		return err;
	}
	if (!keep || m->mode == WARM)
		return 0;
	if (m->mode == TIMED) {
		long long d = t1 - m->t0 - floor_ns;
		if (d < 0)
			d = 0;
		if (r->ns == r->scap) {
			r->scap = r->scap ? 2 * r->scap : 128;
			r->samples = realloc(r->samples, r->scap * sizeof r->samples[0]);
		}
		r->samples[r->ns++] = d / per;
		return 0;
	}
	if (ctr_fd[K_ALL] < 0)
		return 0;
	if (r->nc == r->ccap) {
		r->ccap = r->ccap ? 2 * r->ccap : 8;
		r->counts = realloc(r->counts, r->ccap * sizeof r->counts[0]);
	}
	double *d = r->counts[r->nc++];
	for (int k = 0; k < NK; k++) {
		uint64_t v = c1[k] - m->c0[k];
		v = v >= ctr_base[k] ? v - ctr_base[k] : 0;
		d[k] = (double)v;
	}
	d[K_ALL] = d[K_ALL] > d[K_RT] ? d[K_ALL] - d[K_RT] : 0;
	for (int k = 0; k < NK; k++)
		d[k] /= per;
	return 0;
}

/* MEASURE(name, counting, what, expr): time or count one call of expr (0 or
 * an errno); a row that failed is not called again. */
#define MEASURE(name, counting, what, expr)                                \
	({                                                                 \
		struct row *r_ = row(name);                                \
		int e_ = EINVAL;                                           \
		if (!r_->failed) {                                         \
			struct meas m_;                                    \
			m_begin(&m_, r_, counting);                        \
			e_ = (expr);                                       \
			m_end(&m_, e_, what, 1, 1);                        \
		}                                                          \
		e_;                                                        \
	})

static int err_of(const void *p) { return p ? 0 : errno ? errno : EIO; }

/* The workload runs twice (cmd/ibvcost/bench.go): a counting pass with the
 * counters open throughout, then a timing pass without them. Registering the
 * syscall tracepoint patches kernel text, which under QEMU's TCG can race
 * with a syscall entry on another vCPU (a stale int3: soft lockups on 6.1,
 * an oops on 6.12). This program is single-threaded, so it is safe itself;
 * run as a holder (-H) it makes the registration once, for every later
 * counter, before multi-threaded programs (ibvcost) open theirs. */
static int count_pass;

/* CYCLE(n) { body using `counting`, the mode of its measured calls }: in the
 * counting pass COUNTED counted iterations, in the timing pass one warm-up
 * and n timed ones; `break` ends the cycle. */
#define CYCLE(n)                                                                        \
	for (int it_ = 0, counting = count_pass ? COUNTED_CALL : WARM,                   \
		 nn_ = count_pass ? COUNTED : 1 + (n);                                   \
	     it_ < nn_; it_++, counting = count_pass ? COUNTED_CALL : TIMED)

/* ---- the workload ---- */

static struct ibv_device *dev;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static int n_calls = 100, big_n = 5, gid_index = -1, gid_ok;
static long long max_mr = 256LL << 20;
static union ibv_gid gid;
static char fast_path[512];

static int choose_gid(void)
{
	if (gid_ok)
		return 0;
	if (gid_index < 0) {
		struct ibv_port_attr pa;
		if (ibv_query_port(ctx, PORT, &pa))
			return errno;
		for (int i = 0; i < pa.gid_tbl_len; i++) {
			struct ibv_gid_entry e;
			if (ibv_query_gid_ex(ctx, PORT, i, &e, 0))
				continue;
			if (gid_index < 0)
				gid_index = i;
			static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
			if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(e.gid.raw, v4, 12)) {
				gid_index = i;
				break;
			}
		}
		if (gid_index < 0)
			return ENODATA;
	}
	if (ibv_query_gid(ctx, PORT, gid_index, &gid))
		return errno ? errno : EINVAL;
	gid_ok = 1;
	return 0;
}

static struct ibv_ah_attr av(void)
{
	struct ibv_ah_attr a = { .is_global = 1, .port_num = PORT };
	a.grh.dgid = gid;
	a.grh.sgid_index = gid_index;
	a.grh.hop_limit = 64;
	return a;
}

static struct ibv_qp_init_attr qp_init(struct ibv_cq *scq, struct ibv_cq *rcq)
{
	struct ibv_qp_init_attr i = { .send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = QP_DEPTH, .max_recv_wr = QP_DEPTH, .max_send_sge = 1,
					       .max_recv_sge = 1, .max_inline_data = MAX_INLINE } };
	return i;
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = PORT,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int to_rtr(struct ibv_qp *qp, uint32_t remote)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR, .ah_attr = av(), .path_mtu = IBV_MTU_1024, .dest_qp_num = remote,
				 .rq_psn = START_PSN, .max_dest_rd_atomic = 4, .min_rnr_timer = 1 };
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = START_PSN, .timeout = 14, .retry_cnt = 7,
				 .rnr_retry = 7, .max_rd_atomic = 4 };
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_MAX_QP_RD_ATOMIC);
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static void *anon(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	madvise(p, n, MADV_DONTFORK);
	return p;
}

static void slow_path(void)
{
	struct ibv_context *c = NULL;
	CYCLE(n_calls) {
		if (MEASURE("open_device", counting, "ibv_open_device", err_of(c = ibv_open_device(dev))))
			die("ibv_open_device: %s", strerror(errno));
		MEASURE("close_device", counting, "ibv_close_device", ibv_close_device(c));
	}
	ctx = ibv_open_device(dev);
	if (!ctx)
		die("ibv_open_device: %s", strerror(errno));

	CYCLE(n_calls) {
		struct ibv_device_attr_ex da;
		struct ibv_port_attr pa;
		union ibv_gid g;
		MEASURE("query_device", counting, "ibv_query_device_ex", ibv_query_device_ex(ctx, NULL, &da));
		MEASURE("query_port", counting, "ibv_query_port", ibv_query_port(ctx, PORT, &pa));
		MEASURE("query_gid", counting, "ibv_query_gid", ibv_query_gid(ctx, PORT, 0, &g) ? (errno ? errno : EINVAL) : 0);
	}

	CYCLE(n_calls) {
		struct ibv_pd *p;
		if (MEASURE("alloc_pd", counting, "ibv_alloc_pd", err_of(p = ibv_alloc_pd(ctx))))
			break;
		MEASURE("dealloc_pd", counting, "ibv_dealloc_pd", ibv_dealloc_pd(p));
	}
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd: %s", strerror(errno));

	/* Memory regions: prefixes of one prefaulted buffer. */
	long long top = 0;
	char reg[48], dereg[48], why[128];
	for (size_t i = 0; i < sizeof mr_sizes / sizeof mr_sizes[0]; i++) {
		mr_row(reg, sizeof reg, "reg", mr_sizes[i]);
		mr_row(dereg, sizeof dereg, "dereg", mr_sizes[i]);
		if (mr_sizes[i] > max_mr) {
			char s[24];
			size_name(s, sizeof s, max_mr);
			snprintf(why, sizeof why, "larger than -mr-max %s", s);
			skip(reg, why);
			skip(dereg, why);
		} else {
			top = mr_sizes[i];
		}
	}
	void *buf = top ? anon(top) : NULL;
	for (size_t i = 0; top && i < sizeof mr_sizes / sizeof mr_sizes[0] && mr_sizes[i] <= top; i++) {
		mr_row(reg, sizeof reg, "reg", mr_sizes[i]);
		mr_row(dereg, sizeof dereg, "dereg", mr_sizes[i]);
		if (!buf) {
			skip(reg, strerror(errno));
			skip(dereg, strerror(errno));
			continue;
		}
		CYCLE(mr_sizes[i] >= BIG_MR ? big_n : n_calls) {
			struct ibv_mr *mr;
			if (MEASURE(reg, counting, "ibv_reg_mr", err_of(mr = ibv_reg_mr(pd, buf, mr_sizes[i], MR_ACCESS)))) {
				skip(dereg, "not reached: reg failed");
				break;
			}
			MEASURE(dereg, counting, "ibv_dereg_mr", ibv_dereg_mr(mr));
		}
	}
	if (buf)
		munmap(buf, top);

	CYCLE(n_calls) {
		struct ibv_cq *cq;
		if (MEASURE("create_cq", counting, "ibv_create_cq", err_of(cq = ibv_create_cq(ctx, CQ_ENTRIES, NULL, NULL, 0))))
			break;
		MEASURE("destroy_cq", counting, "ibv_destroy_cq", ibv_destroy_cq(cq));
	}

	struct ibv_cq *cq = ibv_create_cq(ctx, CQ_ENTRIES, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq: %s", strerror(errno));
	CYCLE(n_calls) {
		struct ibv_qp *qp;
		struct ibv_qp_init_attr ia = qp_init(cq, cq);
		if (MEASURE("create_qp", counting, "ibv_create_qp", err_of(qp = ibv_create_qp(pd, &ia))))
			break;
		MEASURE("destroy_qp", counting, "ibv_destroy_qp", ibv_destroy_qp(qp));
	}

	/* Transitions: one RC QP connected to itself, RESET → INIT → RTR → RTS → ERR → RESET. */
	struct ibv_qp_init_attr ia = qp_init(cq, cq);
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	int ge = choose_gid();
	if (ge) {
		snprintf(why, sizeof why, "GID %d of %s port %d: %s", gid_index, ibv_get_device_name(dev), PORT, strerror(ge));
		skip("modify_qp_rtr", why);
		skip("modify_qp_rts", "not reached: no GID");
	}
	CYCLE(n_calls) {
		if (MEASURE("modify_qp_init", counting, "ibv_modify_qp", to_init(qp))) {
			skip("modify_qp_rtr", "not reached: INIT failed");
			skip("modify_qp_rts", "not reached: INIT failed");
			break;
		}
		if (gid_ok) {
			if (MEASURE("modify_qp_rtr", counting, "ibv_modify_qp", to_rtr(qp, qp->qp_num)))
				skip("modify_qp_rts", "not reached: RTR failed");
			else
				MEASURE("modify_qp_rts", counting, "ibv_modify_qp", to_rts(qp));
		}
		MEASURE("modify_qp_err", counting, "ibv_modify_qp", to_state(qp, IBV_QPS_ERR));
		if (MEASURE("modify_qp_reset", counting, "ibv_modify_qp", to_state(qp, IBV_QPS_RESET)))
			break;
	}
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);

	if (!gid_ok) {
		skip("create_ah", why);
		skip("destroy_ah", "not reached: no GID");
	} else {
		CYCLE(n_calls) {
			struct ibv_ah *ah;
			struct ibv_ah_attr a = av();
			if (MEASURE("create_ah", counting, "ibv_create_ah", err_of(ah = ibv_create_ah(pd, &a)))) {
				skip("destroy_ah", "not reached: create_ah failed");
				break;
			}
			MEASURE("destroy_ah", counting, "ibv_destroy_ah", ibv_destroy_ah(ah));
		}
	}
}

/* ---- the fast path ---- */

struct end {
	struct ibv_qp *qp;
	struct ibv_cq *scq, *rcq;
	char *buf;
	struct ibv_mr *mr;
};

static struct end A, B;
static struct ibv_wc wc[16];

static struct ibv_sge sge(struct end *e, int off, long long n)
{
	struct ibv_sge s = { .addr = (uintptr_t)e->buf + off, .length = (uint32_t)n, .lkey = e->mr->lkey };
	return s;
}

static int new_end(struct end *e)
{
	if (!(e->scq = ibv_create_cq(ctx, CQ_ENTRIES, NULL, NULL, 0)) || !(e->rcq = ibv_create_cq(ctx, CQ_ENTRIES, NULL, NULL, 0)))
		return errno;
	struct ibv_qp_init_attr ia = qp_init(e->scq, e->rcq);
	if (!(e->qp = ibv_create_qp(pd, &ia)) || !(e->buf = anon(FAST_BUF)))
		return errno;
	if (!(e->mr = ibv_reg_mr(pd, e->buf, FAST_BUF, MR_ACCESS)))
		return errno;
	return 0;
}

static void close_end(struct end *e)
{
	if (e->qp)
		ibv_destroy_qp(e->qp);
	if (e->scq)
		ibv_destroy_cq(e->scq);
	if (e->rcq)
		ibv_destroy_cq(e->rcq);
	if (e->mr)
		ibv_dereg_mr(e->mr);
	if (e->buf)
		munmap(e->buf, FAST_BUF);
	memset(e, 0, sizeof *e);
}

static const char *fail_why;

/* reap polls cq until n successful completions came; 0 or -1 (fail_why). */
static int reap(struct ibv_cq *cq, int n)
{
	long long deadline = 0;
	while (n > 0) {
		int k = ibv_poll_cq(cq, n < 16 ? n : 16, wc);
		if (k < 0) {
			fail_why = "ibv_poll_cq failed";
			return -1;
		}
		for (int i = 0; i < k; i++)
			if (wc[i].status != IBV_WC_SUCCESS) {
				fail_why = ibv_wc_status_str(wc[i].status);
				return -1;
			}
		n -= k;
		if (k == 0) {
			if (!deadline)
				deadline = now() + WAIT_NS;
			else if (now() > deadline) {
				fail_why = "completions missing after 30s";
				return -1;
			}
		}
	}
	return 0;
}

static int post1(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	return ibv_post_send(qp, wr, &bad);
}

static int recv1(struct ibv_qp *qp, struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr *bad;
	return ibv_post_recv(qp, wr, &bad);
}

static int send_and_reap(void)
{
	struct ibv_sge s = sge(&A, 0, 8);
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, .sg_list = &s, .num_sge = 1 };
	if (post1(A.qp, &wr))
		return -1;
	if (reap(A.scq, 1))
		return -1;
	return reap(B.rcq, 1);
}

/* spin polls cq for one successful completion. */
static int spin(struct ibv_cq *cq)
{
	long long deadline = 0;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return EIO;
		if (n == 1)
			return wc[0].status == IBV_WC_SUCCESS ? 0 : EIO;
		if (!deadline)
			deadline = now() + WAIT_NS;
		else if (now() > deadline)
			return ETIMEDOUT;
	}
}

static int pingpong(struct ibv_send_wr *sa, struct ibv_send_wr *sb)
{
	int e;
	if ((e = post1(A.qp, sa)) || (e = spin(B.rcq)) || (e = post1(B.qp, sb)))
		return e;
	return spin(A.rcq);
}

static int rate(struct ibv_send_wr wrs[2])
{
	int outstanding = 0;
	for (int i = 0; i < CHUNK; i++) {
		while (outstanding >= WINDOW) {
			int n = ibv_poll_cq(A.scq, 16, wc);
			if (n < 0)
				return EIO;
			for (int j = 0; j < n; j++)
				if (wc[j].status != IBV_WC_SUCCESS)
					return EIO;
			outstanding -= n * SIGNAL_GAP;
		}
		int e = post1(A.qp, &wrs[i % SIGNAL_GAP == SIGNAL_GAP - 1]);
		if (e)
			return e;
		outstanding++;
	}
	return reap(A.scq, outstanding / SIGNAL_GAP) ? EIO : 0;
}

#define FAIL(what)                                                              \
	do {                                                                    \
		snprintf(why, sizeof why, "not reached: %s failed: %s", what,    \
			 fail_why ? fail_why : "error");                         \
		skip_rest(NULL, why);                                           \
		return;                                                         \
	} while (0)

static void fast_rows(void)
{
	char why[256], name[48];
	struct ibv_sge rs = sge(&B, 0, FAST_BUF / 2);
	struct ibv_recv_wr recv = { .sg_list = &rs, .num_sge = 1 };

	for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
		for (size_t i = 0; i < sizeof msg_sizes / sizeof msg_sizes[0]; i++) {
			long long z = msg_sizes[i];
			struct ibv_sge s = sge(&A, 0, z);
			struct ibv_send_wr wr = { .opcode = ops[o].op, .send_flags = IBV_SEND_SIGNALED, .sg_list = &s, .num_sge = 1 };
			wr.wr.rdma.remote_addr = (uintptr_t)B.buf;
			wr.wr.rdma.rkey = B.mr->rkey;
			if (z == 8 && ops[o].op != IBV_WR_RDMA_READ)
				wr.send_flags |= IBV_SEND_INLINE;
			post_send_row(name, sizeof name, ops[o].name, z);
			int send = ops[o].op == IBV_WR_SEND;
			CYCLE(n_calls) {
				if (send && recv1(B.qp, &recv))
					FAIL("ibv_post_recv");
				if (MEASURE(name, counting, "ibv_post_send", post1(A.qp, &wr)))
					FAIL(name);
				if (reap(A.scq, 1) || (send && reap(B.rcq, 1)))
					FAIL(name);
			}
		}

	/* post_recv, poll_cq_empty, poll_cq: batches timed as one (see ibvcost). */
	struct ibv_sge rs64 = sge(&B, 0, 64);
	struct ibv_recv_wr recvs[BATCH_RECV];
	for (int i = 0; i < BATCH_RECV; i++)
		recvs[i] = (struct ibv_recv_wr){ .wr_id = i, .sg_list = &rs64, .num_sge = 1 };
	CYCLE(n_calls) {
		struct meas m;
		int e = 0;
		m_begin(&m, row("post_recv"), counting);
		for (int i = 0; i < BATCH_RECV && !e; i++)
			e = recv1(B.qp, &recvs[i]);
		if (m_end(&m, e, "ibv_post_recv", 1, BATCH_RECV))
			FAIL("post_recv");
		for (int i = 0; i < BATCH_RECV; i++)
			if (send_and_reap())
				FAIL("post_recv");
	}

	CYCLE(n_calls) {
		struct meas m;
		int e = 0;
		m_begin(&m, row("poll_cq_empty"), counting);
		for (int i = 0; i < BATCH_POLL && !e; i++) {
			int n = ibv_poll_cq(A.scq, 16, wc);
			e = n < 0 ? EIO : n ? EBADE : 0;
		}
		if (m_end(&m, e, "ibv_poll_cq", 1, BATCH_POLL))
			FAIL("poll_cq_empty");
	}

	struct ibv_sge s8 = sge(&A, 0, 8);
	struct ibv_send_wr write8 = { .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, .sg_list = &s8, .num_sge = 1 };
	write8.wr.rdma.remote_addr = (uintptr_t)B.buf;
	write8.wr.rdma.rkey = B.mr->rkey;
	long settle = 2000000;
	int discarded = 0;
	CYCLE(n_calls) {
		for (;;) {
			for (int i = 0; i < BATCH_HIT; i++)
				if (post1(A.qp, &write8))
					FAIL("ibv_post_send");
			struct timespec ts = { settle / 1000000000L, settle % 1000000000L };
			nanosleep(&ts, NULL);
			struct meas m;
			int got = 0, e = 0;
			m_begin(&m, row("poll_cq"), counting);
			for (int i = 0; i < BATCH_HIT; i++) {
				int n = ibv_poll_cq(A.scq, 1, wc);
				if (n < 0 || (n == 1 && wc[0].status != IBV_WC_SUCCESS)) {
					e = EIO;
					break;
				}
				if (!n)
					break;
				got++;
			}
			if (m_end(&m, e, "ibv_poll_cq", got == BATCH_HIT, BATCH_HIT))
				FAIL("poll_cq");
			if (got == BATCH_HIT)
				break;
			if (reap(A.scq, BATCH_HIT - got) || ++discarded > 10 * (n_calls + COUNTED))
				FAIL("poll_cq");
			settle = settle * 2 < 1000000000L ? settle * 2 : 1000000000L;
		}
	}

	struct ibv_sge sa = sge(&A, 0, 64), sb = sge(&B, 0, 64), ra = sge(&A, FAST_BUF / 2, 64);
	struct ibv_send_wr sendA = { .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED, .sg_list = &sa, .num_sge = 1 };
	struct ibv_send_wr sendB = { .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED, .sg_list = &sb, .num_sge = 1 };
	struct ibv_recv_wr recvA = { .sg_list = &ra, .num_sge = 1 };
	if (recv1(A.qp, &recvA) || recv1(B.qp, &recv))
		FAIL("ibv_post_recv");
	CYCLE(n_calls) {
		if (MEASURE("pingpong_send_64B", counting, "ping-pong", pingpong(&sendA, &sendB)))
			FAIL("pingpong");
		if (recv1(A.qp, &recvA) || recv1(B.qp, &recv) || reap(A.scq, 1) || reap(B.scq, 1))
			FAIL("pingpong");
	}
	if (send_and_reap())
		FAIL("send");

	struct ibv_sge s64 = sge(&A, 0, 64);
	struct ibv_send_wr wrs[2] = {
		{ .opcode = IBV_WR_RDMA_WRITE, .sg_list = &s64, .num_sge = 1 },
		{ .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED, .sg_list = &s64, .num_sge = 1 },
	};
	for (int i = 0; i < 2; i++) {
		wrs[i].wr.rdma.remote_addr = (uintptr_t)B.buf;
		wrs[i].wr.rdma.rkey = B.mr->rkey;
	}
	CYCLE(n_calls) {
		struct meas m;
		m_begin(&m, row("msg_rate_write_64B"), counting);
		int e = rate(wrs);
		if (m_end(&m, e, "msg_rate", 1, CHUNK))
			FAIL("msg_rate");
	}
}

/* ---- iWARP: the pair connected through rdma_cm ---- */

/*
 * iWARP QPs reach RTS only through the connection manager: A dials, B
 * accepts, on the IPv4 address of the device's netdev, with IRD and
 * ORD 4 (RDMA READ needs them). The ids carry no QP of their own
 * (conn_param.qp_num names ours); librdmacm's contexts differ from ctx,
 * which the kernel does not mind: iw_cm finds the QP by number.
 */
static struct rdma_event_channel *cm_ch;
static struct rdma_cm_id *cm_listen, *cm_a, *cm_b;

static int cm_event(enum rdma_cm_event_type want, struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(cm_ch, &ev))
		return errno;
	int e = ev->event == want ? 0 : ev->status < 0 ? -ev->status : EPROTO;
	if (id)
		*id = ev->id;
	rdma_ack_cm_event(ev);
	return e;
}

/*
 * cm_addr finds the IPv4 address of the device's netdev: siw's GID 0 is
 * the netdev's MAC address (siw_query_gid), so the interface whose
 * hardware address it is.
 */
static int cm_addr(struct sockaddr_in *sin)
{
	union ibv_gid g;
	if (ibv_query_gid(ctx, PORT, 0, &g))
		return errno ? errno : EIO;
	struct ifaddrs *ifs, *i;
	if (getifaddrs(&ifs))
		return errno;
	char nd[IFNAMSIZ] = "";
	for (i = ifs; i; i = i->ifa_next) {
		struct sockaddr_ll *ll = (struct sockaddr_ll *)i->ifa_addr;
		if (ll && ll->sll_family == AF_PACKET && ll->sll_halen == 6 && !memcmp(ll->sll_addr, g.raw, 6)) {
			snprintf(nd, sizeof nd, "%s", i->ifa_name);
			break;
		}
	}
	int e = nd[0] ? EADDRNOTAVAIL : ENODEV;
	for (i = ifs; nd[0] && i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !strcmp(i->ifa_name, nd)) {
			*sin = *(struct sockaddr_in *)i->ifa_addr;
			e = 0;
			break;
		}
	freeifaddrs(ifs);
	return e;
}

static int cm_init_qp(struct rdma_cm_id *id, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT };
	int mask;
	if (rdma_init_qp_attr(id, &a, &mask))
		return errno;
	return ibv_modify_qp(qp, &a, mask);
}

static int cm_connect(void)
{
	struct sockaddr_in sin;
	int e = cm_addr(&sin);
	if (e)
		return e;
	if (!(cm_ch = rdma_create_event_channel()) || rdma_create_id(cm_ch, &cm_listen, NULL, RDMA_PS_TCP) ||
	    rdma_create_id(cm_ch, &cm_a, NULL, RDMA_PS_TCP))
		return errno;
	sin.sin_port = 0;
	if (rdma_bind_addr(cm_listen, (struct sockaddr *)&sin) || rdma_listen(cm_listen, 1))
		return errno;
	sin.sin_port = rdma_get_src_port(cm_listen);
	if (rdma_resolve_addr(cm_a, NULL, (struct sockaddr *)&sin, 5000))
		return errno;
	if ((e = cm_event(RDMA_CM_EVENT_ADDR_RESOLVED, NULL)))
		return e;
	if (rdma_resolve_route(cm_a, 5000))
		return errno;
	if ((e = cm_event(RDMA_CM_EVENT_ROUTE_RESOLVED, NULL)) || (e = cm_init_qp(cm_a, A.qp)))
		return e;
	struct rdma_conn_param p = { .responder_resources = 4, .initiator_depth = 4, .retry_count = 7,
				     .rnr_retry_count = 7, .qp_num = A.qp->qp_num };
	if (rdma_connect(cm_a, &p))
		return errno;
	if ((e = cm_event(RDMA_CM_EVENT_CONNECT_REQUEST, &cm_b)) || (e = cm_init_qp(cm_b, B.qp)))
		return e;
	p.qp_num = B.qp->qp_num;
	if (rdma_accept(cm_b, &p))
		return errno;
	for (int i = 0; i < 2; i++)
		if ((e = cm_event(RDMA_CM_EVENT_ESTABLISHED, NULL)))
			return e;
	return 0;
}

static void cm_close(void)
{
	if (cm_a)
		rdma_disconnect(cm_a);
	for (struct rdma_cm_id **id = (struct rdma_cm_id *[]){ cm_a, cm_b, cm_listen }, **end = id + 3; id < end; id++)
		if (*id)
			rdma_destroy_id(*id);
	if (cm_ch)
		rdma_destroy_event_channel(cm_ch);
	cm_ch = NULL, cm_listen = cm_a = cm_b = NULL;
}

static void fast(void)
{
	if (dev->transport_type == IBV_TRANSPORT_IWARP) {
		int e = new_end(&A);
		if (!e)
			e = new_end(&B);
		if (!e)
			e = cm_connect();
		if (e) {
			snprintf(fast_path, sizeof fast_path, "no RC pair connected through rdma_cm on %s: %s",
				 ibv_get_device_name(dev), strerror(e));
		} else {
			struct ibv_sge s = sge(&B, 0, 64);
			struct ibv_recv_wr r = { .sg_list = &s, .num_sge = 1 };
			if (recv1(B.qp, &r) || send_and_reap())
				snprintf(fast_path, sizeof fast_path, "a first SEND failed: %s", fail_why ? fail_why : "post failed");
			else
				fast_rows();
		}
		cm_close();
		close_end(&A);
		close_end(&B);
		return;
	}
	int e = choose_gid();
	if (!e && !(e = new_end(&A)) && !(e = new_end(&B)))
		if (!(e = to_init(A.qp)) && !(e = to_rtr(A.qp, B.qp->qp_num)) && !(e = to_rts(A.qp)) &&
		    !(e = to_init(B.qp)) && !(e = to_rtr(B.qp, A.qp->qp_num)))
			e = to_rts(B.qp);
	if (e) {
		snprintf(fast_path, sizeof fast_path, "no connected RC pair on %s: %s", ibv_get_device_name(dev), strerror(e));
	} else {
		struct ibv_sge s = sge(&B, 0, 64);
		struct ibv_recv_wr r = { .sg_list = &s, .num_sge = 1 };
		if (recv1(B.qp, &r) || send_and_reap())
			snprintf(fast_path, sizeof fast_path, "a first SEND failed: %s", fail_why ? fail_why : "post failed");
		else
			fast_rows();
	}
	close_end(&A);
	close_end(&B);
}

/* ---- the connection manager's rows (cmd/ibvcost/cm.go) ---- */

/*
 * On the IPv4 address of the device's netdev (sysfs names it), a dialer on
 * this thread and a listener served by a thread of its own, each on an
 * event channel opened beforehand; RC QPs of one WR and SGE each way,
 * created by rdma_create_qp. Timed only (the counting pass skips them,
 * as ibvcost does, whose work spans goroutines).
 */
static int cm_netdev_addr(struct sockaddr_in *sin)
{
	char path[256], nd[IFNAMSIZ + 2] = "";
	snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/0", ibv_get_device_name(dev), PORT);
	FILE *f = fopen(path, "r");
	if (f) {
		if (!fgets(nd, sizeof nd, f))
			nd[0] = 0;
		fclose(f);
	}
	nd[strcspn(nd, "\n")] = 0;
	if (!nd[0])
		return cm_addr(sin); /* siw: the netdev whose MAC is GID 0 */
	struct ifaddrs *ifs, *i;
	if (getifaddrs(&ifs))
		return errno;
	int e = EADDRNOTAVAIL;
	for (i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !strcmp(i->ifa_name, nd)) {
			*sin = *(struct sockaddr_in *)i->ifa_addr;
			e = 0;
			break;
		}
	freeifaddrs(ifs);
	return e;
}

static struct rdma_event_channel *cms_ch; /* the listener's */
static struct rdma_cm_id *cms_listen;
static long long cms_accept_ns;
static int cms_err;

static int cm_wait(struct rdma_event_channel *ch, enum rdma_cm_event_type want, struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev))
		return errno;
	int e = ev->event == want ? 0 : ev->status < 0 ? -ev->status : EPROTO;
	if (id)
		*id = ev->id;
	rdma_ack_cm_event(ev);
	return e;
}

static struct ibv_qp_init_attr cm_qp_attr(void)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	return a;
}

/* cm_server accepts one connection, times the accept, and tears it down
 * once the dialer disconnects. */
static void *cm_server(void *arg)
{
	struct rdma_cm_id *id = NULL;
	int e = cm_wait(cms_ch, RDMA_CM_EVENT_CONNECT_REQUEST, &id);
	if (!e) {
		struct ibv_qp_init_attr a = cm_qp_attr();
		if (rdma_create_qp(id, NULL, &a)) {
			e = errno;
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			id = NULL;
		}
	}
	if (!e) {
		struct rdma_conn_param p = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
					     .rnr_retry_count = 7 };
		long long t0 = now();
		if (rdma_accept(id, &p))
			e = errno;
		else
			e = cm_wait(cms_ch, RDMA_CM_EVENT_ESTABLISHED, NULL);
		cms_accept_ns = now() - t0;
	}
	if (!e)
		e = cm_wait(cms_ch, RDMA_CM_EVENT_DISCONNECTED, NULL);
	if (id) {
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
	}
	cms_err = e;
	return NULL;
}

static void add_sample(struct row *r, long long d)
{
	struct meas m = { .r = r, .mode = TIMED };
	m.t0 = now() - d; /* m_end takes the clock again: d, plus a clock read */
	m_end(&m, 0, "", 1, 1);
}

static void cm_rows(void)
{
	if (count_pass)
		return;
	struct sockaddr_in sin;
	struct rdma_event_channel *ch = NULL;
	const char *what = "address";
	int e = cm_netdev_addr(&sin);
	if (!e) {
		what = "listen";
		sin.sin_port = 0;
		if (!(ch = rdma_create_event_channel()) || !(cms_ch = rdma_create_event_channel()) ||
		    rdma_create_id(cms_ch, &cms_listen, NULL, RDMA_PS_TCP) ||
		    rdma_bind_addr(cms_listen, (struct sockaddr *)&sin) || rdma_listen(cms_listen, 0))
			e = errno ? errno : EIO;
		sin.sin_port = rdma_get_src_port(cms_listen);
	}
	CYCLE(n_calls) {
		if (e)
			break;
		struct rdma_cm_id *id = NULL;
		if ((e = MEASURE("cm_create_id", counting, "rdma_create_id", rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ? errno : 0)))
			break;
		e = MEASURE("cm_resolve_addr", counting, "rdma_resolve_addr",
			    rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 5000) ? errno : cm_wait(ch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL));
		if (!e)
			e = MEASURE("cm_resolve_route", counting, "rdma_resolve_route",
				    rdma_resolve_route(id, 5000) ? errno : cm_wait(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL));
		if (e) {
			rdma_destroy_id(id);
			break;
		}
		if ((e = MEASURE("cm_destroy_id", counting, "rdma_destroy_id", rdma_destroy_id(id) ? errno : 0)))
			break;

		/* A connection: resolved, its QP created, untimed. */
		what = "a connection's set-up";
		id = NULL;
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
			e = errno;
			break;
		}
		if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 5000))
			e = errno;
		else if (!(e = cm_wait(ch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL))) {
			if (rdma_resolve_route(id, 5000))
				e = errno;
			else if (!(e = cm_wait(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL))) {
				struct ibv_qp_init_attr a = cm_qp_attr();
				if (rdma_create_qp(id, NULL, &a))
					e = errno;
			}
		}
		pthread_t srv;
		if (!e && (e = pthread_create(&srv, NULL, cm_server, NULL)) == 0) {
			struct rdma_conn_param p = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
						     .rnr_retry_count = 7 };
			e = MEASURE("cm_connect", counting, "rdma_connect",
				    rdma_connect(id, &p) ? errno : cm_wait(ch, RDMA_CM_EVENT_ESTABLISHED, NULL));
			if (!e)
				e = MEASURE("cm_disconnect", counting, "rdma_disconnect",
					    rdma_disconnect(id) ? errno : cm_wait(ch, RDMA_CM_EVENT_DISCONNECTED, NULL));
			if (e)
				rdma_disconnect(id); /* lets the server go */
			pthread_join(srv, NULL);
			if (!e && cms_err)
				e = cms_err, what = "rdma_accept";
			if (!e && counting == TIMED)
				add_sample(row("cm_accept"), cms_accept_ns);
		}
		if (id->qp)
			rdma_destroy_qp(id);
		rdma_destroy_id(id);
		if (e)
			break;
	}
	if (e)
		for (int i = 0; i < nrows; i++)
			if (!strcmp(rows[i].path, "cm") && !rows[i].ns && !rows[i].failed && !rows[i].skipped[0])
				snprintf(rows[i].skipped, sizeof rows[i].skipped, "%s: %s", what, strerror(e));
	if (cms_listen)
		rdma_destroy_id(cms_listen);
	if (cms_ch)
		rdma_destroy_event_channel(cms_ch);
	if (ch)
		rdma_destroy_event_channel(ch);
	cms_listen = NULL, cms_ch = NULL;
}

/* The paths measured (-p: slow and any of fast and cm). */
static int do_fast = 1, do_cm = 1;
static const char not_measured[] = "not measured (-paths)"; /* ibvcost's words */

static void run_pass(void)
{
	fast_path[0] = 0;
	slow_path();
	if (do_fast)
		fast();
	else
		skip_rest("fast", not_measured);
	if (fast_path[0])
		skip_rest("fast", "no fast path (see fast_path)");
	if (do_cm)
		cm_rows();
	else
		skip_rest("cm", not_measured);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	pd = NULL;
	ctx = NULL;
}

/* ---- JSON ---- */

static void jstr(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void read_line(const char *path, const char *key, char *out, size_t n)
{
	FILE *f = fopen(path, "r");
	char l[512];
	out[0] = 0;
	if (!f)
		return;
	while (fgets(l, sizeof l, f)) {
		char *v = l;
		if (key) {
			if (strncmp(l, key, strlen(key)) || !(v = strchr(l, ':')))
				continue;
			v++;
			while (*v == ' ' || *v == '\t')
				v++;
		}
		size_t l = strcspn(v, "\n");
		if (l >= n)
			l = n - 1;
		memcpy(out, v, l);
		out[l] = 0;
		break;
	}
	fclose(f);
}

/* pinned: "cpu N" with -c N (the report's "pinned"), else empty. */
static char pinned[16];

static void report(void)
{
	struct utsname u;
	char cpu[256], cs[64];
	uname(&u);
	read_line("/proc/cpuinfo", "model name", cpu, sizeof cpu);
	read_line("/sys/devices/system/clocksource/clocksource0/current_clocksource", NULL, cs, sizeof cs);
	printf("{\n  \"tool\": \"rdma-core\",\n  \"device\": ");
	jstr(ibv_get_device_name(dev));
	printf(",\n  \"kernel\": ");
	jstr(u.release);
	printf(",\n  \"cpu\": ");
	jstr(cpu);
	printf(",\n  \"clocksource\": ");
	jstr(cs);
	if (pinned[0]) {
		printf(",\n  \"pinned\": ");
		jstr(pinned);
	}
	printf(",\n  \"n\": %d,\n  \"big_n\": %d,\n  \"max_mr\": %lld,\n  \"counted\": %d,\n  \"floor_ns\": %lld,\n  \"counter\": ",
	       n_calls, big_n, max_mr, COUNTED, floor_ns);
	jstr(counter_desc);
	if (fast_path[0]) {
		printf(",\n  \"fast_path\": ");
		jstr(fast_path);
	}
	printf(",\n  \"rows\": [");
	for (int i = 0; i < nrows; i++) {
		struct row *r = &rows[i];
		printf("%s\n    {\"name\": \"%s\", \"path\": \"%s\", \"verb\": \"%s\"", i ? "," : "", r->name, r->path, r->verb);
		if (r->size)
			printf(", \"size\": %lld", r->size);
		if (!r->skipped[0] && !r->ns)
			snprintf(r->skipped, sizeof r->skipped, "not measured");
		if (r->skipped[0]) {
			printf(", \"n\": 0, \"median_ns\": 0, \"p99_ns\": 0, \"min_ns\": 0, \"mean_ns\": 0, \"transport\": \"-\", \"skipped\": ");
			jstr(r->skipped);
			printf("}");
			continue;
		}
		qsort(r->samples, r->ns, sizeof r->samples[0], cmp_ll);
		long long sum = 0;
		for (int j = 0; j < r->ns; j++)
			sum += r->samples[j];
		printf(", \"n\": %d, \"median_ns\": %lld, \"p99_ns\": %lld, \"min_ns\": %lld, \"mean_ns\": %lld", r->ns,
		       r->samples[rank_of(r->ns, 0.5)], r->samples[rank_of(r->ns, 0.99)], r->samples[0], sum / r->ns);
		if (!strncmp(r->name, "msg_rate", 8) && sum > 0)
			printf(", \"per_second\": %.6g", r->ns * 1e9 / sum);
		const char *tr = "-";
		if (r->nc) {
			double med[NK], col[64];
			for (int k = 0; k < NK; k++) {
				for (int j = 0; j < r->nc; j++)
					col[j] = r->counts[j][k];
				qsort(col, r->nc, sizeof col[0], cmp_d);
				med[k] = col[rank_of(r->nc, 0.5)];
			}
			printf(", \"syscalls\": {\"total\": %.6g, \"ioctl\": %.6g, \"write\": %.6g, \"mmap\": %.6g, \"runtime\": %.6g}",
			       med[K_ALL], med[K_IOCTL], med[K_WRITE], med[K_MMAP], med[K_RT]);
			tr = med[K_IOCTL] > 0 && med[K_WRITE] > 0 ? "ioctl+write" : med[K_IOCTL] > 0 ? "ioctl" : med[K_WRITE] > 0 ? "write" : "none";
		}
		printf(", \"transport\": \"%s\"}", tr);
	}
	printf("\n  ]\n}\n");
}

int main(int argc, char **argv)
{
	const char *name = "rxe0";
	int o, hold = 0;
	int pin = -1;
	while ((o = getopt(argc, argv, "d:n:b:m:g:p:c:H")) != -1) {
		switch (o) {
		case 'p': {
			/* ibvcost's -paths: slow must be there. */
			char *list = strdup(optarg), *save = NULL;
			int slow = 0;
			do_fast = do_cm = 0;
			for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				if (!strcmp(t, "slow"))
					slow = 1;
				else if (!strcmp(t, "fast"))
					do_fast = 1;
				else if (!strcmp(t, "cm"))
					do_cm = 1;
				else
					die("-p: unknown path %s (want slow, fast or cm)", t);
			}
			if (!slow)
				die("-p: %s leaves out slow, whose rows open the device the others use", optarg);
			free(list);
			break;
		}
		case 'H': hold = 1; break;
		case 'd': name = optarg; break;
		case 'n': n_calls = atoi(optarg); break;
		case 'b': big_n = atoi(optarg); break;
		case 'm': max_mr = atoll(optarg); break;
		case 'g': gid_index = atoi(optarg); break;
		case 'c': pin = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: verbs_cost [-d dev] [-n calls] [-b big-calls] [-m max-mr-bytes] [-g gid-index] [-p slow,fast,cm] [-c cpu]\n"
					"       verbs_cost -H\n");
			return 2;
		}
	}
	if (hold) {
		/* Register the syscall tracepoint (and perf's per-task context-switch
		 * hooks) from this single-threaded process and keep them registered:
		 * later counters, in multi-threaded programs too, then patch no
		 * kernel text. Says "holding" on stdout once done. */
		const char *why = ctr_open();
		if (why)
			die("%s", why);
		printf("holding\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	if (pin >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(pin, &set);
		if (sched_setaffinity(0, sizeof set, &set))
			die("pinning to CPU %d: %s", pin, strerror(errno));
		snprintf(pinned, sizeof pinned, "cpu %d", pin);
	}
	if (n_calls < 1 || big_n < 1)
		die("-n and -b must be positive");
	specs();
	measure_floor();
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			dev = list[i];
	if (!dev)
		die("no RDMA device %s", name);
	const char *why = ctr_open();
	if (why) {
		snprintf(counter_desc, sizeof counter_desc, "none: %s", why);
	} else {
		count_pass = 1;
		run_pass();
		ctr_close();
		count_pass = 0;
	}
	run_pass();
	report();
	return 0;
}
