/* kube-it: drives controller/kube against a real kube-apiserver for the
 * integration tests (e2e/test_kube_client.sh). Not shipped.
 *
 *   kube-it cache-compare PATH CTLDIR   run an informer on PATH; whenever CTLDIR/req
 *                                       appears, compare its cache with a fresh LIST
 *                                       and write the verdict to CTLDIR/res; exit when
 *                                       CTLDIR/stop appears
 *   kube-it create NS N THREADS         create N ConfigMaps cm-00000.. in NS
 *   kube-it list-count PATH             paginated LIST; prints items and requests
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

static atomic_long adds, updates, deletes;

static void on_add(void *ctx, const cJSON *o)
{
	(void)ctx;
	(void)o;
	atomic_fetch_add(&adds, 1);
}

static void on_update(void *ctx, const cJSON *a, const cJSON *b)
{
	(void)ctx;
	(void)a;
	(void)b;
	atomic_fetch_add(&updates, 1);
}

static void on_delete(void *ctx, const cJSON *o)
{
	(void)ctx;
	(void)o;
	atomic_fetch_add(&deletes, 1);
}

struct entry {
	char *key; /* ns/name */
	char *rv;
	UT_hash_handle hh;
};

static void entry_put(struct entry **set, const cJSON *obj)
{
	const cJSON *m = cJSON_GetObjectItem(obj, "metadata");
	const cJSON *ns = cJSON_GetObjectItem(m, "namespace"), *name = cJSON_GetObjectItem(m, "name");
	const cJSON *rv = cJSON_GetObjectItem(m, "resourceVersion");
	struct entry *e = xcalloc(1, sizeof *e);
	e->key = xasprintf("%s/%s", cJSON_IsString(ns) ? ns->valuestring : "", cJSON_IsString(name) ? name->valuestring : "");
	e->rv = xstrdup(cJSON_IsString(rv) ? rv->valuestring : "");
	struct entry *old;
	HASH_FIND_STR(*set, e->key, old);
	if (old) {
		HASH_DEL(*set, old);
		free(old->key);
		free(old->rv);
		free(old);
	}
	HASH_ADD_KEYPTR(hh, *set, e->key, strlen(e->key), e);
}

static void set_free(struct entry **set)
{
	struct entry *e, *t;
	HASH_ITER(hh, *set, e, t)
	{
		HASH_DEL(*set, e);
		free(e->key);
		free(e->rv);
		free(e);
	}
}

static void list_cb(void *ctx, const cJSON *item)
{
	entry_put(ctx, item);
}

static void list_reset(void *ctx)
{
	set_free(ctx);
}

/* Returns the number of differences between the cache and a fresh LIST (-1 on
 * a LIST error), describing the first few in msg. */
static long compare(struct kube_client *kc, struct informer *inf, const char *path, size_t *n, char *msg, size_t ml)
{
	struct entry *fresh = NULL, *cached = NULL;
	struct kube_error err;
	if (kube_list_ex(kc, path, NULL, list_cb, list_reset, &fresh, NULL, NULL, &err) != KUBE_OK) {
		snprintf(msg, ml, "LIST failed: %s", err.message);
		set_free(&fresh);
		return -1;
	}
	cJSON *arr = informer_list(inf);
	const cJSON *o;
	cJSON_ArrayForEach(o, arr) entry_put(&cached, o);
	cJSON_Delete(arr);
	long diffs = 0;
	size_t off = 0;
	msg[0] = '\0';
	struct entry *e, *t, *f;
	HASH_ITER(hh, fresh, e, t)
	{
		HASH_FIND_STR(cached, e->key, f);
		if (!f || strcmp(f->rv, e->rv)) {
			if (diffs++ < 5 && off < ml)
				off += (size_t)snprintf(msg + off, ml - off, " %s:%s", f ? "stale" : "missing", e->key);
		}
	}
	HASH_ITER(hh, cached, e, t)
	{
		HASH_FIND_STR(fresh, e->key, f);
		if (!f && diffs++ < 5 && off < ml)
			off += (size_t)snprintf(msg + off, ml - off, " extra:%s", e->key);
	}
	*n = HASH_COUNT(fresh);
	set_free(&fresh);
	set_free(&cached);
	return diffs;
}

static int exists(const char *dir, const char *name)
{
	char p[4096];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return stat(p, &st) == 0;
}

static int cache_compare(struct kube_client *kc, const char *path, const char *dir)
{
	static const struct informer_handlers h = { on_add, on_update, on_delete };
	struct informer *inf = informer_new(kc, path, NULL, NULL, NULL, &h, NULL);
	if (informer_start(inf) < 0 || !informer_wait_synced(inf, 60000)) {
		fprintf(stderr, "informer did not sync\n");
		return 1;
	}
	char p[4096];
	snprintf(p, sizeof p, "%s/ready", dir);
	fclose(fopen(p, "w"));
	while (!exists(dir, "stop")) {
		if (exists(dir, "req")) {
			/* The watch may trail the LIST by a moment: converge for up to 20 s. */
			long diffs = -1;
			size_t n = 0;
			char msg[1024] = "";
			for (int i = 0; i < 100; i++) {
				diffs = compare(kc, inf, path, &n, msg, sizeof msg);
				if (diffs == 0)
					break;
				usleep(200000);
			}
			snprintf(p, sizeof p, "%s/res.tmp", dir);
			FILE *f = fopen(p, "w");
			fprintf(f, "%s objects=%zu diffs=%ld adds=%ld updates=%ld deletes=%ld%s\n", diffs == 0 ? "OK" : "DIFF", n,
				diffs, atomic_load(&adds), atomic_load(&updates), atomic_load(&deletes), msg);
			fclose(f);
			char q[4096];
			snprintf(q, sizeof q, "%s/res", dir);
			rename(p, q);
			snprintf(p, sizeof p, "%s/req", dir);
			unlink(p);
		}
		usleep(100000);
	}
	informer_stop(inf);
	informer_free(inf);
	return 0;
}

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
			 "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm-%05ld\"},"
			 "\"data\":{\"i\":\"%ld\"}}",
			 i, i);
		struct kube_error err;
		enum kube_err e = kube_request(cr->kc, "POST", path, NULL, body, NULL, NULL, &err);
		if (e != KUBE_OK && e != KUBE_ERR_ALREADY_EXISTS)
			cr->failed++;
	}
	return NULL;
}

static int create(struct kube_client *kc, const char *ns, long n, int threads)
{
	pthread_t *th = xcalloc((size_t)threads, sizeof *th);
	struct creator *cr = xcalloc((size_t)threads, sizeof *cr);
	for (int t = 0; t < threads; t++) {
		cr[t] = (struct creator){ kc, ns, n * t / threads, n * (t + 1) / threads, 0 };
		pthread_create(&th[t], NULL, create_range, &cr[t]);
	}
	long failed = 0;
	for (int t = 0; t < threads; t++) {
		pthread_join(th[t], NULL);
		failed += cr[t].failed;
	}
	free(th);
	free(cr);
	printf("created %ld, failed %ld\n", n - failed, failed);
	return failed ? 1 : 0;
}

static void count_cb(void *ctx, const cJSON *item)
{
	(void)item;
	(*(long *)ctx)++;
}

static void count_reset(void *ctx)
{
	*(long *)ctx = 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: kube-it cache-compare PATH CTLDIR | create NS N THREADS | list-count PATH\n");
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
	int rc = 2;
	if (!strcmp(argv[1], "cache-compare") && argc == 4) {
		rc = cache_compare(kc, argv[2], argv[3]);
	} else if (!strcmp(argv[1], "create") && argc == 5) {
		rc = create(kc, argv[2], atol(argv[3]), atoi(argv[4]));
	} else if (!strcmp(argv[1], "list-count")) {
		long n = 0;
		struct kube_error ke;
		unsigned long before = kube_client_requests(kc);
		enum kube_err e = kube_list_ex(kc, argv[2], NULL, count_cb, count_reset, &n, NULL, NULL, &ke);
		printf("items=%ld requests=%lu result=%s\n", n, kube_client_requests(kc) - before, kube_err_str(e));
		rc = e == KUBE_OK ? 0 : 1;
	}
	kube_client_free(kc);
	return rc;
}
