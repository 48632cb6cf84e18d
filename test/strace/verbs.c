/* The slow-path verb sequence of test/strace/goverbs, through libibverbs, for
 * counting rdma-core's syscalls per verb under strace. Each verb is preceded
 * by a marker: write(-1, "<verb>") fails with EBADF and shows in the trace.
 * Build: gcc -O2 -o verbs-rdmacore verbs.c -libverbs (test/strace/compare.sh). */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void mark(const char *verb) { if (write(-1, verb, strlen(verb)) < 0) {} }
#define CHECK(x, what) do { if (!(x)) { perror(what); exit(1); } } while (0)

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "rxe0";
	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			dev = list[i];
	CHECK(dev, "device");
	mark("Open");
	struct ibv_context *ctx = ibv_open_device(dev);
	CHECK(ctx, "ibv_open_device");
	struct ibv_device_attr da;
	mark("QueryDevice");
	CHECK(!ibv_query_device(ctx, &da), "ibv_query_device");
	struct ibv_port_attr pa;
	mark("QueryPort");
	CHECK(!ibv_query_port(ctx, 1, &pa), "ibv_query_port");
	mark("AllocPD");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd, "ibv_alloc_pd");
	void *buf = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mark("RegMR");
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 1 << 16, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "ibv_reg_mr");
	mark("CreateCompChannel");
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	CHECK(ch, "ibv_create_comp_channel");
	mark("CreateCQ");
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, ch, 0);
	CHECK(cq, "ibv_create_cq");
	mark("ReqNotifyCQ");
	CHECK(!ibv_req_notify_cq(cq, 0), "ibv_req_notify_cq");
	struct ibv_qp_init_attr qi = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 } };
	mark("CreateQP");
	struct ibv_qp *qp = ibv_create_qp(pd, &qi);
	CHECK(qp, "ibv_create_qp");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	mark("ModifyQP");
	CHECK(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), "ibv_modify_qp");
	mark("QueryQP");
	CHECK(!ibv_query_qp(qp, &a, IBV_QP_STATE, &qi), "ibv_query_qp");
	mark("DestroyQP");
	CHECK(!ibv_destroy_qp(qp), "ibv_destroy_qp");
	mark("DestroyCQ");
	CHECK(!ibv_destroy_cq(cq), "ibv_destroy_cq");
	mark("DestroyCompChannel");
	CHECK(!ibv_destroy_comp_channel(ch), "ibv_destroy_comp_channel");
	mark("DeregMR");
	CHECK(!ibv_dereg_mr(mr), "ibv_dereg_mr");
	mark("DeallocPD");
	CHECK(!ibv_dealloc_pd(pd), "ibv_dealloc_pd");
	mark("Close");
	CHECK(!ibv_close_device(ctx), "ibv_close_device");
	mark("end");
	return 0;
}
