/*
 * xchg.c: test/perf/xchg/goxchg's loop over libibverbs (rdma-core's librxe): two
 * RC QPs of one context, each iteration a receive posted on the second, an
 * inline 64-byte RDMA WRITE with immediate from the first into the second's
 * buffer, both completions polled. With test/perf/rtt/wtime.c preloaded it
 * also reports the doorbells' write(2) times.
 *   xchg-c DEVICE N ROUNDS
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

static struct ibv_cq *cq;
static struct ibv_qp *qa, *qb;
static struct ibv_mr *mr;
static char buf[4096] __attribute__((aligned(4096)));

static long long mono(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "xchg-c: %s failed\n", what);
	exit(1);
}

/* connect moves q to RTS towards peer on port 1, GID index 1 (the RoCE v2
 * address), with the timers goverbs' ConnectPair uses. */
static void connect_qp(struct ibv_qp *q, struct ibv_qp *peer, union ibv_gid *gid)
{
	struct ibv_qp_attr x = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
	if (ibv_modify_qp(q, &x, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	memset(&x, 0, sizeof x);
	x.qp_state = IBV_QPS_RTR;
	x.path_mtu = IBV_MTU_1024;
	x.dest_qp_num = peer->qp_num;
	x.max_dest_rd_atomic = 1;
	x.min_rnr_timer = 12;
	x.ah_attr.is_global = 1;
	x.ah_attr.grh.dgid = *gid;
	x.ah_attr.grh.sgid_index = 1;
	x.ah_attr.grh.hop_limit = 64;
	x.ah_attr.port_num = 1;
	if (ibv_modify_qp(q, &x, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&x, 0, sizeof x);
	x.qp_state = IBV_QPS_RTS;
	x.timeout = 14;
	x.retry_cnt = 7;
	x.rnr_retry = 7;
	x.max_rd_atomic = 1;
	if (ibv_modify_qp(q, &x, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

static void step(void)
{
	struct ibv_recv_wr rw = {.wr_id = 1}, *bad_rw;
	struct ibv_sge s = {.addr = (uintptr_t)buf + 2048, .length = 64, .lkey = mr->lkey};
	struct ibv_send_wr sw = {.wr_id = 2, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				 .send_flags = IBV_SEND_INLINE, .imm_data = htobe32(7)}, *bad_sw;
	struct ibv_wc wc[16];
	sw.wr.rdma.remote_addr = (uintptr_t)buf;
	sw.wr.rdma.rkey = mr->rkey;
	if (ibv_post_recv(qb, &rw, &bad_rw))
		die("ibv_post_recv");
	if (ibv_post_send(qa, &sw, &bad_sw))
		die("ibv_post_send");
	for (int got = 0; got < 2;) {
		int k = ibv_poll_cq(cq, 16, wc);
		if (k < 0)
			die("ibv_poll_cq");
		for (int i = 0; i < k; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				die(ibv_wc_status_str(wc[i].status));
		got += k;
	}
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: xchg-c DEVICE N ROUNDS\n");
		return 2;
	}
	int n = atoi(argv[2]), rounds = atoi(argv[3]);
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	for (int i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), argv[1]))
			ctx = ibv_open_device(l[i]);
	if (!ctx)
		die("opening the device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
				      .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1,
					      .max_recv_sge = 1, .max_inline_data = 64}};
	if (!pd || !cq || !(qa = ibv_create_qp(pd, &ia)) || !(qb = ibv_create_qp(pd, &ia)))
		die("creating the objects");
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 1, &gid))
		die("ibv_query_gid");
	connect_qp(qa, qb, &gid);
	connect_qp(qb, qa, &gid);
	if (!(mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)))
		die("ibv_reg_mr");
	for (int i = 0; i < 100; i++)
		step();
	/* wtime.so's doorbell timer, when preloaded */
	void (*wreset)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "wtime_reset");
	void (*wreport)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "wtime_report");
	for (int r = 0; r < rounds; r++) {
		if (wreset)
			wreset();
		long long t0 = mono();
		for (int i = 0; i < n; i++)
			step();
		printf("rdma-core loop %.2f us/iter\n", (mono() - t0) / (double)n / 1e3);
		if (wreport)
			wreport("rdma-core");
		fflush(stdout);
	}
	return 0;
}
