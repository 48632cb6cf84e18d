/*
 * slowloop.c: test/perf/slowloop (main.go) through rdma-core's libibverbs: one
 * slow-path verb N times on a device, for test/perf/slowloop.sh.
 *   slowloop DEVICE VERB N [ADDR]
 * (VERB: query_device, query_port, query_gid, pd, cq, mr (reg and dereg of 4 KiB;
 * mr:BYTES of an anonymous mapping of BYTES, populated and MADV_DONTFORK as mmap.Anonymous's),
 * modify (RESET -> INIT -> RESET of an RC QP), ah (create and destroy an AH
 * to port 1's own RoCE v2 IPv4 GID), open; cm_id, cm_resolve
 * through librdmacm on one event channel, as main.go says; poll_empty and
 * post_recv, fast-path calls in a straight loop, fast.go's.)
 * It prints the loop's mean wall time per call (set-up excluded).
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void report(const char *verb, int n, long long t0)
{
	long long d = now_ns() - t0;
	struct rusage ru;

	/* The process's page faults and context switches so far (set-up
	 * included): two runs' difference is the loop's. */
	getrusage(RUSAGE_SELF, &ru);
	printf("slowloop rdma-core %s %d calls: %lld ns/call; minflt %ld, nvcsw %ld, nivcsw %ld, utime %ld us, stime %ld us\n",
	       verb, n, d / (n > 0 ? n : 1), ru.ru_minflt, ru.ru_nvcsw, ru.ru_nivcsw,
	       ru.ru_utime.tv_sec * 1000000L + ru.ru_utime.tv_usec, ru.ru_stime.tv_sec * 1000000L + ru.ru_stime.tv_usec);
}

/* wait_event takes the channel's next event, which must be want. */
static int wait_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	int ok;

	if (rdma_get_cm_event(ch, &ev))
		return -1;
	ok = ev->event == want && ev->status == 0;
	rdma_ack_cm_event(ev);
	return ok ? 0 : -1;
}

/* cm is the loop of the connection manager's verbs: cm_id (create and
 * destroy) and cm_resolve (create, resolve address and route, destroy). */
static int cm(const char *verb, int n, const char *addr)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(7471) };
	int resolve = !strcmp(verb, "cm_resolve");
	long long t0;

	if (!ch)
		return 1;
	if (!resolve && strcmp(verb, "cm_id")) {
		fprintf(stderr, "slowloop: no verb %s\n", verb);
		return 2;
	}
	if (resolve && (!addr || inet_pton(AF_INET, addr, &dst.sin_addr) != 1)) {
		fprintf(stderr, "slowloop: cm_resolve needs an IPv4 ADDR\n");
		return 2;
	}
	t0 = now_ns();
	for (int i = 0; i < n; i++) {
		struct rdma_cm_id *id;
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
			return 1;
		if (resolve && (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) ||
				wait_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED) ||
				rdma_resolve_route(id, 2000) ||
				wait_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED))) {
			fprintf(stderr, "slowloop: %s failed\n", verb);
			return 1;
		}
		if (rdma_destroy_id(id))
			return 1;
	}
	report(verb, n, t0);
	rdma_destroy_event_channel(ch);
	return 0;
}

#define FAST_RECV_DEPTH 16384 /* main.go's fastRecvDepth */

/* fast is fast.go's runFast: a straight loop of one fast-path call,
 * poll_empty (ibv_poll_cq of an empty CQ, 16 asked) or post_recv
 * (ibv_post_recv of one request of one 64-byte SGE into a QP in INIT whose
 * receive queue holds the run's every request). */
static int fast(struct ibv_pd *pd, struct ibv_cq *cq, const char *verb, int n)
{
	long long t0;

	if (!strcmp(verb, "poll_empty")) {
		struct ibv_wc wc[16];
		t0 = now_ns();
		for (int i = 0; i < n; i++)
			if (ibv_poll_cq(cq, 16, wc) != 0) {
				fprintf(stderr, "slowloop: poll of an empty CQ failed\n");
				return 1;
			}
		report(verb, n, t0);
		return 0;
	}
	if (n > FAST_RECV_DEPTH) {
		fprintf(stderr, "slowloop: post_recv: at most %d calls\n", FAST_RECV_DEPTH);
		return 2;
	}
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 1, .max_recv_wr = FAST_RECV_DEPTH, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_LOCAL_WRITE };
	static char page[4096] __attribute__((aligned(4096)));
	struct ibv_mr *mr = qp ? ibv_reg_mr(pd, page, sizeof page, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr || ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		fprintf(stderr, "slowloop: post_recv's QP failed\n");
		return 1;
	}
	struct ibv_sge sge = { .addr = (uintptr_t)page, .length = 64, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;
	t0 = now_ns();
	for (int i = 0; i < n; i++)
		if (ibv_post_recv(qp, &wr, &bad)) {
			fprintf(stderr, "slowloop: post_recv failed\n");
			return 1;
		}
	report(verb, n, t0);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx;
	int n, i, num;

	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: slowloop DEVICE VERB N [ADDR]\n");
		return 2;
	}
	n = atoi(argv[3]);
	if (!strncmp(argv[2], "cm_", 3))
		return cm(argv[2], n, argc == 5 ? argv[4] : NULL);
	list = ibv_get_device_list(&num);
	for (i = 0; list && i < num; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "slowloop: no device %s\n", argv[1]);
		return 1;
	}
	if (!strcmp(argv[2], "open")) {
		long long t0 = now_ns();
		for (i = 0; i < n; i++) {
			ctx = ibv_open_device(dev);
			if (!ctx || ibv_close_device(ctx))
				return 1;
		}
		report(argv[2], n, t0);
		return 0;
	}
	ctx = ibv_open_device(dev);
	if (!ctx)
		return 1;
	/* mr and modify's objects, made before every loop (main.go makes the same). */
	struct ibv_pd *pd0 = ibv_alloc_pd(ctx);
	struct ibv_cq *cq0 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!strcmp(argv[2], "poll_empty") || !strcmp(argv[2], "post_recv"))
		return pd0 && cq0 ? fast(pd0, cq0, argv[2], n) : 1;
	static char page[4096] __attribute__((aligned(4096)));
	char *buf = page;
	size_t buf_len = sizeof page;
	if (!strncmp(argv[2], "mr:", 3)) {
		buf_len = strtoul(argv[2] + 3, NULL, 10);
		buf = mmap(NULL, buf_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (buf_len == 0 || buf == MAP_FAILED || madvise(buf, buf_len, MADV_DONTFORK)) {
			fprintf(stderr, "slowloop: %s: no mapping of %zu bytes\n", argv[2], buf_len);
			return 2;
		}
		argv[2] = "mr";
	}
	struct ibv_qp_init_attr qa = { .send_cq = cq0, .recv_cq = cq0, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp0 = pd0 && cq0 ? ibv_create_qp(pd0, &qa) : NULL;
	if (!qp0)
		return 1;
	/* ah's address: main.go's ownAV, verbs_cost's av(). */
	struct ibv_ah_attr ah_attr = { .is_global = 1, .port_num = 1 };
	if (!strcmp(argv[2], "ah")) {
		int pick = -1;
		struct ibv_port_attr pa;
		if (ibv_query_port(ctx, 1, &pa))
			return 1;
		for (int k = 0; k < pa.gid_tbl_len; k++) {
			struct ibv_gid_entry e;
			static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
			if (ibv_query_gid_ex(ctx, 1, k, &e, 0))
				continue;
			if (pick < 0)
				pick = k;
			if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && !memcmp(e.gid.raw, v4, 12)) {
				pick = k;
				break;
			}
		}
		if (pick < 0 || ibv_query_gid(ctx, 1, pick, &ah_attr.grh.dgid))
			return 1;
		ah_attr.grh.sgid_index = pick;
		ah_attr.grh.hop_limit = 64;
	}
	long long t0 = now_ns();
	for (i = 0; i < n; i++) {
		int err = 0;
		if (!strcmp(argv[2], "query_device")) {
			struct ibv_device_attr_ex a;
			err = ibv_query_device_ex(ctx, NULL, &a);
		} else if (!strcmp(argv[2], "query_port")) {
			struct ibv_port_attr a;
			err = ibv_query_port(ctx, 1, &a);
		} else if (!strcmp(argv[2], "query_gid")) {
			union ibv_gid g;
			err = ibv_query_gid(ctx, 1, 0, &g);
		} else if (!strcmp(argv[2], "pd")) {
			struct ibv_pd *pd = ibv_alloc_pd(ctx);
			err = !pd || ibv_dealloc_pd(pd);
		} else if (!strcmp(argv[2], "cq")) {
			struct ibv_cq *cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
			err = !cq || ibv_destroy_cq(cq);
		} else if (!strcmp(argv[2], "mr")) {
			struct ibv_mr *mr = ibv_reg_mr(pd0, buf, buf_len,
						       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
			err = !mr || ibv_dereg_mr(mr);
		} else if (!strcmp(argv[2], "ah")) {
			struct ibv_ah *ah = ibv_create_ah(pd0, &ah_attr);
			err = !ah || ibv_destroy_ah(ah);
		} else if (!strcmp(argv[2], "modify")) {
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
						 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
			err = ibv_modify_qp(qp0, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
			struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };
			err = err || ibv_modify_qp(qp0, &r, IBV_QP_STATE);
		} else {
			fprintf(stderr, "slowloop: no verb %s\n", argv[2]);
			return 2;
		}
		if (err) {
			fprintf(stderr, "slowloop: %s failed\n", argv[2]);
			return 1;
		}
	}
	report(argv[2], n, t0);
	ibv_close_device(ctx);
	return 0;
}
