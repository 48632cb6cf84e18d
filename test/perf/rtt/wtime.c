/*
 * wtime.c: an LD_PRELOAD library that times every write(2) crtt.c's
 * rsocket makes between wtime_reset() and wtime_report() (crtt calls them
 * around its timed loop when they are there): in that loop the only writes
 * are librxe's doorbells (post_send_db: a POST_SEND command to the uverbs
 * descriptor), so the report is the kernel's part of each send, read from
 * CLOCK_MONOTONIC just before and just after the syscall, as a goverbs
 * build with the tag goverbs_dbtime times its own (test/perf/rtt.sh
 * DBTIME=1). On Linux 6.1 rxe runs a send's whole exchange inside it.
 *   gcc -O2 -shared -fPIC -o wtime.so test/perf/rtt/wtime.c
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAXN (1 << 20)
static long long d[MAXN];
static int n, on;
static ssize_t (*next_write)(int, const void *, size_t);

static long long mono(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

ssize_t write(int fd, const void *buf, size_t count)
{
	if (!next_write)
		next_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	if (!on || fd <= 2)
		return next_write(fd, buf, count);
	long long t0 = mono();
	ssize_t r = next_write(fd, buf, count);
	if (n < MAXN)
		d[n++] = mono() - t0;
	return r;
}

void wtime_reset(void)
{
	n = 0;
	on = 1;
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

/* wtime_report prints "WHO doorbell n N p50 X mean Y us" and stops timing. */
void wtime_report(const char *who)
{
	on = 0;
	if (n == 0)
		return;
	long long sum = 0;
	for (int i = 0; i < n; i++)
		sum += d[i];
	qsort(d, n, sizeof d[0], cmp);
	printf("%s doorbell n %d p50 %.2f mean %.2f us\n", who, n, d[n / 2] / 1e3, sum / (double)n / 1e3);
}
