// crtt: librdmacm's rsocket ping-pong with every round trip timed, the
// twin of gortt (test/perf/rtt/gortt). Both sides spin as rstream's default
// mode does (nonblocking rsend/rrecv in a loop); each round trip is timed
// by three CLOCK_MONOTONIC reads (start, after the send, end). Prints the
// distribution, not only the mean: under emulation a few slow round trips
// can carry the mean.
//   crtt ADDR PORT server     # serve
//   crtt ADDR PORT [N [SIZE]] # client: N round trips (5000) of SIZE bytes (64)
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <rdma/rsocket.h>
#include <dlfcn.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static long long mono(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

// cpu prints the process's CPU time (all its threads) and context switches
// since *r0, per round trip: where a side's time goes, user code or kernel.
static void cpu(FILE *f, const char *who, const struct rusage *r0, long n)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	double u = (r.ru_utime.tv_sec - r0->ru_utime.tv_sec) * 1e6 + (r.ru_utime.tv_usec - r0->ru_utime.tv_usec);
	double k = (r.ru_stime.tv_sec - r0->ru_stime.tv_sec) * 1e6 + (r.ru_stime.tv_usec - r0->ru_stime.tv_usec);
	fprintf(f, "%s cpu n %ld user %.1f sys %.1f us/rt nvcsw %ld nivcsw %ld\n", who, n, n ? u / n : 0, n ? k / n : 0,
		r.ru_nvcsw - r0->ru_nvcsw, r.ru_nivcsw - r0->ru_nivcsw);
	fflush(f);
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

// xfer moves n bytes, spinning on EAGAIN; false once the peer closed.
static int xfer(int s, char *b, int n, int send)
{
	int off = 0;
	while (off < n) {
		ssize_t r = send ? rsend(s, b + off, n - off, MSG_DONTWAIT) : rrecv(s, b + off, n - off, MSG_DONTWAIT);
		if (r > 0)
			off += r;
		else if (r == 0)
			return 0;
		else if (errno != EAGAIN && errno != EWOULDBLOCK) {
			perror(send ? "rsend" : "rrecv");
			exit(1);
		}
	}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: crtt ADDR PORT server | crtt ADDR PORT [N [SIZE]]\n");
		return 2;
	}
	int server = argc > 3 && strcmp(argv[3], "server") == 0;
	int n = !server && argc > 3 ? atoi(argv[3]) : 5000;
	int size = !server && argc > 4 ? atoi(argv[4]) : 64;
	if (n < 1 || size < 1)
		return 2;
	char *buf = calloc(1, size);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
	if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) {
		fprintf(stderr, "crtt: bad address %s\n", argv[1]);
		return 2;
	}
	int s = rsocket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (server) {
		rsetsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (rbind(s, (struct sockaddr *)&a, sizeof a) || rlisten(s, 1)) {
			perror("crtt: listen");
			return 1;
		}
		int c = raccept(s, NULL, NULL);
		if (c < 0) {
			perror("crtt: raccept");
			return 1;
		}
		rfcntl(c, F_SETFL, O_NONBLOCK);
		struct rusage r0;
		getrusage(RUSAGE_SELF, &r0);
		long served = 0;
		while (xfer(c, buf, size, 0) && xfer(c, buf, size, 1))
			served++;
		cpu(stderr, "rdma-core srv", &r0, served); /* from the accept to the client's close */
		return 0;
	}
	// The server may not listen yet: retry for 10 s.
	for (int i = 0; rconnect(s, (struct sockaddr *)&a, sizeof a); i++) {
		if (i == 50) {
			perror("crtt: rconnect");
			return 1;
		}
		rclose(s);
		usleep(200000);
		s = rsocket(AF_INET, SOCK_STREAM, 0);
	}
	rfcntl(s, F_SETFL, O_NONBLOCK);
	/* RTT_WARM_US: spin that long before the first timed round trip (gortt too) */
	const char *w = getenv("RTT_WARM_US");
	for (long long end = mono() + (w ? atoll(w) : 0) * 1000; mono() < end;)
		;
	long long *ts = malloc(n * sizeof *ts), *ws = malloc(n * sizeof *ws), sum = 0;
	/* wtime.so's doorbell timer, when preloaded (rtt.sh DBTIME=1) */
	void (*wreset)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "wtime_reset");
	void (*wreport)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "wtime_report");
	if (wreset)
		wreset();
	struct rusage r0;
	getrusage(RUSAGE_SELF, &r0);
	long long t0 = mono();
	for (int i = 0; i < n; i++) {
		long long st = mono();
		int ok = xfer(s, buf, size, 1);
		ws[i] = mono() - st;
		if (!ok || !xfer(s, buf, size, 0)) {
			fprintf(stderr, "crtt: the server closed\n");
			return 1;
		}
		ts[i] = mono() - st;
		sum += ts[i];
	}
	long long wall = mono() - t0;
	if (wreport)
		wreport("rdma-core");
	cpu(stdout, "rdma-core", &r0, n);
	rclose(s);
	/* gortt's split: each round trip's send and the rest (the wait and the receive) */
	long long *rs = malloc(n * sizeof *rs), wsum = 0, rsum = 0;
	for (int i = 0; i < n; i++) {
		rs[i] = ts[i] - ws[i];
		wsum += ws[i];
		rsum += rs[i];
	}
	qsort(ws, n, sizeof *ws, cmp);
	qsort(rs, n, sizeof *rs, cmp);
	printf("rdma-core split write p50 %.2f mean %.2f read p50 %.2f mean %.2f us\n", ws[n / 2] / 1e3, wsum / 1e3 / n,
	       rs[n / 2] / 1e3, rsum / 1e3 / n);
	/* gortt's tenths: slow round trips and time by tenth of the run */
	int tover[10] = {0};
	double tms[10] = {0};
	for (int i = 0; i < n; i++) {
		int k = (int)((long long)i * 10 / n);
		tover[k] += ts[i] > 100000;
		tms[k] += ts[i] / 1e6;
	}
	printf("rdma-core tenths over100us");
	for (int k = 0; k < 10; k++)
		printf(" %d", tover[k]);
	printf(" ms");
	for (int k = 0; k < 10; k++)
		printf(" %.1f", tms[k]);
	printf("\n");
	qsort(ts, n, sizeof *ts, cmp);
	int over = 0;
	for (int i = 0; i < n; i++)
		over += ts[i] > 100000;
	printf("rdma-core n %d mean %.1f us (wall %.1f) min %.1f p10 %.1f p50 %.1f p90 %.1f p99 %.1f max %.1f over100us %d\n",
	       n, sum / 1e3 / n, wall / 1e3 / n, ts[0] / 1e3, ts[n / 10] / 1e3, ts[n / 2] / 1e3,
	       ts[n * 9 / 10] / 1e3, ts[n * 99 / 100] / 1e3, ts[n - 1] / 1e3, over);
	return 0;
}
