#include "kube/events.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uthash.h>

#include "base/xmalloc.h"
#include "base/ktime.h"
#include "kube/ratelimit.h"
#include "obs/log.h"

#define QUEUE_MAX 1000
#define CACHE_MAX 4096
#define WINDOW_MS (10L * 60 * 1000)
#define PATCH_INTERVAL_MS (30L * 1000)
/* A global safety cap, well above the controller's own create rate: what
 * keeps one object from flooding is the per-object spam filter below. */
#define SEND_QPS 500.0
#define SEND_BURST 500
/* client-go's EventSourceObjectSpamFilter: per involved object, burst 25,
 * then one every 5 minutes; 4096 objects remembered (its LRU size). */
#define SPAM_QPS (1.0 / 300)
#define SPAM_BURST 25
#define SPAM_KEYS 4096
#define SENDERS 8 /* writes in flight at once: 3,000 Sandboxes at 37/s overflowed 2 */
#define SEND_TIMEOUT_MS 5000L
#define FLUSH_MS 2000
#define MESSAGE_MAX 1024
#define NAME_PREFIX_MAX 200

/* event_recorder_set_window_ms (tests): 0 means WINDOW_MS. */
static atomic_int window_override_ms;

static int64_t window_ms(void)
{
	int ms = atomic_load(&window_override_ms);
	return ms > 0 ? ms : WINDOW_MS;
}

/* event_recorder_set_patch_interval_ms (tests): 0 means PATCH_INTERVAL_MS. */
static atomic_int patch_override_ms;

static int64_t patch_interval_ms(void)
{
	int ms = atomic_load(&patch_override_ms);
	return ms > 0 ? ms : PATCH_INTERVAL_MS;
}

/* What was sent for one (uid, type, reason, message). */
struct seen {
	char *key;
	char *ns;
	char *event_name;
	int count;   /* occurrences so far */
	int written; /* the count the Event on the server says */
	int64_t first_ms;
	int64_t last_write_ms;
	int queued;  /* a job for it is in the queue */
	int created; /* the Event exists on the server */
	UT_hash_handle hh;
};

struct job {
	char *key; /* the struct seen it belongs to */
	char *ns;
	char *event_name;
	cJSON *body; /* the full Event (create) or NULL (patch count) */
	struct job *next;
};

struct event_recorder {
	struct kube_client *c;
	char *component;
	char *host;
	pthread_t threads[SENDERS];
	int nthreads;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *head, *tail;
	size_t qlen;
	struct seen *cache; /* insertion-ordered: oldest first */
	int64_t flush_at;   /* a count not yet written is due then (0: none) */
	size_t dropped, sent;
	uint64_t seq;
	int closing;
	int64_t deadline_ms;
	atomic_int abort;
	struct token_bucket bucket;
	struct bucket_set *spam; /* guarded by mu */
};

static void job_free(struct job *j)
{
	free(j->key);
	free(j->ns);
	free(j->event_name);
	cJSON_Delete(j->body);
	free(j);
}

static void seen_del(struct event_recorder *r, struct seen *s)
{
	HASH_DEL(r->cache, s);
	free(s->key);
	free(s->ns);
	free(s->event_name);
	free(s);
}

/* Forgets entries older than the window, and the oldest beyond CACHE_MAX.
 * Caller holds mu. */
static void cache_trim(struct event_recorder *r, int64_t now)
{
	struct seen *s, *t;
	HASH_ITER(hh, r->cache, s, t)
	{
		if (now - s->first_ms < window_ms() && HASH_COUNT(r->cache) < CACHE_MAX)
			break;
		if (s->queued) /* the sender will look it up */
			continue;
		seen_del(r, s);
	}
}

/* Queues j, or drops it when the queue is full. Caller holds mu. Returns 0 or
 * -1 (dropped; j freed). */
static int enqueue(struct event_recorder *r, struct job *j)
{
	if (r->qlen >= QUEUE_MAX || r->closing) {
		r->dropped++;
		job_free(j);
		return -1;
	}
	if (r->tail)
		r->tail->next = j;
	else
		r->head = j;
	r->tail = j;
	r->qlen++;
	pthread_cond_signal(&r->cv);
	return 0;
}

/* Queues a PATCH of s's count. Caller holds mu. Returns 0 or -1 (dropped). */
static int queue_patch(struct event_recorder *r, struct seen *s)
{
	struct job *j = xcalloc(1, sizeof *j);
	j->key = xstrdup(s->key);
	j->ns = xstrdup(s->ns);
	j->event_name = xstrdup(s->event_name);
	if (enqueue(r, j) < 0)
		return -1;
	s->queued = 1;
	return 0;
}

/* Notes that created Event s counts more than it says: its count is written
 * once its patch interval is over, whether or not it occurs again. Caller
 * holds mu. */
static void note_unwritten(struct event_recorder *r, const struct seen *s)
{
	int64_t due = s->last_write_ms + patch_interval_ms();
	if (!r->flush_at || due < r->flush_at) {
		r->flush_at = due;
		pthread_cond_broadcast(&r->cv); /* the idle senders wait for it */
	}
}

/* Queues a count PATCH for each created Event that counts more than it says
 * and whose patch interval is over, and notes when the next is due: not
 * sooner than a second from now, so the cache is walked once a second at
 * most. Caller holds mu. */
static void flush_counts(struct event_recorder *r, int64_t now)
{
	int64_t next = 0;
	struct seen *s, *t;
	HASH_ITER(hh, r->cache, s, t)
	{
		if (!s->created || s->queued || s->count <= s->written)
			continue;
		int64_t due = s->last_write_ms + patch_interval_ms();
		if (due <= now && queue_patch(r, s) == 0)
			continue;
		if (due > now && (!next || due < next))
			next = due;
	}
	r->flush_at = next && next < now + 1000 ? now + 1000 : next;
}

/* Cuts s to at most max bytes on a UTF-8 character boundary (caller frees). */
static char *utf8_cut(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n <= max)
		return xstrdup(s);
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return xstrndup(s, n);
}

static cJSON *make_event(struct event_recorder *r, const char *api_version, const char *kind,
			 const char *ns, const char *name, const char *uid, const char *type,
			 const char *reason, const char *msg, const char *event_ns,
			 const char *event_name)
{
	char ts[21];
	ktime_format_rfc3339(time(NULL), ts);
	cJSON *e = cJSON_CreateObject();
	if (!e)
		abort();
	cJSON_AddStringToObject(e, "apiVersion", "v1");
	cJSON_AddStringToObject(e, "kind", "Event");
	cJSON *md = cJSON_AddObjectToObject(e, "metadata");
	cJSON_AddStringToObject(md, "name", event_name);
	cJSON_AddStringToObject(md, "namespace", event_ns);
	cJSON *io = cJSON_AddObjectToObject(e, "involvedObject");
	if (api_version && *api_version)
		cJSON_AddStringToObject(io, "apiVersion", api_version);
	cJSON_AddStringToObject(io, "kind", kind ? kind : "");
	if (ns && *ns)
		cJSON_AddStringToObject(io, "namespace", ns);
	cJSON_AddStringToObject(io, "name", name ? name : "");
	if (uid && *uid)
		cJSON_AddStringToObject(io, "uid", uid);
	cJSON_AddStringToObject(e, "type", type ? type : "Normal");
	cJSON_AddStringToObject(e, "reason", reason ? reason : "");
	cJSON_AddStringToObject(e, "message", msg);
	cJSON *src = cJSON_AddObjectToObject(e, "source");
	cJSON_AddStringToObject(src, "component", r->component);
	if (r->host)
		cJSON_AddStringToObject(src, "host", r->host);
	cJSON_AddStringToObject(e, "firstTimestamp", ts);
	cJSON_AddStringToObject(e, "lastTimestamp", ts);
	cJSON_AddNumberToObject(e, "count", 1);
	cJSON_AddStringToObject(e, "reportingComponent", r->component);
	if (r->host)
		cJSON_AddStringToObject(e, "reportingInstance", r->host);
	return e;
}

void event_record(struct event_recorder *r, const char *api_version, const char *kind,
		  const char *ns, const char *name, const char *uid, const char *type,
		  const char *reason, const char *message)
{
	if (!r)
		return;
	char *msg = utf8_cut(message ? message : "", MESSAGE_MAX);
	const char *event_ns = ns && *ns ? ns : "default";
	char *key =
	    xasprintf("%s\x1f%s\x1f%s/%s\x1f%s\x1f%s\x1f%s", uid ? uid : "", kind ? kind : "",
		      event_ns, name ? name : "", type ? type : "", reason ? reason : "", msg);
	int64_t now = ktime_mono_ms();
	char *spam_key = xasprintf("%s\x1f%s\x1f%s\x1f%s\x1f%s", api_version ? api_version : "",
				   kind ? kind : "", event_ns, name ? name : "", uid ? uid : "");
	pthread_mutex_lock(&r->mu);
	int allowed = bucket_set_try(r->spam, spam_key, now);
	free(spam_key);
	if (!allowed) { /* this object has spoken enough for now */
		r->dropped++;
		pthread_mutex_unlock(&r->mu);
		free(key);
		free(msg);
		return;
	}
	cache_trim(r, now);
	struct seen *s;
	HASH_FIND_STR(r->cache, key, s);
	/* An entry with a job pending is kept past its window, as cache_trim
	 * keeps it: the sender finds its entry by key, so a new entry (and a
	 * second job) under that key would be taken for its own, marked
	 * created before its create ran or deleted. One job per key at most. */
	if (s && (now - s->first_ms < window_ms() || s->queued)) {
		/* Aggregate: count it, and write the count now and then. */
		s->count++;
		if (s->created && !s->queued) {
			if (now - s->last_write_ms >= patch_interval_ms())
				queue_patch(r, s);
			else
				note_unwritten(r, s);
		}
		pthread_mutex_unlock(&r->mu);
		free(key);
		free(msg);
		return;
	}
	if (s) /* out of its window, no job pending */
		seen_del(r, s);
	char *prefix = utf8_cut(name && *name ? name : "event", NAME_PREFIX_MAX);
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	uint64_t stamp = (uint64_t)wall.tv_sec * 1000000000ull + (uint64_t)wall.tv_nsec + r->seq++;
	char *ename = xasprintf("%s.%016llx", prefix, (unsigned long long)stamp);
	free(prefix);
	struct job *j = xcalloc(1, sizeof *j);
	j->key = xstrdup(key);
	j->ns = xstrdup(event_ns);
	j->event_name = xstrdup(ename);
	j->body =
	    make_event(r, api_version, kind, ns, name, uid, type, reason, msg, event_ns, ename);
	if (enqueue(r, j) == 0) {
		s = xcalloc(1, sizeof *s);
		s->key = key;
		key = NULL;
		s->ns = xstrdup(event_ns);
		s->event_name = ename;
		ename = NULL;
		s->count = 1;
		s->first_ms = now;
		s->last_write_ms = now;
		s->queued = 1;
		HASH_ADD_KEYPTR(hh, r->cache, s->key, strlen(s->key), s);
	}
	pthread_mutex_unlock(&r->mu);
	free(ename);
	free(key);
	free(msg);
}

/* Sends one job (a create, or a count patch with count). Returns the outcome;
 * a create answered AlreadyExists is KUBE_OK (see below). */
static enum kube_err send_job(struct event_recorder *r, const struct job *j, int count)
{
	struct kube_request_opts ro = { .timeout_ms = SEND_TIMEOUT_MS, .abort = &r->abort };
	struct kube_error err;
	enum kube_err rc;
	if (j->body) {
		/* what was counted while the create waited goes with it */
		cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(j->body, "count"), count);
		char *path = xasprintf("/api/v1/namespaces/%s/events", j->ns);
		char *body = cJSON_PrintUnformatted(j->body);
		if (!body)
			abort();
		rc = kube_request_ex(r->c, "POST", path, NULL, body, NULL, &ro, NULL, &err);
		free(body);
		free(path);
		/* The name is ours alone (a prefix, a nanosecond stamp and a
		 * sequence number), so AlreadyExists answers our own earlier
		 * attempt: libcurl sends a POST again when the answer was lost
		 * on a kept-alive connection. That Event is this one, written;
		 * starting afresh would create a second one beside it. */
		if (rc == KUBE_ERR_ALREADY_EXISTS)
			rc = KUBE_OK;
	} else {
		char ts[21];
		ktime_format_rfc3339(time(NULL), ts);
		char *path = xasprintf("/api/v1/namespaces/%s/events/%s", j->ns, j->event_name);
		char *body = xasprintf("{\"count\":%d,\"lastTimestamp\":\"%s\"}", count, ts);
		rc = kube_request_ex(r->c, "PATCH", path, NULL, body,
				     "application/merge-patch+json", &ro, NULL, &err);
		free(body);
		free(path);
	}
	if (rc != KUBE_OK && rc != KUBE_ERR_NOT_FOUND)
		log_kv(LOG_WARN, "cannot write event", "event", j->event_name, "error",
		       kube_err_str(rc), "message", err.message);
	return rc;
}

static void *sender_main(void *u)
{
	struct event_recorder *r = u;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!r->head && !r->closing) {
			int64_t now = ktime_mono_ms();
			if (r->flush_at && now >= r->flush_at)
				flush_counts(r, now);
			else if (r->flush_at)
				ktime_cond_wait_until(&r->cv, &r->mu, r->flush_at);
			else
				pthread_cond_wait(&r->cv, &r->mu);
		}
		if (!r->head || (r->closing && ktime_mono_ms() >= r->deadline_ms))
			break;
		struct job *j = r->head;
		r->head = j->next;
		if (!r->head)
			r->tail = NULL;
		r->qlen--;
		/* Pace writes; the wait ends early at the flush deadline. */
		int64_t until = ktime_mono_ms() + token_bucket_reserve(&r->bucket);
		while (ktime_mono_ms() < until &&
		       !(r->closing && ktime_mono_ms() >= r->deadline_ms))
			ktime_cond_wait_until(&r->cv, &r->mu,
					      r->closing && r->deadline_ms < until ? r->deadline_ms
										   : until);
		if (r->closing && ktime_mono_ms() >= r->deadline_ms) {
			r->dropped++;
			job_free(j);
			break;
		}
		struct seen *s;
		HASH_FIND_STR(r->cache, j->key, s);
		int count = s ? s->count : 1;
		pthread_mutex_unlock(&r->mu);

		enum kube_err rc = send_job(r, j, count);

		pthread_mutex_lock(&r->mu);
		HASH_FIND_STR(r->cache, j->key, s);
		if (rc == KUBE_OK) {
			r->sent++;
		} else {
			r->dropped++;
		}
		if (s) {
			s->queued = 0;
			s->last_write_ms = ktime_mono_ms();
			if (rc == KUBE_OK) {
				s->created = 1;
				s->written = count;
			} else if (j->body || rc == KUBE_ERR_NOT_FOUND) {
				seen_del(r, s); /* start afresh next time */
				s = NULL;
			}
			/* counted while it was sent, or a count patch failed */
			if (s && s->count > s->written)
				note_unwritten(r, s);
		}
		job_free(j);
	}
	/* Whatever is left is dropped. */
	while (r->head) {
		struct job *j = r->head;
		r->head = j->next;
		r->dropped++;
		job_free(j);
	}
	r->tail = NULL;
	r->qlen = 0;
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Frees r and what it owns (the cache of seen events included); its sender
 * thread is not running. */
static void recorder_destroy(struct event_recorder *r)
{
	struct seen *s, *t;
	HASH_ITER(hh, r->cache, s, t)
	{
		seen_del(r, s);
	}
	token_bucket_release(&r->bucket);
	bucket_set_free(r->spam);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r->component);
	free(r->host);
	free(r);
}

struct event_recorder *event_recorder_new(struct kube_client *c, const char *component)
{
	struct event_recorder *r = xcalloc(1, sizeof *r);
	r->c = c;
	r->component = xstrdup(component ? component : "sandbox-controller");
	char host[256];
	if (gethostname(host, sizeof host) == 0) {
		host[sizeof host - 1] = '\0';
		r->host = xstrdup(host);
	}
	pthread_mutex_init(&r->mu, NULL);
	ktime_cond_init(&r->cv);
	atomic_init(&r->abort, 0);
	token_bucket_init(&r->bucket, SEND_QPS, SEND_BURST);
	r->spam = bucket_set_new(SPAM_QPS, SPAM_BURST, SPAM_KEYS);
	for (; r->nthreads < SENDERS; r->nthreads++)
		if (pthread_create(&r->threads[r->nthreads], NULL, sender_main, r) != 0)
			break;
	if (!r->nthreads) {
		recorder_destroy(r);
		return NULL;
	}
	return r;
}

size_t event_recorder_dropped(struct event_recorder *r)
{
	pthread_mutex_lock(&r->mu);
	size_t n = r->dropped;
	pthread_mutex_unlock(&r->mu);
	return n;
}

void event_recorder_set_window_ms(int ms)
{
	atomic_store(&window_override_ms, ms > 0 ? ms : 0);
}

void event_recorder_set_patch_interval_ms(int ms)
{
	atomic_store(&patch_override_ms, ms > 0 ? ms : 0);
}

size_t event_recorder_sent(struct event_recorder *r)
{
	pthread_mutex_lock(&r->mu);
	size_t n = r->sent;
	pthread_mutex_unlock(&r->mu);
	return n;
}

/* Waits for the sender until the flush deadline, then aborts a request still
 * in flight (the transfer notices within about a second). */
static void *flush_watchdog(void *u)
{
	struct event_recorder *r = u;
	pthread_mutex_lock(&r->mu);
	while (r->closing != 2 && ktime_mono_ms() < r->deadline_ms)
		ktime_cond_wait_until(&r->cv, &r->mu, r->deadline_ms);
	pthread_mutex_unlock(&r->mu);
	atomic_store(&r->abort, 1);
	return NULL;
}

void event_recorder_free(struct event_recorder *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	/* Counts waiting for their patch interval are written now, within the
	 * flush like everything queued: the process is going (every interval
	 * is over by a clock at its end). */
	flush_counts(r, INT64_MAX);
	r->closing = 1;
	r->deadline_ms = ktime_mono_ms() + FLUSH_MS;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_t wd;
	int have_wd = pthread_create(&wd, NULL, flush_watchdog, r) == 0;
	if (!have_wd)
		atomic_store(&r->abort, 1);
	for (int i = 0; i < r->nthreads; i++)
		pthread_join(r->threads[i], NULL);
	pthread_mutex_lock(&r->mu);
	r->closing = 2;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (have_wd)
		pthread_join(wd, NULL);
	if (r->dropped)
		log_kv(LOG_INFO, "event recorder stopped with events dropped");
	recorder_destroy(r);
}
