/* sandbox-controller: flags, configuration, wiring, start-up order and
 * shutdown. Nothing else lives here: the probe and metrics handlers are
 * obs/probes.h, the API client's metrics kube/restmetrics.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "base/buf.h"
#include "base/xmalloc.h"
#include "kube/authfilter.h"
#include "kube/client.h"
#include "kube/config.h"
#include "base/ktime.h"
#include "kube/lease.h"
#include "kube/restmetrics.h"
#include "kube/workqueue.h"
#include "obs/httpserver.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "obs/probes.h"
#include "sandbox/config.h"
#include "sandbox/netprobe.h"
#include "sandbox/wsinit.h"
#include "sandbox/wsprep.h"
#include "reconcile/controller.h"
#include "reconcile/wsgate.h"
#include "webhook/certs.h"
#include "webhook/server.h"

struct options {
	const char *kubeconfig;
	const char *context;
	const char *config;
	const char *metrics_addr;
	const char *probe_addr;
	const char *seal_key_files[SBX_SEAL_MAX_KEYS]; /* newest first */
	int nseal_key_files;
	const char *log_level;
	long key_lifetime_s;
	int workers;
	double qps;
	int burst;
	int leader_elect;
	const char *le_namespace;
	const char *le_id;
	/* webhook serving certificates */
	const char *cert_mode;						      /* "external" or "self-managed" */
	const char *metrics_cert_path, *metrics_cert_name, *metrics_cert_key; /* HTTPS /metrics */
	int metrics_secure;						      /* TokenReview + SubjectAccessReview in front of /metrics */
	const char *cert_dir;
	long cert_validity_s, ca_lifetime_s;
	const char *cert_dns_names, *cert_ips, *service_name, *config_name;
	const char *webhook_addr;
	const char *webhook_client_ca, *webhook_client_names;
	long drain_s; /* SIGTERM: the webhook keeps serving this long, not Ready */
	const char *owner_authz;
	long warm_settle_s;
	double warm_refill_qps;
	double shared_rate;	     /* the fair queue's starts a second of a sharing backlog; 0: none */
	const char *queue_order;     /* "fair" or "fifo" */
	int per_ns, per_owner;	     /* the queue's caps; -1: the default for the workers */
	int shared_ns, shared_owner; /* its caps while tenants share it; -1: the same */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandbox-controller [flags]\n"
		"       sandbox-controller workspace-init --uid UID --gid GID FOLDER...  (the workspace preparation pod's)\n"
		"       sandbox-controller net-probe listen PORT... | connect IP SHUT OPEN SECONDS  (the NetworkPolicy probe's pods)\n"
		"  --kubeconfig PATH                  kubeconfig (default $KUBECONFIG, in-cluster, ~/.kube/config)\n"
		"  --context NAME                     kubeconfig context (default: current-context)\n"
		"  --config PATH                      controller YAML config (workspace root, mounts, key lifetime)\n"
		"  --seal-key-file PATH               pod seal keys, shared by all replicas: one key per line\n"
		"                                     (>= %d bytes), newest first; repeat the flag for more\n"
		"                                     files (newest first); the newest key seals new pods\n"
		"  --key-lifetime SECONDS             idempotency key lifetime (overrides the config; default 86400)\n"
		"  --workers N                        concurrent reconciles (default 64)\n"
		"  --work-queue-order fair|fifo       fair (default): namespaces in turn, and within one its owners in\n"
		"                                     turn; fifo: first come, first served (a baseline for benchmarks)\n"
		"  --max-reconciles-per-namespace N   fair order: reconciles of one namespace at once (default workers/8;\n"
		"                                     0: no cap)\n"
		"  --max-reconciles-per-owner N       fair order: reconciles of one owner of a namespace at once\n"
		"                                     (default workers/16; 0: no cap)\n"
		"  --shared-reconciles-per-namespace N  fair order: the namespace cap while another namespace has work\n"
		"                                     (queued, running, or done in the last second; default workers/32;\n"
		"                                     0: the plain cap)\n"
		"  --shared-reconciles-per-owner N    the same for an owner while another owner of its namespace has work\n"
		"                                     (default workers/64; 0: the plain cap)\n"
		"  --shared-reconcile-rate R          fair order: while a tenant without a backlog has work, a namespace\n"
		"                                     or owner with a backlog starts at most R reconciles a second\n"
		"                                     (default 0: none, as 0 or less; docs/operations.md weighs it)\n"
		"  --kube-api-qps Q --kube-api-burst B client-side rate limit (default off: 0 or less = off,\n"
		"                                     the server's API Priority and Fairness decides; burst 100)\n"
		"  --metrics-bind-address ADDR        /metrics listener (default :8080; 0 disables)\n"
		"  --metrics-cert-path DIR            serve /metrics over HTTPS (TLS 1.2+) with DIR/tls.crt and DIR/tls.key,\n"
		"                                     re-read when they change (default: plain HTTP)\n"
		"  --metrics-cert-name, --metrics-cert-key FILE  file names in DIR (default tls.crt, tls.key)\n"
		"  --metrics-secure                   /metrics only for a bearer token the API server authenticates\n"
		"                                     (TokenReview) and authorizes for get /metrics (SubjectAccessReview);\n"
		"                                     needs --metrics-cert-path\n"
		"  --health-probe-bind-address ADDR   /healthz and /readyz listener (default :8081; 0 disables)\n"
		"  --log-level debug|info|warn|error  (default info)\n"
		"  --leader-elect                     only the Lease holder reconciles (default off; correctness\n"
		"                                     never depends on it, it saves duplicate API calls)\n"
		"  --leader-election-namespace NS     Lease namespace (default: the kubeconfig/in-cluster namespace)\n"
		"  --leader-election-id NAME          Lease name (default sandbox-controller-leader)\n"
		"  --owner-authorization MODE         accessReview (default) or namespace (overrides the config)\n"
		"  --webhook-bind-address ADDR        admission webhook (HTTPS) listener, e.g. :9443 (default 0: off)\n"
		"  --webhook-client-ca-file PATH      PEM CA the API server's client certificate chains to: the webhook\n"
		"                                     then serves only clients presenting a certificate it signed (the API\n"
		"                                     server's AdmissionConfiguration kubeConfigFile; default: any client)\n"
		"  --webhook-client-names A,B         names (subject CN or DNS SAN) that client certificate must carry\n"
		"                                     (default: any the CA signed)\n"
		"  --webhook-cert-dir DIR             tls.crt and tls.key of the webhook server, re-read when they change\n"
		"                                     (default /tmp/k8s-webhook-server/serving-certs)\n"
		"  --webhook-cert-mode MODE           external (alias cert-manager): the files come from cert-manager\n"
		"                                     or the operator (default); self-managed: the controller writes and renews\n"
		"                                     them, signed by a CA derived from the seal key, and keeps\n"
		"                                     the webhook configurations' caBundle current\n"
		"  --webhook-cert-validity DUR        self-managed serving certificate validity (default 24h, min 30s)\n"
		"  --webhook-ca-lifetime DUR          self-managed CA epoch (default 30 x validity, min 2 x)\n"
		"  --webhook-service-name NAME        Service in front of the webhook (default sandbox-controller-webhook)\n"
		"  --webhook-cert-dns-names A,B       certificate DNS names (default NAME.NS.svc,NAME.NS.svc.cluster.local)\n"
		"  --webhook-cert-ips A,B             certificate IP addresses (default none)\n"
		"  --webhook-drain DUR                on SIGTERM, /readyz fails at once and the webhook keeps answering\n"
		"                                     for DUR before the listeners close, while the API server still\n"
		"                                     calls this replica (default 5s; 0: none; at most 5m; a second\n"
		"                                     SIGTERM/SIGINT ends it; keep it below terminationGracePeriodSeconds)\n"
		"  --webhook-config-name NAME         the webhook configurations: self-managed mode keeps their caBundle\n"
		"                                     current, and an owner is mounted only for a Sandbox whose creation\n"
		"                                     the MutatingWebhookConfiguration of this name covered (default\n"
		"                                     sandbox-controller; empty = none: no owner is mounted)\n"
		"  --warm-pool-settle DUR             a warm pool's template serves Sandboxes only after this long,\n"
		"                                     longer than any replica's cache lags (default 90s; docs/api.md)\n"
		"  --warm-pool-refill-qps Q           warm pods created per second, all pools together (default 10)\n"
		"  --work-queue-bucket NS             print the bucket of namespace NS in the work queue's metrics\n"
		"                                     (sandbox_workqueue_namespace_*{bucket}) and exit\n"
		"  --version                          print the version and exit\n",
		SBX_SEAL_FILE_KEY_MIN);
}

/* ---- flags: one row per flag ---- */

enum flag_kind {
	F_STR,	    /* the value, as given */
	F_SET,	    /* no value: sets an int to 1 */
	F_LIST,	    /* the value appended to seal_key_files (repeatable) */
	F_LONG,	    /* an integer of at least min */
	F_INT,	    /* an integer between min and max */
	F_NUMBER,   /* a number; above min and at most max when bounded */
	F_DURATION, /* 24h, 90m, 60s (sbx_parse_duration) into a long; at most max when set */
	F_CHOICE,   /* one of choices ("a|b|c") */
	F_HELP,
	F_VERSION,
	F_BUCKET, /* prints the work queue bucket of a namespace and exits */
};

struct flag {
	const char *name;
	enum flag_kind kind;
	size_t off; /* the field of struct options */
	double min, max;
	int bounded; /* F_NUMBER: min (exclusive) and max apply */
	int zero_ok; /* F_DURATION: "0" (or "0s") is accepted */
	const char *choices;
	const char *refused; /* the message when the value is refused */
};

#define OPT(f) offsetof(struct options, f)
static const struct flag flags[] = {
	{ .name = "kubeconfig", .kind = F_STR, .off = OPT(kubeconfig) },
	{ .name = "context", .kind = F_STR, .off = OPT(context) },
	{ .name = "config", .kind = F_STR, .off = OPT(config) },
	{ .name = "metrics-bind-address", .kind = F_STR, .off = OPT(metrics_addr) },
	{ .name = "health-probe-bind-address", .kind = F_STR, .off = OPT(probe_addr) },
	{ .name = "seal-key-file", .kind = F_LIST, .off = OPT(seal_key_files), .max = SBX_SEAL_MAX_KEYS },
	{ .name = "log-level", .kind = F_STR, .off = OPT(log_level) },
	{ .name = "key-lifetime", .kind = F_LONG, .off = OPT(key_lifetime_s), .min = 1, .refused = "--key-lifetime must be a positive number of seconds" },
	{ .name = "work-queue-order", .kind = F_CHOICE, .off = OPT(queue_order), .choices = "fair|fifo", .refused = "--work-queue-order must be fair or fifo" },
	{ .name = "max-reconciles-per-namespace", .kind = F_INT, .off = OPT(per_ns), .min = 0, .max = 256, .refused = "--max-reconciles-per-namespace must be between 0 (no cap) and 256" },
	{ .name = "max-reconciles-per-owner", .kind = F_INT, .off = OPT(per_owner), .min = 0, .max = 256, .refused = "--max-reconciles-per-owner must be between 0 (no cap) and 256" },
	{ .name = "shared-reconciles-per-namespace", .kind = F_INT, .off = OPT(shared_ns), .min = 0, .max = 256, .refused = "--shared-reconciles-per-namespace must be between 0 (the plain cap) and 256" },
	{ .name = "shared-reconciles-per-owner", .kind = F_INT, .off = OPT(shared_owner), .min = 0, .max = 256, .refused = "--shared-reconciles-per-owner must be between 0 (the plain cap) and 256" },
	{ .name = "shared-reconcile-rate", .kind = F_NUMBER, .off = OPT(shared_rate), .refused = "--shared-reconcile-rate must be a number (0 or less: no rate)" },
	{ .name = "workers", .kind = F_INT, .off = OPT(workers), .min = 1, .max = 256, .refused = "--workers must be between 1 and 256" },
	{ .name = "kube-api-qps", .kind = F_NUMBER, .off = OPT(qps), .refused = "--kube-api-qps must be a number (0 or less: no client-side limit)" },
	{ .name = "kube-api-burst", .kind = F_INT, .off = OPT(burst), .min = 1, .max = 2147483647, .refused = "--kube-api-burst must be positive" },
	{ .name = "help", .kind = F_HELP },
	{ .name = "version", .kind = F_VERSION },
	{ .name = "work-queue-bucket", .kind = F_BUCKET },
	{ .name = "metrics-secure", .kind = F_SET, .off = OPT(metrics_secure) },
	{ .name = "leader-elect", .kind = F_SET, .off = OPT(leader_elect) },
	{ .name = "leader-election-namespace", .kind = F_STR, .off = OPT(le_namespace) },
	{ .name = "leader-election-id", .kind = F_STR, .off = OPT(le_id) },
	/* cert-manager: an alias of external (its files, its CA injection) */
	{ .name = "webhook-cert-mode", .kind = F_CHOICE, .off = OPT(cert_mode), .choices = "external|cert-manager|self-managed", .refused = "--webhook-cert-mode must be external (alias cert-manager) or self-managed" },
	{ .name = "metrics-cert-path", .kind = F_STR, .off = OPT(metrics_cert_path) },
	{ .name = "metrics-cert-name", .kind = F_STR, .off = OPT(metrics_cert_name) },
	{ .name = "metrics-cert-key", .kind = F_STR, .off = OPT(metrics_cert_key) },
	{ .name = "webhook-cert-dir", .kind = F_STR, .off = OPT(cert_dir) },
	{ .name = "webhook-cert-validity", .kind = F_DURATION, .off = OPT(cert_validity_s), .refused = "--webhook-cert-validity must be a duration such as 24h, 90m or 60s" },
	{ .name = "webhook-ca-lifetime", .kind = F_DURATION, .off = OPT(ca_lifetime_s), .refused = "--webhook-ca-lifetime must be a duration such as 24h, 90m or 60s" },
	{ .name = "webhook-cert-dns-names", .kind = F_STR, .off = OPT(cert_dns_names) },
	{ .name = "webhook-cert-ips", .kind = F_STR, .off = OPT(cert_ips) },
	{ .name = "webhook-service-name", .kind = F_STR, .off = OPT(service_name) },
	{ .name = "webhook-config-name", .kind = F_STR, .off = OPT(config_name) },
	{ .name = "webhook-bind-address", .kind = F_STR, .off = OPT(webhook_addr) },
	{ .name = "webhook-client-ca-file", .kind = F_STR, .off = OPT(webhook_client_ca) },
	{ .name = "webhook-client-names", .kind = F_STR, .off = OPT(webhook_client_names) },
	{ .name = "webhook-drain", .kind = F_DURATION, .off = OPT(drain_s), .zero_ok = 1, .max = 300, .refused = "--webhook-drain must be a duration such as 5s or 1m, at most 5m (0: none)" },
	{ .name = "owner-authorization", .kind = F_CHOICE, .off = OPT(owner_authz), .choices = "accessReview|namespace", .refused = "--owner-authorization must be accessReview or namespace" },
	{ .name = "warm-pool-settle", .kind = F_DURATION, .off = OPT(warm_settle_s), .refused = "--warm-pool-settle must be a duration such as 90s or 2m" },
	{ .name = "warm-pool-refill-qps", .kind = F_NUMBER, .off = OPT(warm_refill_qps), .min = 0, .max = 10000, .bounded = 1, .refused = "--warm-pool-refill-qps must be a number above 0 (at most 10000)" },
};
#define NFLAGS (sizeof flags / sizeof flags[0])

/* 1 when arg is one of the '|'-separated choices. */
static int one_of(const char *choices, const char *arg)
{
	size_t n = strlen(arg);
	for (const char *p = choices; *p;) {
		size_t len = strcspn(p, "|");
		if (len == n && !strncmp(p, arg, n))
			return 1;
		p += len + (p[len] == '|');
	}
	return 0;
}

/* Applies flag f with its value arg (NULL for F_SET, F_HELP, F_VERSION) to o.
 * Returns 0, or -1 with the flag's message on stderr. */
static int set_flag(const struct flag *f, const char *arg, struct options *o)
{
	void *field = (char *)o + f->off;
	char *end;
	switch (f->kind) {
	case F_STR: *(const char **)field = arg; return 0;
	case F_SET: *(int *)field = 1; return 0;
	case F_LIST:
		if (o->nseal_key_files >= (int)f->max)
			break;
		((const char **)field)[o->nseal_key_files++] = arg;
		return 0;
	case F_LONG: {
		long v = strtol(arg, &end, 10);
		if (*end || v < (long)f->min)
			break;
		*(long *)field = v;
		return 0;
	}
	case F_INT: {
		long v = strtol(arg, &end, 10);
		if (*end || (int)v < (int)f->min || (int)v > (int)f->max)
			break;
		*(int *)field = (int)v;
		return 0;
	}
	case F_NUMBER: {
		double v = strtod(arg, &end);
		if (*end || (f->bounded && (!(v > f->min) || v > f->max)))
			break;
		*(double *)field = v;
		return 0;
	}
	case F_DURATION: {
		long v = 0;
		if (!(f->zero_ok && (!strcmp(arg, "0") || !strcmp(arg, "0s"))) &&
		    (sbx_parse_duration(arg, &v) < 0 || (f->max > 0 && v > (long)f->max)))
			break;
		*(long *)field = v;
		return 0;
	}
	case F_CHOICE:
		if (!one_of(f->choices, arg))
			break;
		*(const char **)field = arg;
		return 0;
	case F_HELP: usage(stdout); exit(0);
	case F_VERSION: printf("sandbox-controller %s\n", SBX_VERSION); exit(0);
	case F_BUCKET: printf("%d\n", workqueue_ns_bucket(arg)); exit(0);
	}
	if (f->kind == F_LIST)
		fprintf(stderr, "--%s given more than %d times\n", f->name, (int)f->max);
	else
		fprintf(stderr, "%s\n", f->refused);
	return -1;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	*o = (struct options){ .metrics_addr = ":8080", .probe_addr = ":8081", .log_level = "info", .workers = 64, .key_lifetime_s = -1, .qps = 0, .burst = 100, .warm_settle_s = 90, .warm_refill_qps = 10, .queue_order = "fair", .per_ns = -1, .per_owner = -1, .shared_ns = -1, .shared_owner = -1, .le_id = "sandbox-controller-leader", .cert_mode = "external", .metrics_cert_name = "tls.crt", .metrics_cert_key = "tls.key", .cert_dir = "/tmp/k8s-webhook-server/serving-certs", .cert_validity_s = 86400, .service_name = "sandbox-controller-webhook", .config_name = "sandbox-controller", .webhook_addr = "0", .drain_s = 5 };
	struct option longopts[NFLAGS + 1];
	for (size_t i = 0; i < NFLAGS; i++) {
		int has_arg = flags[i].kind == F_SET || flags[i].kind == F_HELP || flags[i].kind == F_VERSION
				  ? no_argument
				  : required_argument;
		longopts[i] = (struct option){ flags[i].name, has_arg, NULL, (int)i + 256 };
	}
	longopts[NFLAGS] = (struct option){ NULL, 0, NULL, 0 };
	int ch;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (ch < 256 || ch >= 256 + (int)NFLAGS) {
			usage(stderr);
			return -1;
		}
		if (set_flag(&flags[ch - 256], optarg, o) < 0)
			return -1;
	}
	if (optind < argc) {
		fprintf(stderr, "unexpected argument: %s\n", argv[optind]);
		return -1;
	}
	if (o->webhook_client_names && !o->webhook_client_ca) {
		fprintf(stderr, "--webhook-client-names needs --webhook-client-ca-file\n");
		return -1;
	}
	if (o->metrics_secure && !o->metrics_cert_path) {
		fprintf(stderr, "--metrics-secure needs --metrics-cert-path (a bearer token is never sent in clear)\n");
		return -1;
	}
	return 0;
}

/* ---- metrics read at scrape time ---- */

/* What a scrape reads besides the registry. ctl (once started) and elector
 * are set and cleared by main under mu, so a scrape never reads them while
 * they are being built or freed. */
static struct {
	struct sbx_controller *ctl;
	struct lease_elector *elector;
	int leader_elect;
	struct obs_metric *leader, *build, *ev_dropped;
	size_t ev_dropped_seen;
	pthread_mutex_t mu;
} scrape = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void metrics_register(const char *server)
{
	kube_rest_metrics_register(server);
	scrape.leader = obs_gauge("leader_election_master_status",
				  "Whether this replica is the leader (1) or not (0); 1 when leader election is off.",
				  "name");
	scrape.build = obs_gauge("sandbox_controller_build_info", "Build information; the value is always 1.",
				 "version");
	scrape.ev_dropped = obs_counter("sandbox_events_dropped_total",
					"Kubernetes Events dropped (spam filter, global cap, full queue, failed send).",
					NULL);
	const char *v[] = { SBX_VERSION };
	obs_metric_set(scrape.build, v, 1);
}

/* Before each scrape (struct obs_scrape): leadership and dropped events. */
static void refresh_scrape(void *arg)
{
	const char *name[] = { "sandbox-controller" };
	pthread_mutex_lock(&scrape.mu);
	struct sbx_controller *c = scrape.ctl;
	obs_metric_set(scrape.leader, name,
		       scrape.leader_elect ? (scrape.elector && lease_is_leader(scrape.elector)) : c != NULL);
	if (c && c->events) {
		size_t d = event_recorder_dropped(c->events);
		obs_metric_add(scrape.ev_dropped, NULL, (double)(d - scrape.ev_dropped_seen));
		scrape.ev_dropped_seen = d;
	}
	pthread_mutex_unlock(&scrape.mu);
}

/* Publishes (or clears) what a scrape reads. */
static void scrape_set(struct sbx_controller *ctl, struct lease_elector *elector)
{
	pthread_mutex_lock(&scrape.mu);
	scrape.ctl = ctl;
	scrape.elector = elector;
	pthread_mutex_unlock(&scrape.mu);
}

/* Handler threads of a guarded metrics listener: a scraper or two at once. */
#define METRICS_AUTH_THREADS 2

/* Connections each listener may hold: a share of the descriptor limit, so
 * that slow clients can never take the descriptors the API connections need. */
static int listener_cap(void)
{
	struct rlimit rl;
	long n = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (long)rl.rlim_cur : 65536;
	long cap = (n - 128) / 4; /* 128 for the process itself; room for four listeners */
	return cap < 8 ? 8 : cap > 256 ? 256
				       : (int)cap;
}

/* Starts one listener; addr "0" disables it (*out stays NULL). With
 * handler_threads, its handlers run on threads of their own (they may wait on
 * the API server); without, on its loops (they must be quick). */
static int start_listener(struct obs_http_server **out, const char *name, const char *addr,
			  const struct obs_http_route *routes, size_t nroutes, int handler_threads,
			  const char *cert_dir, const char *cert_name, const char *key_name)
{
	if (!strcmp(addr, "0"))
		return 0;
	char err[512];
	char *cert = cert_dir ? xasprintf("%s/%s", cert_dir, cert_name) : NULL;
	char *key = cert_dir ? xasprintf("%s/%s", cert_dir, key_name) : NULL;
	struct obs_http_opts ho = { .addr = addr, .tls_cert_file = cert, .tls_key_file = key, .threads = 2, .handler_threads = handler_threads, .max_connections = listener_cap(), .request_timeout_s = 10, .idle_timeout_s = 60, .max_body = 4096, .max_headers = 16384, .routes = routes, .nroutes = nroutes, .name = name };
	*out = obs_http_start(&ho, err, sizeof err);
	free(cert);
	free(key);
	if (!*out) {
		log_kv(LOG_ERROR, "cannot start a listener", "listener", name, "error", err);
		return -1;
	}
	char port[16];
	snprintf(port, sizeof port, "%d", obs_http_port(*out));
	log_kv(LOG_INFO, "listening", "listener", name, "port", port, "scheme", cert_dir ? "https" : "http");
	return 0;
}

/* Hands the heap's free pages back to the system, at most once a second.
 * glibc keeps what 64 workers freed in their arenas resident: creating 3,000
 * Sandboxes left 36.9 MiB RSS around 15 MiB of live heap. malloc_trim walks
 * every arena and releases whole free pages (what jemalloc's decay or Go's
 * scavenger do on their own). */
static void release_free_memory(void)
{
	static int64_t last_ms;
	int64_t now = ktime_mono_ms();
	if (now - last_ms < 1000)
		return;
	last_ms = now;
	malloc_trim(0);
}

/* Waits up to ms for SIGTERM/SIGINT; returns the signal or 0. Returns freed
 * memory to the system first (the main thread has nothing else to do). */
static int wait_signal(const sigset_t *sigs, long ms)
{
	release_free_memory();
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	int sig = sigtimedwait(sigs, NULL, &ts);
	return sig > 0 ? sig : 0;
}

/* Splits a comma-separated list into v (at most max entries, each a heap
 * copy the caller frees); empty entries are skipped. Returns the count. */
static size_t split_list(const char *list, char **v, size_t max)
{
	size_t n = 0;
	for (const char *p = list; p && *p && n < max;) {
		size_t len = strcspn(p, ",");
		if (len)
			v[n++] = xstrndup(p, len);
		p += len + (p[len] == ',');
	}
	return n;
}

/* In self-managed mode, writes the first webhook serving certificate and
 * starts its renewal and the caBundle upkeep; in external mode does nothing.
 * Returns 0 with *out set (NULL in external mode), or -1 (logged). */
static int start_webhook_certs(const struct options *o, struct kube_client *kc, const struct sbx_seal_keys *seal,
			       struct webhook_certs **out)
{
	*out = NULL;
	if (strcmp(o->cert_mode, "self-managed"))
		return 0;
	if (!strcmp(o->webhook_addr, "0")) {
		log_kv(LOG_WARN, "--webhook-cert-mode self-managed without --webhook-bind-address: no certificate made");
		return 0;
	}
	enum { MAX_NAMES = 32 };
	char *dns[MAX_NAMES], *ips[MAX_NAMES], err[512];
	const char *ns = kube_config_namespace(kube_client_config(kc));
	size_t ndns = o->cert_dns_names ? split_list(o->cert_dns_names, dns, MAX_NAMES) : 0;
	if (!o->cert_dns_names) {
		dns[ndns++] = xasprintf("%s.%s.svc", o->service_name, ns);
		dns[ndns++] = xasprintf("%s.%s.svc.cluster.local", o->service_name, ns);
	}
	size_t nips = split_list(o->cert_ips, ips, MAX_NAMES);
	struct webhook_certs_opts co = {
		.cert = { .dns_names = (const char *const *)dns, .ndns = ndns, .ips = (const char *const *)ips, .nips = nips, .validity_s = o->cert_validity_s, .ca_lifetime_s = o->ca_lifetime_s },
		.cert_dir = o->cert_dir,
		.config_name = o->config_name,
	};
	*out = webhook_certs_start(kc, seal, &co, err, sizeof err);
	for (size_t i = 0; i < ndns; i++)
		free(dns[i]);
	for (size_t i = 0; i < nips; i++)
		free(ips[i]);
	if (!*out) {
		log_kv(LOG_ERROR, "cannot start self-managed webhook certificates", "error", err);
		return -1;
	}
	return 0;
}

/* ---- the phases of main ---- */

enum { MAX_CLIENT_NAMES = 32 };

/* Everything main starts, so that shutdown can stop what started. */
struct app {
	struct options o;
	sigset_t sigs;
	struct sbx_config cfg;
	struct sbx_seal_keys seal;
	struct kube_client *kc;
	struct kube_client *wkc; /* the webhook's own: its reviews never queue behind reconciles */
	struct webhook_certs *certs;
	struct sbx_controller ctl;
	int ctl_ready; /* ctl was initialised */
	struct kube_authfilter mauth;
	struct obs_scrape scrape_src;
	struct obs_readiness readiness;
	struct obs_http_route mroutes[1], proutes[2];
	struct obs_http_server *msrv, *psrv;
	struct wh_server *whs;
	atomic_int webhook_pending; /* configured, its listener not bound yet: not Ready */
	struct lease_elector *elector;
	char *client_names[MAX_CLIENT_NAMES + 1];
	char wh_cert[4096], wh_key[4096];
	int sig; /* the SIGTERM/SIGINT that ends the run, 0 before */
};

/* /readyz (struct obs_readiness): the caches are current and the webhook, when
 * this replica serves it, listens. The Service sends the API server's
 * admission calls to every Ready replica and every webhook fails closed: a
 * Ready replica whose port refuses them refuses Sandbox creates. */
static int replica_ready(void *app)
{
	struct app *a = app;
	return sbx_controller_synced(&a->ctl) && !atomic_load(&a->webhook_pending);
}

/* Logging, signals (taken synchronously by main; every thread inherits the
 * mask) and cJSON's allocation policy. Returns 0 or the exit code. */
static int setup(struct app *a, int argc, char **argv)
{
	/* cJSON follows the program's one out-of-memory policy too. */
	cJSON_Hooks hooks = { .malloc_fn = xmalloc, .free_fn = free };
	cJSON_InitHooks(&hooks);
	if (parse_options(argc, argv, &a->o) < 0)
		return 2;
	int lvl = log_parse_level(a->o.log_level);
	if (lvl < 0) {
		fprintf(stderr, "--log-level must be debug, info, warn or error\n");
		return 2;
	}
	log_set_level((enum log_level)lvl);
	sigemptyset(&a->sigs);
	sigaddset(&a->sigs, SIGTERM);
	sigaddset(&a->sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &a->sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	sbx_config_init(&a->cfg);
	sbx_seal_keys_init(&a->seal);
	return 0;
}

/* The configuration, the seal keys and the Kubernetes client. Returns 0 or
 * -1 (logged). */
static int load(struct app *a)
{
	char err[1024];
	struct options *o = &a->o;
	if (o->config && sbx_config_load(&a->cfg, o->config, err, sizeof err) < 0) {
		log_kv(LOG_ERROR, "invalid config", "error", err);
		return -1;
	}
	if (o->key_lifetime_s > 0)
		a->cfg.key_lifetime_s = o->key_lifetime_s;
	if (o->owner_authz)
		a->cfg.owner_authz = strcmp(o->owner_authz, "namespace") ? SBX_OWNER_AUTHZ_ACCESS_REVIEW
									 : SBX_OWNER_AUTHZ_NAMESPACE;
	log_kv(LOG_INFO, "owner authorization", "mode",
	       a->cfg.owner_authz == SBX_OWNER_AUTHZ_NAMESPACE ? "namespace" : "accessReview");
	if (!o->nseal_key_files && a->cfg.seal_key_file)
		o->seal_key_files[o->nseal_key_files++] = a->cfg.seal_key_file;
	if (!o->nseal_key_files) {
		log_kv(LOG_ERROR, "no seal key: set --seal-key-file or seal.keyFile in the config "
				  "(a Secret shared by all replicas, readable by no tenant)");
		return -1;
	}
	for (int i = 0; i < o->nseal_key_files; i++) {
		if (sbx_seal_keys_load(&a->seal, o->seal_key_files[i], err, sizeof err) < 0) {
			log_kv(LOG_ERROR, "cannot load the seal keys", "error", err);
			return -1;
		}
	}
	char nkeys[16];
	snprintf(nkeys, sizeof nkeys, "%zu", a->seal.n);
	log_kv(LOG_INFO, "seal keys loaded", "keys", nkeys);
	struct kube_config *kcfg = kube_config_load(o->kubeconfig, o->context, err, sizeof err);
	if (!kcfg) {
		log_kv(LOG_ERROR, "cannot load Kubernetes credentials", "error", err);
		return -1;
	}
	log_kv(LOG_INFO, "starting", "version", SBX_VERSION, "server", kube_config_server(kcfg));
	metrics_register(kube_config_server(kcfg));
	struct kube_client_opts copts = { .qps = o->qps, .burst = o->burst, .observe = kube_rest_metrics_observe };
	a->kc = kube_client_new(kcfg, &copts);
	if (!a->kc) {
		log_kv(LOG_ERROR, "cannot create the Kubernetes client"); /* it freed kcfg */
		return -1;
	}
	return 0;
}

/* Self-managed webhook certificates, the controller (not started) and the
 * metrics and probe listeners: /metrics only on the metrics listener, the
 * probes only on the probe listener, so a scraper's port never answers
 * probes and the other way round. Returns 0 or -1 (logged). */
static int start_serving(struct app *a)
{
	struct options *o = &a->o;
	/* The webhook CA derives from the newest seal key; the caBundle trusts
	 * the CAs of every key in the list, so replicas mid-rotation agree. */
	if (start_webhook_certs(o, a->kc, &a->seal, &a->certs) < 0)
		return -1;
	sbx_controller_init(&a->ctl, a->kc, &a->cfg, &a->seal, o->workers);
	a->ctl_ready = 1;
	sbx_controller_set_webhook_config(&a->ctl, o->config_name);
	sbx_controller_set_warm(&a->ctl, o->warm_settle_s, o->warm_refill_qps);
	sbx_controller_set_fifo(&a->ctl, !strcmp(o->queue_order, "fifo"));
	sbx_controller_set_caps(&a->ctl, o->per_ns, o->per_owner);
	sbx_controller_set_shared_caps(&a->ctl, o->shared_ns, o->shared_owner);
	sbx_controller_set_shared_rate(&a->ctl, o->shared_rate);
	if ((a->cfg.prep_enabled || (a->cfg.net.policies && a->cfg.net.verify)) && !a->cfg.prep_image) {
		/* Workspace preparation pods and the NetworkPolicy probe's pods run
		 * this very image (sandbox/wsprep.h, sandbox/netprobe.h). */
		char image[512], why[256];
		if (sbx_controller_own_image(a->kc, image, sizeof image, why, sizeof why) == 0)
			sbx_controller_set_prep_image(&a->ctl, image);
		else
			log_kv(LOG_INFO, "workspace preparation and probe pods run the default image", "image",
			       SBX_WSPREP_DEFAULT_IMAGE, "why", why);
	}
	scrape.leader_elect = o->leader_elect;
	a->scrape_src = (struct obs_scrape){ refresh_scrape, NULL };
	/* Not Ready before start_webhook bound its listener, when there is one. */
	atomic_store(&a->webhook_pending, strcmp(o->webhook_addr, "0") != 0);
	a->readiness.ready = replica_ready; /* field by field: stopping is atomic */
	a->readiness.arg = a;
	a->mauth = (struct kube_authfilter){ .kc = a->kc, .next = obs_serve_metrics, .next_ctx = &a->scrape_src, .cache = o->metrics_secure ? kube_authcache_new() : NULL };
	a->mroutes[0] = o->metrics_secure ? (struct obs_http_route){ "/metrics", kube_authfilter_serve, &a->mauth }
					  : (struct obs_http_route){ "/metrics", obs_serve_metrics, &a->scrape_src };
	a->proutes[0] = (struct obs_http_route){ "/healthz", obs_serve_healthz, NULL };
	a->proutes[1] = (struct obs_http_route){ "/readyz", obs_serve_readyz, &a->readiness };
	/* A guarded /metrics waits on a TokenReview and a SubjectAccessReview
	 * (up to 5 s each) for a token not in its cache, and anyone who reaches
	 * the port can send a new random one each time: on the loops, two such
	 * requests would hold both, and with them every other connection (no
	 * answer, no deadline cut). On handler threads the loops go on serving
	 * while they wait (the queue of requests waiting for a thread is
	 * bounded). The probes and an unguarded /metrics never wait: they run
	 * on the loops. */
	if (start_listener(&a->msrv, "metrics", o->metrics_addr, a->mroutes, 1,
			   o->metrics_secure ? METRICS_AUTH_THREADS : 0, o->metrics_cert_path,
			   o->metrics_cert_name, o->metrics_cert_key) < 0 ||
	    start_listener(&a->psrv, "probe", o->probe_addr, a->proutes, 2, 0, NULL, NULL, NULL) < 0)
		return -1;
	return 0;
}

/* The caches, on every replica (the webhook reads them and a standby is
 * Ready, controller-runtime's behaviour; only workers wait for the lease),
 * and their first sync: up to 120 s, never past a SIGTERM. Returns 0 (also
 * when a signal came: a->sig) or -1 (logged). */
static int start_caches(struct app *a)
{
	char err[1024];
	if (sbx_controller_start_caches(&a->ctl, 0, err, sizeof err) < 0) {
		log_kv(LOG_ERROR, "cannot start the controller", "error", err);
		return -1;
	}
	for (int waited = 0; !a->sig && !sbx_controller_synced(&a->ctl); waited += 200) {
		if (waited >= 120000) {
			log_kv(LOG_ERROR, "cannot start the controller", "error",
			       "caches did not sync within 120 s (are the Sandbox, SandboxClaim, SandboxWarmPool and "
			       "SandboxQuota CRDs installed?)");
			return -1;
		}
		a->sig = wait_signal(&a->sigs, 200);
	}
	return 0;
}

/* The admission webhook, served by every replica from the caches it just
 * synced (--webhook-bind-address 0: none). Returns 0 or -1 (logged). */
static int start_webhook(struct app *a)
{
	char err[1024];
	struct options *o = &a->o;
	split_list(o->webhook_client_names, a->client_names, MAX_CLIENT_NAMES);
	if (!strcmp(o->webhook_addr, "0"))
		return 0;
	snprintf(a->wh_cert, sizeof a->wh_cert, "%s/tls.crt", o->cert_dir);
	snprintf(a->wh_key, sizeof a->wh_key, "%s/tls.key", o->cert_dir);
	/* A client of its own: its connections and any client-side limit are
	 * not the reconciles', so a review never waits behind a reconcile's
	 * request in this process, nor a reconcile behind a review. In the API
	 * server, the install's FlowSchemas keep the two apart too
	 * (manifests/webhook/flowcontrol.yaml). */
	struct kube_config *wcfg = kube_config_load(o->kubeconfig, o->context, err, sizeof err);
	struct kube_client_opts wopts = { .observe = kube_rest_metrics_observe, .user_agent = "sandbox-controller-webhook/" SBX_VERSION };
	if (!wcfg || !(a->wkc = kube_client_new(wcfg, &wopts))) {
		log_kv(LOG_ERROR, "cannot create the webhook's Kubernetes client", "error", wcfg ? "" : err);
		return -1;
	}
	struct wh_server_opts wo = {
		.addr = o->webhook_addr,
		.cert_file = a->wh_cert,
		.key_file = a->wh_key,
		.cfg = &a->cfg,
		.keys = (const unsigned char *const *)a->seal.key,
		.keylens = a->seal.len,
		.nkeys = a->seal.n,
		.kc = a->wkc,
		.sandboxes = a->ctl.sandboxes,
		.pods = a->ctl.pods,
		.quotas = a->ctl.quotas,
		.slots = a->ctl.slots,
		.pool_pods = a->ctl.pool_pods,
		.profiles = a->ctl.profiles,
		.claims = a->ctl.claims,
		.client_ca_file = o->webhook_client_ca,
		.client_names = a->client_names[0] ? (const char *const *)a->client_names : NULL,
	};
	if (!(a->whs = wh_server_start(&wo, err, sizeof err))) {
		log_kv(LOG_ERROR, "webhook server", "error", err);
		return -1;
	}
	atomic_store(&a->webhook_pending, 0);
	log_kv(LOG_INFO, "serving the admission webhook", "address", o->webhook_addr, "certDir", o->cert_dir,
	       "clients",
	       o->webhook_client_ca ? "the API server (client certificate required)"
				    : "any (no --webhook-client-ca-file)");
	return 0;
}

/* With --leader-elect, waits until this replica holds the Lease (or a
 * signal comes: a->sig). Returns 0 or -1 (logged). */
static int await_leadership(struct app *a)
{
	struct options *o = &a->o;
	if (!o->leader_elect)
		return 0;
	char host[128] = "unknown", ident[200];
	unsigned char rnd[6];
	gethostname(host, sizeof host - 1);
	if (RAND_bytes(rnd, sizeof rnd) != 1)
		memset(rnd, 0, sizeof rnd);
	snprintf(ident, sizeof ident, "%s_%02x%02x%02x%02x%02x%02x", host, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
		 rnd[5]);
	struct lease_opts lo = {
		.ns = o->le_namespace ? o->le_namespace : kube_config_namespace(kube_client_config(a->kc)),
		.name = o->le_id,
		.identity = ident,
	};
	log_kv(LOG_INFO, "waiting for leadership", "lease", lo.name, "namespace", lo.ns, "identity", ident);
	a->elector = lease_elector_start(a->kc, &lo);
	scrape_set(NULL, a->elector);
	if (!a->elector) {
		log_kv(LOG_ERROR, "cannot start leader election");
		return -1;
	}
	while (!lease_is_leader(a->elector) && !(a->sig = wait_signal(&a->sigs, 200)))
		;
	return 0;
}

/* The workers, then the run until SIGTERM/SIGINT or a lost Lease. Returns
 * the exit code. */
static int run(struct app *a)
{
	char err[1024];
	if (sbx_controller_start_workers(&a->ctl, err, sizeof err) < 0) {
		log_kv(LOG_ERROR, "cannot start the controller", "error", err);
		return 1;
	}
	log_kv(LOG_INFO, "controller running");
	scrape_set(&a->ctl, a->elector);
	while (!(a->sig = wait_signal(&a->sigs, 500))) {
		if (a->elector && lease_lost(a->elector))
			return 1; /* as controller-runtime: exit, the Deployment restarts us */
	}
	return 0;
}

/* After SIGTERM/SIGINT with the webhook serving: /readyz fails at once, and
 * the webhook (and every other listener, and the controller its handlers
 * read) keeps serving for --webhook-drain. The API server goes on calling a
 * terminating replica until the endpoints and kube-proxy catch up, and every
 * webhook fails closed: a port closed at once would refuse Sandbox creates
 * and execs on every rolling upgrade. Each answer of the drain closes its
 * connection: the API server's kept-alive connections (which conntrack keeps
 * on this pod) would otherwise carry calls until the listener closes under
 * them. A second signal ends the drain. Without
 * a signal (an error, a lost Lease) or without the webhook there is nothing
 * to drain: /readyz fails and the shutdown goes on. */
static void drain(struct app *a)
{
	if (a->sig)
		log_kv(LOG_INFO, "shutting down", "signal", a->sig == SIGTERM ? "SIGTERM" : "SIGINT");
	obs_readiness_stop(&a->readiness);
	if (!a->sig || !a->whs || a->o.drain_s <= 0)
		return;
	char secs[24];
	snprintf(secs, sizeof secs, "%ld", a->o.drain_s);
	log_kv(LOG_INFO, "not ready; draining the webhook", "seconds", secs);
	wh_server_drain(a->whs);
	int64_t end = ktime_mono_ms() + a->o.drain_s * 1000;
	for (int64_t left; (left = end - ktime_mono_ms()) > 0;) {
		int sig = wait_signal(&a->sigs, (long)left);
		if (sig) {
			log_kv(LOG_INFO, "drain cut short", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
			break;
		}
	}
}

/* Stops whatever started, in order: the listeners first (their handlers
 * read the controller, so no handler may run once it is being released),
 * the lease after the workers stopped (then it is given up). */
static void shutdown_all(struct app *a)
{
	wh_server_free(a->whs);
	kube_client_free(a->wkc);
	for (size_t i = 0; a->client_names[i]; i++)
		free(a->client_names[i]);
	obs_http_free(a->msrv);
	obs_http_free(a->psrv);
	scrape_set(NULL, NULL);
	if (a->ctl_ready)
		sbx_controller_release(&a->ctl);
	lease_elector_free(a->elector);
	webhook_certs_free(a->certs);
	kube_authcache_free(a->mauth.cache);
	kube_client_free(a->kc);
	sbx_config_release(&a->cfg);
	sbx_seal_keys_release(&a->seal);
	log_kv(LOG_INFO, "stopped");
}

int main(int argc, char **argv)
{
	/* The workspace preparation pod's program (sandbox/wsprep.h): it
	 * exits here, whatever its result, and never runs the controller. */
	if (argc > 1 && !strcmp(argv[1], "workspace-init"))
		return sbx_wsinit_main(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "net-probe"))
		return sbx_netprobe_main(argc - 1, argv + 1);
	static struct app a; /* large (certificate paths); zeroed */
	int rc = setup(&a, argc, argv);
	if (rc)
		return rc;
	if (load(&a) < 0) {
		sbx_config_release(&a.cfg);
		sbx_seal_keys_release(&a.seal);
		kube_client_free(a.kc);
		return 1;
	}
	if (start_serving(&a) < 0) {
		shutdown_all(&a);
		return 1;
	}
	rc = start_caches(&a) < 0 || (!a.sig && start_webhook(&a) < 0) ? 1 : 0;
	if (rc == 0 && !a.sig)
		rc = await_leadership(&a) < 0 ? 1 : 0;
	if (rc == 0 && !a.sig)
		rc = run(&a);
	drain(&a);
	shutdown_all(&a);
	return rc;
}
