#include "base/ktime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t ktime_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ktime_cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t a;
	if (pthread_condattr_init(&a) || pthread_condattr_setclock(&a, CLOCK_MONOTONIC) ||
	    pthread_cond_init(cv, &a)) {
		fprintf(stderr, "sandbox-controller: pthread_cond_init failed\n");
		abort();
	}
	pthread_condattr_destroy(&a);
}

int ktime_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms)
{
	if (deadline_ms < 0)
		return pthread_cond_wait(cv, mu);
	struct timespec ts = { .tv_sec = (time_t)(deadline_ms / 1000),
			       .tv_nsec = (long)(deadline_ms % 1000) * 1000000 };
	return pthread_cond_timedwait(cv, mu, &ts);
}

void ktime_sleep_ms(int64_t ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
			       .tv_nsec = (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Reads exactly n decimal digits at *p into *v and advances *p; -1 if a
 * non-digit is found. */
static int digits(const char **p, int n, int *v)
{
	int x = 0;
	for (int i = 0; i < n; i++) {
		char ch = (*p)[i];
		if (ch < '0' || ch > '9')
			return -1;
		x = x * 10 + (ch - '0');
	}
	*p += n;
	*v = x;
	return 0;
}

static int expect(const char **p, char a, char b)
{
	if (**p != a && **p != b)
		return -1;
	(*p)++;
	return 0;
}

int ktime_parse_rfc3339(const char *s, time_t *out)
{
	int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
	const char *p = s;
	if (!s || digits(&p, 4, &y) || expect(&p, '-', '-') || digits(&p, 2, &mo) ||
	    expect(&p, '-', '-') || digits(&p, 2, &d) || expect(&p, 'T', 't') ||
	    digits(&p, 2, &h) || expect(&p, ':', ':') || digits(&p, 2, &mi) ||
	    expect(&p, ':', ':') || digits(&p, 2, &sec))
		return -1;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p == '+' ? 1 : -1;
		p++;
		if (digits(&p, 2, &oh) || expect(&p, ':', ':') || digits(&p, 2, &om))
			return -1;
	} else {
		return -1;
	}
	if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 ||
	    oh > 23 || om > 59)
		return -1;
	struct tm tm = { .tm_year = y - 1900,
			 .tm_mon = mo - 1,
			 .tm_mday = d,
			 .tm_hour = h,
			 .tm_min = mi,
			 .tm_sec = sec };
	time_t t = timegm(&tm);
	if (t == (time_t)-1)
		return -1;
	*out = t - sign * (oh * 3600 + om * 60);
	return 0;
}

void ktime_format_rfc3339(time_t t, char out[21])
{
	struct tm tm;
	gmtime_r(&t, &tm);
	if (strftime(out, 21, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(out, 21, "1970-01-01T00:00:00Z"); /* years past 9999 */
}
