/*
 * slowloop.c: test/perf/slowloop (main.go) through rdma-core's libibverbs: one
 * slow-path verb N times on a device, for test/perf/slowloop.sh.
 *   slowloop DEVICE VERB N    (VERB: query_device, query_port, query_gid, pd, open)
 * It prints the loop's mean wall time per call (set-up excluded).
 */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void report(const char *verb, int n, long long t0)
{
	printf("slowloop rdma-core %s %d calls: %lld ns/call\n", verb, n, (now_ns() - t0) / (n > 0 ? n : 1));
}

int main(int argc, char **argv)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx;
	int n, i, num;

	if (argc != 4) {
		fprintf(stderr, "usage: slowloop DEVICE VERB N\n");
		return 2;
	}
	n = atoi(argv[3]);
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
