/* The metrics registry: a fixed list of families (registration order is
 * render order), each with its own lock and a hash of series keyed by the
 * label values. See metrics.h for the contract. */
#define _GNU_SOURCE
#include "obs/metrics.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <uthash.h>

#include "base/xmalloc.h"

#define MAX_FAMILIES 128

enum kind { K_COUNTER,
	    K_GAUGE,
	    K_HISTOGRAM };
static const char *const kind_names[] = { "counter", "gauge", "histogram" };

struct series {
	char *key;     /* length-prefixed label values: the hash key */
	char **values; /* one per label name */
	double value;  /* counter/gauge value, histogram sum */
	unsigned long count;
	unsigned long *buckets; /* histogram: per-bucket (not cumulative) counts */
	UT_hash_handle hh;
};

struct obs_metric {
	char *name, *help;
	enum kind kind;
	size_t nlabels;
	char *labels[OBS_METRICS_MAX_LABELS];
	size_t nbuckets;
	double bounds[OBS_METRICS_MAX_BUCKETS];
	pthread_mutex_t mu;
	struct series *series; /* uthash head; insertion order is render order */
	size_t nseries;
	unsigned long dropped;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct obs_metric *families[MAX_FAMILIES];
static size_t nfamilies;

static const double default_buckets[] = { .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10 };

static void die(const char *what, const char *name)
{
	fprintf(stderr, "metrics: %s: %s\n", what, name);
	abort();
}

/* Splits "a,b" into f->labels; aborts on more than the maximum. */
static void parse_labels(struct obs_metric *f, const char *labels)
{
	if (!labels || !*labels)
		return;
	const char *p = labels;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		if (f->nlabels == OBS_METRICS_MAX_LABELS || n == 0)
			die("bad label list", f->name);
		f->labels[f->nlabels++] = xstrndup(p, n);
		if (!comma)
			break;
		p = comma + 1;
	}
}

/* Checks that an existing family matches a new registration of its name. */
static int same_labels(const struct obs_metric *f, const char *labels)
{
	struct obs_metric tmp = { .name = f->name };
	parse_labels(&tmp, labels);
	int same = tmp.nlabels == f->nlabels;
	for (size_t i = 0; i < tmp.nlabels; i++) {
		same = same && !strcmp(tmp.labels[i], f->labels[i]);
		free(tmp.labels[i]);
	}
	return same;
}

static struct series *series_get(struct obs_metric *f, const char *const *values, int create);

static struct obs_metric *reg(const char *name, const char *help, const char *labels, enum kind kind,
			      const double *buckets, size_t nbuckets)
{
	pthread_mutex_lock(&reg_mu);
	for (size_t i = 0; i < nfamilies; i++) {
		struct obs_metric *f = families[i];
		if (strcmp(f->name, name))
			continue;
		if (f->kind != kind || !same_labels(f, labels))
			die("registered again with another type or labels", name);
		pthread_mutex_unlock(&reg_mu);
		return f;
	}
	if (nfamilies == MAX_FAMILIES)
		die("too many metric families", name);
	struct obs_metric *f = xcalloc(1, sizeof *f);
	f->name = xstrdup(name);
	f->help = xstrdup(help ? help : "");
	f->kind = kind;
	parse_labels(f, labels);
	if (kind == K_HISTOGRAM) {
		if (!nbuckets) {
			buckets = default_buckets;
			nbuckets = sizeof default_buckets / sizeof default_buckets[0];
		}
		if (nbuckets > OBS_METRICS_MAX_BUCKETS)
			die("too many buckets", name);
		for (size_t i = 0; i < nbuckets; i++) {
			if (i && !(buckets[i] > buckets[i - 1]))
				die("buckets not increasing", name);
			f->bounds[i] = buckets[i];
		}
		f->nbuckets = nbuckets;
	}
	pthread_mutex_init(&f->mu, NULL);
	if (!f->nlabels) /* a plain metric exists from the start, at 0 (as client_golang's) */
		series_get(f, NULL, 1);
	families[nfamilies++] = f;
	pthread_mutex_unlock(&reg_mu);
	return f;
}

struct obs_metric *obs_counter(const char *name, const char *help, const char *labels)
{
	return reg(name, help, labels, K_COUNTER, NULL, 0);
}

struct obs_metric *obs_gauge(const char *name, const char *help, const char *labels)
{
	return reg(name, help, labels, K_GAUGE, NULL, 0);
}

struct obs_metric *obs_histogram(const char *name, const char *help, const char *labels, const double *buckets,
				 size_t nbuckets)
{
	return reg(name, help, labels, K_HISTOGRAM, buckets, nbuckets);
}

/* Builds the hash key: each value as "<len>:<bytes>" so no value can collide
 * with a different split. Caller frees. */
static char *series_key(const struct obs_metric *f, const char *const *values, size_t *keylen)
{
	size_t n = 1;
	for (size_t i = 0; i < f->nlabels; i++)
		n += 24 + strlen(values[i] ? values[i] : "");
	char *k = xmalloc(n), *p = k;
	for (size_t i = 0; i < f->nlabels; i++) {
		const char *v = values[i] ? values[i] : "";
		p += sprintf(p, "%zu:%s", strlen(v), v);
	}
	*p = 0;
	*keylen = (size_t)(p - k);
	return k;
}

/* Finds or creates the series under f->mu; NULL when the cap drops it. */
static struct series *series_get(struct obs_metric *f, const char *const *values, int create)
{
	size_t keylen;
	char *key = series_key(f, values, &keylen);
	struct series *s = NULL;
	HASH_FIND(hh, f->series, key, keylen, s);
	if (s || !create) {
		free(key);
		return s;
	}
	if (f->nseries >= OBS_METRICS_MAX_SERIES) {
		f->dropped++;
		free(key);
		return NULL;
	}
	s = xcalloc(1, sizeof *s);
	s->key = key;
	s->values = xcalloc(f->nlabels + 1, sizeof *s->values);
	for (size_t i = 0; i < f->nlabels; i++)
		s->values[i] = xstrdup(values[i] ? values[i] : "");
	if (f->kind == K_HISTOGRAM)
		s->buckets = xcalloc(f->nbuckets, sizeof *s->buckets);
	HASH_ADD_KEYPTR(hh, f->series, s->key, keylen, s);
	f->nseries++;
	return s;
}

static void update(struct obs_metric *m, const char *const *values, double v, int op)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	struct series *s = series_get(m, values, 1);
	if (s) {
		if (op == 0)
			s->value += v;
		else if (op == 1)
			s->value = v;
		else {
			s->value += v;
			s->count++;
			size_t i = 0;
			while (i < m->nbuckets && v > m->bounds[i])
				i++;
			if (i < m->nbuckets)
				s->buckets[i]++;
		}
	}
	pthread_mutex_unlock(&m->mu);
}

void obs_metric_add(struct obs_metric *m, const char *const *label_values, double v)
{
	update(m, label_values, v, 0);
}

void obs_metric_set(struct obs_metric *m, const char *const *label_values, double v)
{
	update(m, label_values, v, 1);
}

void obs_metric_observe(struct obs_metric *m, const char *const *label_values, double v)
{
	update(m, label_values, v, 2);
}

double obs_metric_value(struct obs_metric *m, const char *const *label_values)
{
	if (!m)
		return 0;
	pthread_mutex_lock(&m->mu);
	struct series *s = series_get(m, label_values, 0);
	double v = !s ? 0 : m->kind == K_HISTOGRAM ? (double)s->count
						   : s->value;
	pthread_mutex_unlock(&m->mu);
	return v;
}

/* Shortest text that reads back as v (Go's strconv 'g' -1 in spirit). */
static void fmt_num(char *b, size_t n, double v)
{
	if (isnan(v))
		snprintf(b, n, "NaN");
	else if (isinf(v))
		snprintf(b, n, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 1e15)
		snprintf(b, n, "%.0f", v);
	else {
		snprintf(b, n, "%.15g", v);
		if (strtod(b, NULL) != v)
			snprintf(b, n, "%.17g", v);
	}
}

/* Appends s with the exposition format's escapes: backslash and newline
 * always, the double quote inside label values. */
static void append_escaped(struct buf *out, const char *s, int quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			buf_appends(out, "\\\\");
		else if (*s == '\n')
			buf_appends(out, "\\n");
		else if (quote && *s == '"')
			buf_appends(out, "\\\"");
		else
			buf_append(out, s, 1);
	}
}

/* Appends {a="x",b="y"[,le="..."]} (nothing when there are no labels). */
static void append_labels(struct buf *out, const struct obs_metric *f, const struct series *s, const char *le)
{
	if (!f->nlabels && !le)
		return;
	buf_appends(out, "{");
	for (size_t i = 0; i < f->nlabels; i++) {
		buf_appendf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
		append_escaped(out, s->values[i], 1);
		buf_appends(out, "\"");
	}
	if (le)
		buf_appendf(out, "%sle=\"%s\"", f->nlabels ? "," : "", le);
	buf_appends(out, "}");
}

static void header(struct buf *out, const char *name, const char *help, const char *type)
{
	buf_appendf(out, "# HELP %s ", name);
	append_escaped(out, help, 0);
	buf_appendf(out, "\n# TYPE %s %s\n", name, type);
}

static void render_family(struct buf *out, struct obs_metric *f)
{
	char num[64], le[64];
	pthread_mutex_lock(&f->mu);
	header(out, f->name, f->help, kind_names[f->kind]);
	for (struct series *s = f->series; s; s = s->hh.next) {
		if (f->kind != K_HISTOGRAM) {
			buf_appends(out, f->name);
			append_labels(out, f, s, NULL);
			fmt_num(num, sizeof num, s->value);
			buf_appendf(out, " %s\n", num);
			continue;
		}
		unsigned long cum = 0;
		for (size_t i = 0; i <= f->nbuckets; i++) {
			cum += i < f->nbuckets ? s->buckets[i] : 0;
			if (i < f->nbuckets)
				fmt_num(le, sizeof le, f->bounds[i]);
			else {
				snprintf(le, sizeof le, "+Inf");
				cum = s->count;
			}
			buf_appendf(out, "%s_bucket", f->name);
			append_labels(out, f, s, le);
			buf_appendf(out, " %lu\n", cum);
		}
		fmt_num(num, sizeof num, s->value);
		buf_appendf(out, "%s_sum", f->name);
		append_labels(out, f, s, NULL);
		buf_appendf(out, " %s\n%s_count", num, f->name);
		append_labels(out, f, s, NULL);
		buf_appendf(out, " %lu\n", s->count);
	}
	pthread_mutex_unlock(&f->mu);
}

/* One unlabelled sample with its header. */
static void sample(struct buf *out, const char *name, const char *help, const char *type, double v)
{
	char num[64];
	header(out, name, help, type);
	fmt_num(num, sizeof num, v);
	buf_appendf(out, "%s %s\n", name, num);
}

/* The process collector, as client_golang's: read at scrape time. */
static void render_process(struct buf *out)
{
	long page = sysconf(_SC_PAGESIZE), tick = sysconf(_SC_CLK_TCK);
	unsigned long size = 0, rss = 0;
	FILE *fp = fopen("/proc/self/statm", "r");
	if (fp) {
		if (fscanf(fp, "%lu %lu", &size, &rss) == 2)
			sample(out, "process_resident_memory_bytes", "Resident memory size in bytes.", "gauge",
			       (double)rss * (double)page);
		fclose(fp);
	}
	char line[1024];
	fp = fopen("/proc/self/stat", "r");
	if (fp) {
		/* Fields after the command (which may hold spaces) start at ')'. */
		if (fgets(line, sizeof line, fp)) {
			const char *p = strrchr(line, ')');
			unsigned long utime = 0, stime = 0;
			unsigned long long start = 0;
			if (p && sscanf(p + 2,
					"%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d %*d %llu",
					&utime, &stime, &start) == 3) {
				sample(out, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
				       "counter", (double)(utime + stime) / (double)tick);
				FILE *st = fopen("/proc/stat", "r");
				unsigned long long btime = 0;
				while (st && fgets(line, sizeof line, st))
					if (sscanf(line, "btime %llu", &btime) == 1)
						break;
				if (st)
					fclose(st);
				if (btime)
					sample(out, "process_start_time_seconds",
					       "Start time of the process since unix epoch in seconds.", "gauge",
					       (double)btime + (double)start / (double)tick);
			}
		}
		fclose(fp);
	}
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		long n = -1; /* the directory's own descriptor is not counted */
		struct dirent *e;
		while ((e = readdir(d)))
			n += e->d_name[0] != '.';
		closedir(d);
		sample(out, "process_open_fds", "Number of open file descriptors.", "gauge", (double)n);
	}
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl))
		sample(out, "process_max_fds", "Maximum number of open file descriptors.", "gauge",
		       rl.rlim_cur == RLIM_INFINITY ? -1 : (double)rl.rlim_cur);
}

void obs_metrics_render(struct buf *out)
{
	pthread_mutex_lock(&reg_mu);
	size_t n = nfamilies;
	pthread_mutex_unlock(&reg_mu);
	int any_dropped = 0;
	for (size_t i = 0; i < n; i++) {
		render_family(out, families[i]); /* families are never removed */
		any_dropped |= families[i]->dropped > 0;
	}
	if (any_dropped) {
		header(out, "obs_metrics_dropped_series_total",
		       "Updates dropped because their family reached its series cap.", "counter");
		for (size_t i = 0; i < n; i++) {
			pthread_mutex_lock(&families[i]->mu);
			if (families[i]->dropped)
				buf_appendf(out, "obs_metrics_dropped_series_total{family=\"%s\"} %lu\n",
					    families[i]->name, families[i]->dropped);
			pthread_mutex_unlock(&families[i]->mu);
		}
	}
	render_process(out);
}
