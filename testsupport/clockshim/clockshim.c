/*
 * clockshim: an LD_PRELOAD library that shifts a process's wall clock
 * (CLOCK_REALTIME and CLOCK_REALTIME_COARSE through clock_gettime,
 * gettimeofday and time) by an offset another process changes while it
 * runs. The offset is a signed 64-bit count of nanoseconds at the start of
 * the file named by CLOCKSHIM_FILE, mapped shared, so a write to the file
 * is seen by the very next clock read. Monotonic clocks are left alone.
 * Built by testsupport.StartRedisSteppable with the system C compiler.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime;
static volatile int64_t *offset_ns;

static void clockshim_init(void) {
	if (!real_clock_gettime)
		real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
	if (offset_ns)
		return;
	const char *path = getenv("CLOCKSHIM_FILE");
	if (!path)
		return;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	void *p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED)
		offset_ns = (volatile int64_t *)p;
}

__attribute__((constructor)) static void clockshim_ctor(void) { clockshim_init(); }

static int64_t clockshim_offset(void) {
	return offset_ns ? __atomic_load_n(offset_ns, __ATOMIC_ACQUIRE) : 0;
}

static void shift(struct timespec *ts) {
	int64_t ns = (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec + clockshim_offset();
	int64_t sec = ns / 1000000000LL, rem = ns % 1000000000LL;
	if (rem < 0) {
		rem += 1000000000LL;
		sec--;
	}
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = (long)rem;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	clockshim_init();
	int r = real_clock_gettime(id, ts);
	if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
		shift(ts);
	return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
	(void)tz;
	struct timespec ts;
	int r = clock_gettime(CLOCK_REALTIME, &ts);
	if (r == 0) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return r;
}

time_t time(time_t *out) {
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return (time_t)-1;
	if (out)
		*out = ts.tv_sec;
	return ts.tv_sec;
}
