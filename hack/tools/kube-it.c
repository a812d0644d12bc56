/* kube-it: drives controller/kube against a real kube-apiserver for the
 * integration tests (e2e/test_kube_client.sh). Not shipped.
 *
 *   kube-it cache-compare PATH CTLDIR   run an informer on PATH; whenever CTLDIR/req
 *                                       appears, compare its cache with a fresh LIST
 *                                       and write the verdict to CTLDIR/res; exit when
 *                                       CTLDIR/stop appears
 *   kube-it create NS N THREADS         create N ConfigMaps cm-00000.. in NS
 *   kube-it list-count PATH             paginated LIST; prints items and requests
 *   kube-it rotate-401 TOKENFILE NEWTOKENFILE
 *                                       load the config (its user reads TOKENFILE),
 *                                       then at once replace TOKENFILE with a copy of
 *                                       NEWTOKENFILE and GET /api: the client still
 *                                       holds the old token (it re-checks the file at
 *                                       most once a second), so a server that only
 *                                       knows the new one answers 401, and the client
 *                                       must refresh and retry; prints the outcome
 *
 * cache-compare checks two things against the LIST, object by object (the whole
 * object minus metadata.managedFields, kind and apiVersion, so resourceVersions
 * included): the informer's cache, and a shadow map built only from what the
 * handlers were told (adds, updates, deletes), which proves that every change, including deletes
 * made while the informer was disconnected, reached the handlers. Handler calls
 * that contradict the shadow (an add of a known key, an update or delete of an
 * unknown one, an update whose old object is not the last one delivered) are
 * counted as anomalies. Every delete is appended to CTLDIR/deleted.log as
 * "ns/name resourceVersion". The verdict waits up to $KUBE_IT_CONVERGE_S
 * (default 20) seconds for the watch to catch up with the LIST.
 *
 * Credentials come from $KUBECONFIG. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uthash.h>

#include "base/xmalloc.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"

/* ---- a set of objects: key "ns/name" -> resourceVersion and content ---- */

struct entry {
	char *key; /* ns/name */
	char *rv;
	char *json; /* the object minus managedFields, unformatted */
	UT_hash_handle hh;
};

static const char *md_str(const cJSON *obj, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(obj, "metadata"), field);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static char *key_of(const cJSON *obj)
{
	return xasprintf("%s/%s", md_str(obj, "namespace"), md_str(obj, "name"));
}

/* The object as the informer's default trim stores it, printed, without the
 * type fields. */
static char *content_of(const cJSON *obj)
{
	cJSON *c = cJSON_Duplicate(obj, 1);
	if (!c)
		abort();
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "metadata"),
						"managedFields");
	/* Watch events carry kind and apiVersion on the object, LIST items do not. */
	cJSON_DeleteItemFromObjectCaseSensitive(c, "kind");
	cJSON_DeleteItemFromObjectCaseSensitive(c, "apiVersion");
	char *s = cJSON_PrintUnformatted(c);
	cJSON_Delete(c);
	if (!s)
		abort();
	return s;
}

static void entry_free(struct entry *e)
{
	free(e->key);
	free(e->rv);
	free(e->json);
	free(e);
}

static struct entry *set_find(struct entry *set, const char *key)
{
	struct entry *e;
	HASH_FIND_STR(set, key, e);
	return e;
}

/* Removes key from the set; returns 1 if it was there. */
static int set_del(struct entry **set, const char *key)
{
	struct entry *e = set_find(*set, key);
	if (!e)
		return 0;
	HASH_DEL(*set, e);
	entry_free(e);
	return 1;
}

/* Inserts or replaces obj; returns 1 if its key was already there. */
static int set_put(struct entry **set, const cJSON *obj)
{
	struct entry *e = xcalloc(1, sizeof *e);
	e->key = key_of(obj);
	e->rv = xstrdup(md_str(obj, "resourceVersion"));
	e->json = content_of(obj);
	int had = set_del(set, e->key);
	HASH_ADD_KEYPTR(hh, *set, e->key, strlen(e->key), e);
	return had;
}

static void set_free(struct entry **set)
{
	struct entry *e, *t;
	HASH_ITER(hh, *set, e, t)
	{
		HASH_DEL(*set, e);
		entry_free(e);
	}
}

/* ---- what the handlers were told ---- */

struct shadow {
	pthread_mutex_t mu;
	struct entry *set;
	long adds, updates, deletes, anomalies;
	char first_anomaly[256];
	FILE *deleted_log;
};

static void anomaly(struct shadow *s, const char *what, const cJSON *obj)
{
	char *k = key_of(obj);
	if (s->anomalies++ == 0)
		snprintf(s->first_anomaly, sizeof s->first_anomaly, "%s:%s", what, k);
	fprintf(stderr, "kube-it: handler anomaly: %s %s\n", what, k);
	free(k);
}

static void on_add(void *ctx, const cJSON *o)
{
	struct shadow *s = ctx;
	pthread_mutex_lock(&s->mu);
	s->adds++;
	if (set_put(&s->set, o))
		anomaly(s, "add-of-known", o);
	pthread_mutex_unlock(&s->mu);
}

static void on_update(void *ctx, const cJSON *a, const cJSON *b)
{
	struct shadow *s = ctx;
	char *k = key_of(a);
	pthread_mutex_lock(&s->mu);
	s->updates++;
	struct entry *e = set_find(s->set, k);
	if (!e)
		anomaly(s, "update-of-unknown", a);
	else if (strcmp(e->rv, md_str(a, "resourceVersion")))
		anomaly(s, "update-with-wrong-old", a);
	set_put(&s->set, b);
	pthread_mutex_unlock(&s->mu);
	free(k);
}

static void on_delete(void *ctx, const cJSON *o)
{
	struct shadow *s = ctx;
	char *k = key_of(o);
	pthread_mutex_lock(&s->mu);
	s->deletes++;
	if (!set_del(&s->set, k))
		anomaly(s, "delete-of-unknown", o);
	if (s->deleted_log) {
		fprintf(s->deleted_log, "%s %s\n", k, md_str(o, "resourceVersion"));
		fflush(s->deleted_log);
	}
	pthread_mutex_unlock(&s->mu);
	free(k);
}

/* ---- the comparison ---- */

static void list_cb(void *ctx, const cJSON *item)
{
	set_put(ctx, item);
}

static void list_reset(void *ctx)
{
	set_free(ctx);
}

/* Counts the differences between want (the LIST) and have, describing the
 * first few in msg (appended at *off). */
static long diff_sets(struct entry *want, struct entry *have, const char *who, char *msg, size_t ml,
		      size_t *off)
{
	long diffs = 0;
	struct entry *e, *t, *f;
	HASH_ITER(hh, want, e, t)
	{
		f = set_find(have, e->key);
		const char *what = !f			      ? "missing"
				   : strcmp(f->rv, e->rv)     ? "stale"
				   : strcmp(f->json, e->json) ? "content"
							      : NULL;
		if (what && diffs++ < 3 && *off < ml)
			*off +=
			    (size_t)snprintf(msg + *off, ml - *off, " %s-%s:%s", who, what, e->key);
	}
	HASH_ITER(hh, have, e, t)
	{
		if (!set_find(want, e->key) && diffs++ < 3 && *off < ml)
			*off +=
			    (size_t)snprintf(msg + *off, ml - *off, " %s-extra:%s", who, e->key);
	}
	return diffs;
}

/* Compares cache and shadow with a fresh LIST. Returns 0 (counts set) or -1
 * on a LIST error (described in msg). */
static int compare(struct kube_client *kc, struct informer *inf, struct shadow *s, const char *path,
		   size_t *n, long *cache_diffs, long *shadow_diffs, char *msg, size_t ml)
{
	struct entry *fresh = NULL, *cached = NULL;
	struct kube_error err;
	msg[0] = '\0';
	if (kube_list_ex(kc, path, NULL, list_cb, list_reset, &fresh, NULL, NULL, &err) !=
	    KUBE_OK) {
		snprintf(msg, ml, " LIST failed: %s", err.message);
		set_free(&fresh);
		return -1;
	}
	cJSON *arr = informer_list(inf);
	const cJSON *o;
	cJSON_ArrayForEach(o, arr) set_put(&cached, o);
	cJSON_Delete(arr);
	size_t off = 0;
	*cache_diffs = diff_sets(fresh, cached, "cache", msg, ml, &off);
	pthread_mutex_lock(&s->mu);
	*shadow_diffs = diff_sets(fresh, s->set, "handlers", msg, ml, &off);
	pthread_mutex_unlock(&s->mu);
	*n = HASH_COUNT(fresh);
	set_free(&fresh);
	set_free(&cached);
	return 0;
}

static int exists(const char *dir, const char *name)
{
	char p[4096];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return stat(p, &st) == 0;
}

/* Answers one CTLDIR/req with CTLDIR/res (written whole, then renamed). */
static void answer(struct kube_client *kc, struct informer *inf, struct shadow *s, const char *path,
		   const char *dir, long converge_s)
{
	long cd = -1, sd = -1;
	size_t n = 0;
	char msg[1024] = "";
	int ok = 0;
	for (long i = 0; i <= converge_s * 5; i++) {
		ok = compare(kc, inf, s, path, &n, &cd, &sd, msg, sizeof msg) == 0 && cd == 0 &&
		     sd == 0;
		if (ok)
			break;
		usleep(200000);
	}
	char p[4096], q[4096];
	snprintf(p, sizeof p, "%s/res.tmp", dir);
	FILE *f = fopen(p, "w");
	if (!f) {
		perror(p);
		return;
	}
	pthread_mutex_lock(&s->mu);
	ok = ok && s->anomalies == 0;
	fprintf(f,
		"%s objects=%zu cache_diffs=%ld handler_diffs=%ld anomalies=%ld adds=%ld "
		"updates=%ld deletes=%ld%s%s%s\n",
		ok ? "OK" : "DIFF", n, cd, sd, s->anomalies, s->adds, s->updates, s->deletes, msg,
		s->anomalies ? " first-anomaly:" : "", s->first_anomaly);
	pthread_mutex_unlock(&s->mu);
	fclose(f);
	snprintf(q, sizeof q, "%s/res", dir);
	rename(p, q);
	snprintf(p, sizeof p, "%s/req", dir);
	unlink(p);
}

static int cache_compare(struct kube_client *kc, const char *path, const char *dir)
{
	static const struct informer_handlers h = { on_add, on_update, on_delete };
	struct shadow s = { .mu = PTHREAD_MUTEX_INITIALIZER };
	char p[4096];
	snprintf(p, sizeof p, "%s/deleted.log", dir);
	s.deleted_log = fopen(p, "a");
	if (!s.deleted_log) {
		perror(p);
		return 1;
	}
	const char *cs = getenv("KUBE_IT_CONVERGE_S");
	long converge_s = cs && atol(cs) > 0 ? atol(cs) : 20;
	struct informer *inf = informer_new(kc, path, NULL, NULL, NULL, &h, &s);
	int rc = 0;
	if (informer_start(inf) < 0 || !informer_wait_synced(inf, 60000)) {
		fprintf(stderr, "informer did not sync\n");
		rc = 1;
		goto out;
	}
	snprintf(p, sizeof p, "%s/ready", dir);
	FILE *rf = fopen(p, "w");
	if (!rf) {
		perror(p);
		rc = 1;
		goto out;
	}
	fclose(rf);
	while (!exists(dir, "stop")) {
		if (exists(dir, "req"))
			answer(kc, inf, &s, path, dir, converge_s);
		usleep(100000);
	}
out:
	informer_stop(inf);
	informer_free(inf);
	set_free(&s.set);
	fclose(s.deleted_log);
	return rc;
}

/* ---- bulk creation ---- */

struct creator {
	struct kube_client *kc;
	const char *ns;
	long from, to;
	long failed;
};

static void *create_range(void *arg)
{
	struct creator *cr = arg;
	char path[512];
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/configmaps", cr->ns);
	for (long i = cr->from; i < cr->to; i++) {
		char body[512];
		snprintf(body, sizeof body,
			 "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
			 "\"cm-%05ld\"},\"data\":{\"i\":\"%ld\"}}",
			 i, i);
		struct kube_error err;
		enum kube_err e = kube_request(cr->kc, "POST", path, NULL, body, NULL, NULL, &err);
		if (e != KUBE_OK && e != KUBE_ERR_ALREADY_EXISTS) {
			if (cr->failed++ == 0)
				fprintf(stderr, "create cm-%05ld: %s: %s\n", i, kube_err_str(e),
					err.message);
		}
	}
	return NULL;
}

static int create(struct kube_client *kc, const char *ns, long n, int threads)
{
	if (n < 0 || threads < 1) {
		fprintf(stderr, "create: N must be >= 0 and THREADS >= 1\n");
		return 2;
	}
	pthread_t *th = xcalloc((size_t)threads, sizeof *th);
	struct creator *cr = xcalloc((size_t)threads, sizeof *cr);
	int started = 0;
	for (int t = 0; t < threads; t++) {
		cr[t] = (struct creator){ kc, ns, n * t / threads, n * (t + 1) / threads, 0 };
		if (pthread_create(&th[t], NULL, create_range, &cr[t]) != 0) {
			fprintf(stderr, "create: cannot start a thread\n");
			break;
		}
		started++;
	}
	long failed = 0, made = 0;
	for (int t = 0; t < started; t++) {
		pthread_join(th[t], NULL);
		failed += cr[t].failed;
		made += cr[t].to - cr[t].from - cr[t].failed;
	}
	free(th);
	free(cr);
	printf("created %ld, failed %ld\n", made, failed);
	return failed || made != n ? 1 : 0;
}

/* ---- paginated list ---- */

struct counter {
	long items;
	struct entry *names;
	long dups;
	long restarts;
};

static void count_cb(void *ctx, const cJSON *item)
{
	struct counter *c = ctx;
	c->items++;
	char *k = key_of(item);
	if (set_find(c->names, k)) {
		c->dups++;
	} else {
		struct entry *e = xcalloc(1, sizeof *e);
		e->key = k;
		k = NULL;
		HASH_ADD_KEYPTR(hh, c->names, e->key, strlen(e->key), e);
	}
	free(k);
}

static void count_reset(void *ctx)
{
	struct counter *c = ctx;
	c->items = 0;
	c->dups = 0;
	c->restarts++;
	set_free(&c->names);
}

static int list_count(struct kube_client *kc, const char *path)
{
	struct counter c = { 0 };
	struct kube_error ke;
	unsigned long before = kube_client_requests(kc);
	char *rv = NULL;
	enum kube_err e = kube_list_ex(kc, path, NULL, count_cb, count_reset, &c, NULL, &rv, &ke);
	printf("items=%ld unique=%u duplicates=%ld requests=%lu restarts=%ld "
	       "resourceVersion=%s result=%s\n",
	       c.items, HASH_COUNT(c.names), c.dups, kube_client_requests(kc) - before, c.restarts,
	       rv ? rv : "-", kube_err_str(e));
	if (e != KUBE_OK)
		fprintf(stderr, "list: %s\n", ke.message);
	set_free(&c.names);
	free(rv);
	return e == KUBE_OK ? 0 : 1;
}

/* ---- token rotation between two requests ---- */

static int copy_file_atomic(const char *from, const char *to)
{
	char tmp[4096], data[65536];
	snprintf(tmp, sizeof tmp, "%s.new", to);
	FILE *in = fopen(from, "r");
	if (!in)
		return -1;
	size_t n = fread(data, 1, sizeof data, in);
	fclose(in);
	FILE *out = fopen(tmp, "w");
	if (!out)
		return -1;
	int bad = fwrite(data, 1, n, out) != n;
	bad |= fclose(out) != 0;
	return bad || rename(tmp, to) < 0 ? -1 : 0;
}

static int rotate_401(struct kube_client *kc, const char *token_file, const char *new_file)
{
	/* The config was loaded (and the token file read) a moment ago: well
	 * within the client's one-second re-check interval. */
	if (copy_file_atomic(new_file, token_file) < 0) {
		perror("rotate-401: replacing the token file");
		return 1;
	}
	unsigned long before = kube_client_requests(kc);
	struct kube_error err;
	enum kube_err e = kube_request(kc, "GET", "/api", NULL, NULL, NULL, NULL, &err);
	printf("result=%s requests=%lu\n", kube_err_str(e), kube_client_requests(kc) - before);
	if (e != KUBE_OK)
		fprintf(stderr, "rotate-401: %s\n", err.message);
	return e == KUBE_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: kube-it cache-compare PATH CTLDIR | create NS N THREADS | "
				"list-count PATH | rotate-401 TOKENFILE NEWTOKENFILE\n");
		return 2;
	}
	char err[1024];
	struct kube_config *cfg = kube_config_load(NULL, NULL, err, sizeof err);
	if (!cfg) {
		fprintf(stderr, "kubeconfig: %s\n", err);
		return 1;
	}
	struct kube_client_opts o = { .qps = -1 };
	struct kube_client *kc = kube_client_new(cfg, &o);
	if (!kc)
		return 1;
	int rc = 2;
	if (!strcmp(argv[1], "cache-compare") && argc == 4)
		rc = cache_compare(kc, argv[2], argv[3]);
	else if (!strcmp(argv[1], "create") && argc == 5)
		rc = create(kc, argv[2], atol(argv[3]), atoi(argv[4]));
	else if (!strcmp(argv[1], "list-count") && argc == 3)
		rc = list_count(kc, argv[2]);
	else if (!strcmp(argv[1], "rotate-401") && argc == 4)
		rc = rotate_401(kc, argv[2], argv[3]);
	else
		fprintf(stderr, "kube-it: bad arguments\n");
	kube_client_free(kc);
	return rc;
}
