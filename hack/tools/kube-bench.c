/* kube-bench: the meter behind hack/bench-kube.sh. Not shipped.
 *
 *   kube-bench parse [EVENTS [ROUNDS]]
 *       watch events parsed per second: EVENTS (default 50000) synthetic pod
 *       events of about 3.5 KB, fed to watch_parser in 16 KiB chunks (curl's
 *       largest write callback) against a baseline that hands each complete
 *       line straight to cJSON_ParseWithLength (no framing, no type check).
 *   kube-bench create-pods NS N THREADS NODE
 *       creates N pods pod-000000.. in NS, bound by spec.nodeName to NODE (a
 *       node that does not exist, so nothing schedules or runs them).
 *   kube-bench sync NS [ROUNDS]
 *       time to sync an informer on /api/v1/namespaces/NS/pods, and heap bytes
 *       per cached pod, with the default trim (a copy minus managedFields) and
 *       with the controller's sbx_trim_pod; baseline: the same paginated LIST
 *       without storing anything.
 *
 * Rounds are interleaved; parsing reports the best round (CPU-bound, so the one
 * least disturbed by other load), sync the median. Heap in use is
 * mallinfo2() uordblks + hblkhd (all arenas, mmapped chunks included), read
 * after malloc_trim once the informer has settled. Credentials come from
 * $KUBECONFIG. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/xmalloc.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "kube/watch.h"
#include "obs/log.h"
#include "sandbox/trim.h"

#define CHUNK ((size_t)16 << 10)
#define MAX_LINE ((size_t)4 << 20)
#define MAX_ROUNDS 15

/* A pod as the API returns it for a Sandbox pod that kwok runs: labels,
 * annotations, an owner, managedFields from three writers, a container with
 * env and mounts, defaulted spec fields and a Running status. @NAME@, @NS@,
 * @UID@, @RV@ and @NODE@ are substituted. */
static const char POD_FULL[] =
    "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"@NAME@\",\"namespace\""
    ":\"@NS@\",\"uid\":\"@UID@\",\"resourceVersion\":\"@RV@\",\"creationTimestamp\":\"2026-"
    "05-01T10:00:00Z\",\"labels\":{\"app.kubernetes.io/managed-by\":\"sandbox-controller\","
    "\"app.kubernetes.io/name\":\"sandbox\",\"sandbox.dev/scope-digest\":\"0fa3d64589ed2cb2"
    "29bf5c5000369e2e\"},\"annotations\":{\"sandbox.dev/workspace-owner\":\"alice\",\"sandb"
    "ox.dev/idempotency-key\":\"task-42\",\"sandbox.dev/claimed-at\":\"2026-05-01T10:00:00Z"
    "\",\"sandbox.dev/seal\":\"7f3a9c0d1e2b4a5968778695a4b3c2d1e0f9a8b7c6d5e4f3011223344556"
    "6778\"},\"ownerReferences\":[{\"apiVersion\":\"sandbox.dev/v1alpha1\",\"kind\":\"Sandb"
    "ox\",\"name\":\"alice-1\",\"uid\":\"5b1c3d2e-8f4a-4b6c-9d0e-1f2a3b4c5d6e\",\"controlle"
    "r\":true,\"blockOwnerDeletion\":true}],\"managedFields\":[{\"manager\":\"sandbox-contr"
    "oller\",\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2026-05-01T10:00:00Z"
    "\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:annotations\":{\".\":"
    "{},\"f:sandbox.dev/claimed-at\":{},\"f:sandbox.dev/idempotency-key\":{},\"f:sandbox.de"
    "v/seal\":{},\"f:sandbox.dev/workspace-owner\":{}},\"f:labels\":{\".\":{},\"f:app.kuber"
    "netes.io/managed-by\":{},\"f:app.kubernetes.io/name\":{},\"f:sandbox.dev/scope-digest\""
    ":{}},\"f:ownerReferences\":{\".\":{},\"k:{\\\"uid\\\":\\\"5b1c3d2e-8f4a-4b6c-9d0e-1f2a"
    "3b4c5d6e\\\"}\":{}}},\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"agent\\\"}\":"
    "{\".\":{},\"f:env\":{},\"f:image\":{},\"f:name\":{},\"f:resources\":{},\"f:volumeMount"
    "s\":{}}},\"f:volumes\":{}}}},{\"manager\":\"kwok\",\"operation\":\"Update\",\"apiVersi"
    "on\":\"v1\",\"time\":\"2026-05-01T10:00:02Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\""
    ":{\"f:status\":{\"f:conditions\":{},\"f:containerStatuses\":{},\"f:hostIP\":{},\"f:pha"
    "se\":{},\"f:podIP\":{},\"f:podIPs\":{},\"f:startTime\":{}}},\"subresource\":\"status\""
    "}]},\"spec\":{\"volumes\":[{\"name\":\"workspace\",\"persistentVolumeClaim\":{\"claimN"
    "ame\":\"sandbox-workspaces\"}}],\"containers\":[{\"name\":\"agent\",\"image\":\"regist"
    "ry.local/agent:1.0\",\"env\":[{\"name\":\"SANDBOX_NAME\",\"value\":\"alice-1\"},{\"nam"
    "e\":\"WORKSPACE_OWNER\",\"value\":\"alice\"},{\"name\":\"HOME\",\"value\":\"/home/agen"
    "t\"}],\"resources\":{\"limits\":{\"cpu\":\"2\",\"memory\":\"4Gi\"},\"requests\":{\"cpu"
    "\":\"500m\",\"memory\":\"1Gi\"}},\"volumeMounts\":[{\"name\":\"workspace\",\"mountPath"
    "\":\"/workspace\",\"subPath\":\"alice/workspace\"},{\"name\":\"workspace\",\"mountPath"
    "\":\"/home/agent/.claude\",\"subPath\":\"alice/claude\"},{\"name\":\"workspace\",\"mou"
    "ntPath\":\"/home/agent/.codex\",\"subPath\":\"alice/codex\"},{\"name\":\"workspace\",\""
    "mountPath\":\"/home/agent/.gemini\",\"subPath\":\"alice/gemini\"}],\"terminationMessag"
    "ePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\",\"imagePullPoli"
    "cy\":\"IfNotPresent\"}],\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\""
    ":30,\"dnsPolicy\":\"ClusterFirst\",\"serviceAccountName\":\"default\",\"serviceAccount"
    "\":\"default\",\"nodeName\":\"@NODE@\",\"securityContext\":{},\"schedulerName\":\"defa"
    "ult-scheduler\",\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\""
    ":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300}],\"priority\":0,\"enab"
    "leServiceLinks\":true,\"preemptionPolicy\":\"PreemptLowerPriority\"},\"status\":{\"pha"
    "se\":\"Running\",\"conditions\":[{\"type\":\"Initialized\",\"status\":\"True\",\"lastP"
    "robeTime\":null,\"lastTransitionTime\":\"2026-05-01T10:00:02Z\"},{\"type\":\"Ready\",\""
    "status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":\"2026-05-01T10:00:02Z"
    "\"},{\"type\":\"ContainersReady\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTra"
    "nsitionTime\":\"2026-05-01T10:00:02Z\"},{\"type\":\"PodScheduled\",\"status\":\"True\""
    ",\"lastProbeTime\":null,\"lastTransitionTime\":\"2026-05-01T10:00:00Z\"}],\"hostIP\":\""
    "10.0.0.1\",\"podIP\":\"10.0.0.17\",\"podIPs\":[{\"ip\":\"10.0.0.17\"}],\"startTime\":\""
    "2026-05-01T10:00:02Z\",\"containerStatuses\":[{\"name\":\"agent\",\"state\":{\"running"
    "\":{\"startedAt\":\"2026-05-01T10:00:02Z\"}},\"lastState\":{},\"ready\":true,\"restart"
    "Count\":0,\"image\":\"registry.local/agent:1.0\",\"imageID\":\"\",\"started\":true}],\""
    "qosClass\":\"Burstable\"}}";

/* The same pod as a client creates it (the API adds defaults, managedFields
 * and a Pending status). */
static const char POD_CREATE[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"@NAME@\",\"labels\":"
    "{\"app.kubernetes.io/managed-by\":\"sandbox-controller\",\"app.kubernetes.io/name\":"
    "\"sandbox\",\"sandbox.dev/scope-digest\":\"0fa3d64589ed2cb229bf5c5000369e2e\"},"
    "\"annotations\":{\"sandbox.dev/workspace-owner\":\"alice\",\"sandbox.dev/idempotency-"
    "key\":\"task-42\",\"sandbox.dev/claimed-at\":\"2026-05-01T10:00:00Z\",\"sandbox.dev/"
    "seal\":\"7f3a9c0d1e2b4a5968778695a4b3c2d1e0f9a8b7c6d5e4f30112233445566778\"}},"
    "\"spec\":{\"nodeName\":\"@NODE@\",\"volumes\":[{\"name\":\"workspace\",\"emptyDir\":{}}],"
    "\"containers\":[{\"name\":\"agent\",\"image\":\"registry.local/agent:1.0\",\"env\":["
    "{\"name\":\"SANDBOX_NAME\",\"value\":\"@NAME@\"},{\"name\":\"WORKSPACE_OWNER\",\"value\":"
    "\"alice\"},{\"name\":\"HOME\",\"value\":\"/home/agent\"}],\"resources\":{\"limits\":"
    "{\"cpu\":\"2\",\"memory\":\"4Gi\"},\"requests\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"}},"
    "\"volumeMounts\":[{\"name\":\"workspace\",\"mountPath\":\"/workspace\",\"subPath\":"
    "\"alice/workspace\"},{\"name\":\"workspace\",\"mountPath\":\"/home/agent/.claude\","
    "\"subPath\":\"alice/claude\"},{\"name\":\"workspace\",\"mountPath\":\"/home/agent/.codex\","
    "\"subPath\":\"alice/codex\"},{\"name\":\"workspace\",\"mountPath\":\"/home/agent/.gemini\","
    "\"subPath\":\"alice/gemini\"}]}]}}";

/* Replaces each "@KEY@" of tpl by its value from kv (NULL-terminated pairs).
 * Returns a new string (caller frees). */
static char *fill(const char *tpl, const char *const *kv)
{
	struct buf b;
	buf_init(&b, (size_t)1 << 20);
	for (const char *p = tpl; *p;) {
		const char *at = strchr(p, '@');
		if (!at) {
			buf_appends(&b, p);
			break;
		}
		buf_append(&b, p, (size_t)(at - p));
		const char *end = strchr(at + 1, '@');
		const char *val = NULL;
		for (const char *const *k = kv; end && k[0]; k += 2)
			if (strlen(k[0]) == (size_t)(end - at - 1) &&
			    !strncmp(k[0], at + 1, (size_t)(end - at - 1)))
				val = k[1];
		if (val) {
			buf_appends(&b, val);
			p = end + 1;
		} else {
			buf_append(&b, at, 1);
			p = at + 1;
		}
	}
	return buf_detach(&b);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double best(const double *v, int n)
{
	double b = v[0];
	for (int i = 1; i < n; i++)
		b = v[i] < b ? v[i] : b;
	return b;
}

static int parse_rounds(const char *s, int def)
{
	int r = s ? atoi(s) : def;
	return r < 1 ? 1 : r > MAX_ROUNDS ? MAX_ROUNDS
					  : r;
}

/* ---- watch events parsed per second ---- */

struct parse_count {
	long events;
	size_t names; /* touched so the work cannot be elided */
};

static int on_event(void *ctx, enum watch_event_type t, const cJSON *obj)
{
	struct parse_count *pc = ctx;
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(md, "name");
	pc->events++;
	pc->names += cJSON_IsString(name) ? strlen(name->valuestring) : 0;
	return 0;
}

static int bench_parse(long n, int rounds)
{
	struct buf s;
	buf_init(&s, (size_t)-1);
	size_t *off = xcalloc((size_t)n + 1, sizeof *off);
	for (long i = 0; i < n; i++) {
		char name[32], uid[64], rv[24];
		snprintf(name, sizeof name, "sbx-%06ld", i);
		snprintf(uid, sizeof uid, "%08lx-8f4a-4b6c-9d0e-1f2a3b4c5d6e", i);
		snprintf(rv, sizeof rv, "%ld", 100000 + i);
		const char *kv[] = { "NAME", name, "NS", "team-a", "UID", uid,
				     "RV", rv, "NODE", "kwok-node-0", NULL };
		char *pod = fill(POD_FULL, kv);
		off[i] = s.len;
		buf_appendf(&s, "{\"type\":\"%s\",\"object\":%s}\n", i % 10 ? "MODIFIED" : "ADDED",
			    pod);
		free(pod);
	}
	off[n] = s.len;
	double avg = (double)s.len / (double)n;

	double tp[MAX_ROUNDS] = { 0 }, tb[MAX_ROUNDS] = { 0 };
	struct buf line;
	buf_init(&line, MAX_LINE);
	long bad = 0;
	struct parse_count pc = { 0 };
	for (int r = 0; r < rounds; r++) {
		/* watch_parser: the stream as the network hands it over. */
		struct watch_parser *p = watch_parser_new(MAX_LINE);
		char msg[256];
		pc.events = 0;
		double t0 = now_s();
		for (size_t at = 0; at < s.len; at += CHUNK) {
			size_t len = s.len - at < CHUNK ? s.len - at : CHUNK;
			if (watch_parser_feed(p, s.data + at, len, on_event, &pc, msg,
					      sizeof msg)) {
				fprintf(stderr, "parse: %s\n", msg);
				bad++;
				break;
			}
		}
		tp[r] = now_s() - t0;
		watch_parser_free(p);
		if (pc.events != n)
			bad++;
		/* Baseline: every line already cut out (the newline offsets are
		 * known), copied to a reused buffer as the parser copies it, and
		 * handed straight to cJSON: no scanning, no type check, no callback. */
		long parsed = 0;
		t0 = now_s();
		for (long i = 0; i < n; i++) {
			size_t len = off[i + 1] - off[i] - 1;
			buf_reset(&line);
			buf_append(&line, s.data + off[i], len);
			cJSON *j = cJSON_ParseWithLength(line.data, line.len);
			parsed += j != NULL;
			cJSON_Delete(j);
		}
		tb[r] = now_s() - t0;
		if (parsed != n)
			bad++;
	}
	/* Best round: the CPU-bound figure least disturbed by other load. */
	double mp = best(tp, rounds), mb = best(tb, rounds);
	printf("watch events parsed per second (%ld pod events of %.0f bytes avg, %.1f MB, "
	       "16 KiB chunks, best of %d)\n",
	       n, avg, (double)s.len / 1e6, rounds);
	printf("  watch_parser_feed:              %10.0f events/s  %7.1f MB/s\n", (double)n / mp,
	       (double)s.len / mp / 1e6);
	printf("  baseline cJSON_ParseWithLength: %10.0f events/s  %7.1f MB/s  (lines pre-split)\n",
	       (double)n / mb, (double)s.len / mb / 1e6);
	printf("  throughput parser/baseline:     %10.2f\n", mb / mp);
	buf_release(&s);
	buf_release(&line);
	free(off);
	if (bad)
		fprintf(stderr, "parse: %ld rounds went wrong\n", bad);
	return bad ? 1 : 0;
}

/* ---- pod creation ---- */

struct creator {
	struct kube_client *kc;
	const char *ns, *node;
	long from, to;
	long failed;
};

static void *create_range(void *arg)
{
	struct creator *cr = arg;
	char path[512];
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", cr->ns);
	for (long i = cr->from; i < cr->to; i++) {
		char name[32];
		snprintf(name, sizeof name, "pod-%06ld", i);
		const char *kv[] = { "NAME", name, "NODE", cr->node, NULL };
		char *body = fill(POD_CREATE, kv);
		struct kube_error err;
		enum kube_err e = KUBE_OK;
		for (int attempt = 0; attempt < 5; attempt++) {
			e = kube_request(cr->kc, "POST", path, NULL, body, NULL, NULL, &err);
			if (e == KUBE_OK || e == KUBE_ERR_ALREADY_EXISTS || !kube_err_retriable(e))
				break;
			usleep(200000);
		}
		if (e != KUBE_OK && e != KUBE_ERR_ALREADY_EXISTS && cr->failed++ == 0)
			fprintf(stderr, "create %s: %s: %s\n", name, kube_err_str(e), err.message);
		free(body);
	}
	return NULL;
}

static int create_pods(struct kube_client *kc, const char *ns, long n, int threads,
		       const char *node)
{
	if (n < 1 || threads < 1 || threads > 64) {
		fprintf(stderr, "create-pods: N >= 1 and 1 <= THREADS <= 64\n");
		return 2;
	}
	pthread_t th[64];
	struct creator cr[64];
	int started = 0;
	double t0 = now_s();
	for (int t = 0; t < threads; t++) {
		cr[t] = (struct creator){ kc, ns, node, n * t / threads, n * (t + 1) / threads, 0 };
		if (pthread_create(&th[t], NULL, create_range, &cr[t]) != 0)
			break;
		started++;
	}
	long failed = 0, made = 0;
	for (int t = 0; t < started; t++) {
		pthread_join(th[t], NULL);
		failed += cr[t].failed;
		made += cr[t].to - cr[t].from - cr[t].failed;
	}
	fprintf(stderr, "created %ld pods in %.1f s (%ld failed)\n", made, now_s() - t0, failed);
	return made == n ? 0 : 1;
}

/* ---- informer sync and memory ---- */

static size_t heap_in_use(void)
{
	malloc_trim(0);
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

struct list_stats {
	long items;
	size_t json_bytes, full_trim_bytes, sbx_trim_bytes;
};

static void count_item(void *ctx, const cJSON *item)
{
	((struct list_stats *)ctx)->items++;
}

static void count_reset(void *ctx)
{
	((struct list_stats *)ctx)->items = 0;
}

static size_t printed_len(const cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);
	size_t n = s ? strlen(s) : 0;
	free(s);
	return n;
}

/* Sizes of the pods as JSON: as listed, minus managedFields, as sbx_trim_pod
 * keeps them. */
static void size_item(void *ctx, const cJSON *item)
{
	struct list_stats *ls = ctx;
	ls->items++;
	ls->json_bytes += printed_len(item);
	cJSON *c = cJSON_Duplicate(item, 1);
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "metadata"),
						"managedFields");
	ls->full_trim_bytes += printed_len(c);
	cJSON_Delete(c);
	cJSON *t = sbx_trim_pod(item);
	ls->sbx_trim_bytes += printed_len(t);
	cJSON_Delete(t);
}

/* One informer run: seconds to sync, and heap bytes held per cached object. */
static int sync_once(struct kube_client *kc, const char *path, informer_trim_fn trim, double *secs,
		     double *per_obj, size_t *count)
{
	size_t before = heap_in_use();
	double t0 = now_s();
	struct informer *inf = informer_new(kc, path, NULL, trim, NULL, NULL, NULL);
	if (informer_start(inf) < 0 || !informer_wait_synced(inf, 300000)) {
		informer_free(inf);
		return -1;
	}
	*secs = now_s() - t0;
	/* Let the informer thread free the list and open its watch. */
	usleep(500000);
	*count = informer_size(inf);
	size_t after = heap_in_use();
	*per_obj = *count ? ((double)after - (double)before) / (double)*count : 0;
	informer_free(inf);
	return 0;
}

static int bench_sync(struct kube_client *kc, const char *ns, int rounds)
{
	char path[512];
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", ns);
	struct kube_error err;
	struct list_stats ls = { 0 };
	unsigned long r0 = kube_client_requests(kc);
	/* Warm-up (apiserver caches, our connection), and the object sizes. */
	if (kube_list_ex(kc, path, NULL, size_item, count_reset, &ls, NULL, NULL, &err) !=
	    KUBE_OK) {
		fprintf(stderr, "list: %s\n", err.message);
		return 1;
	}
	unsigned long pages = kube_client_requests(kc) - r0;
	double tl[MAX_ROUNDS] = { 0 }, td[MAX_ROUNDS] = { 0 }, tt[MAX_ROUNDS] = { 0 };
	double md[MAX_ROUNDS] = { 0 }, mt[MAX_ROUNDS] = { 0 };
	size_t nd = 0, nt = 0;
	for (int r = 0; r < rounds; r++) {
		struct list_stats c = { 0 };
		double t0 = now_s();
		if (kube_list_ex(kc, path, NULL, count_item, count_reset, &c, NULL, NULL, &err) !=
		    KUBE_OK) {
			fprintf(stderr, "list: %s\n", err.message);
			return 1;
		}
		tl[r] = now_s() - t0;
		if (sync_once(kc, path, NULL, &td[r], &md[r], &nd) < 0 ||
		    sync_once(kc, path, sbx_trim_pod, &tt[r], &mt[r], &nt) < 0) {
			fprintf(stderr, "an informer did not sync\n");
			return 1;
		}
		if ((long)nd != ls.items || (long)nt != ls.items || c.items != ls.items) {
			fprintf(stderr, "counts differ: list %ld, informers %zu and %zu\n", c.items,
				nd, nt);
			return 1;
		}
	}
	double n = (double)ls.items;
	printf("informer sync of %ld pods from the local apiserver (%lu pages of <= 500, "
	       "median of %d)\n",
	       ls.items, pages, rounds);
	printf("  informer, default trim:         %8.3f s  (%.0f pods/s)\n", median(td, rounds),
	       n / median(td, rounds));
	printf("  informer, sbx_trim_pod:         %8.3f s  (%.0f pods/s)\n", median(tt, rounds),
	       n / median(tt, rounds));
	printf("  baseline paginated kube_list:   %8.3f s  (%.0f pods/s, nothing stored)\n",
	       median(tl, rounds), n / median(tl, rounds));
	printf("  ratio informer(default)/list:   %8.2f\n",
	       median(td, rounds) / median(tl, rounds));
	printf("memory per cached pod (heap in use after sync minus before, / %ld)\n", ls.items);
	printf("  default trim (copy minus managedFields): %7.0f bytes/pod\n", median(md, rounds));
	printf("  sbx_trim_pod (controller's trim):        %7.0f bytes/pod\n", median(mt, rounds));
	printf("  for scale, a pod as compact JSON: %.0f bytes listed, %.0f minus managedFields, "
	       "%.0f after sbx_trim_pod\n",
	       (double)ls.json_bytes / n, (double)ls.full_trim_bytes / n,
	       (double)ls.sbx_trim_bytes / n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "parse"))
		return bench_parse(argc > 2 ? atol(argv[2]) : 50000,
				   parse_rounds(argc > 3 ? argv[3] : NULL, 5));
	int sync = argc >= 3 && argc <= 4 && !strcmp(argv[1], "sync");
	int create = argc == 6 && !strcmp(argv[1], "create-pods");
	if (!sync && !create) {
		fprintf(stderr, "usage: kube-bench parse [EVENTS [ROUNDS]] | create-pods NS N "
				"THREADS NODE | sync NS [ROUNDS]\n");
		return 2;
	}
	log_set_level(LOG_WARN);
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
	int rc = create ? create_pods(kc, argv[2], atol(argv[3]), atoi(argv[4]), argv[5])
			: bench_sync(kc, argv[2], parse_rounds(argc > 3 ? argv[3] : NULL, 3));
	kube_client_free(kc);
	return rc;
}
