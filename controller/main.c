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
#include "obs/httpserver.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "obs/probes.h"
#include "sandbox/config.h"
#include "reconcile/controller.h"
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
	const char *cert_mode; /* "external" or "self-managed" */
	const char *metrics_cert_path, *metrics_cert_name, *metrics_cert_key; /* HTTPS /metrics */
	int metrics_secure; /* TokenReview + SubjectAccessReview in front of /metrics */
	const char *cert_dir;
	long cert_validity_s, ca_lifetime_s;
	const char *cert_dns_names, *cert_ips, *service_name, *config_name;
	const char *webhook_addr;
	const char *webhook_client_ca, *webhook_client_names;
	const char *owner_authz;
	long warm_settle_s;
	double warm_refill_qps;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandbox-controller [flags]\n"
		"  --kubeconfig PATH                  kubeconfig (default $KUBECONFIG, in-cluster, ~/.kube/config)\n"
		"  --context NAME                     kubeconfig context (default: current-context)\n"
		"  --config PATH                      controller YAML config (workspace root, mounts, key lifetime)\n"
		"  --seal-key-file PATH               pod seal keys, shared by all replicas: one key per line\n"
		"                                     (>= %d bytes), newest first; repeat the flag for more\n"
		"                                     files (newest first); the newest key seals new pods\n"
		"  --key-lifetime SECONDS             idempotency key lifetime (overrides the config; default 86400)\n"
		"  --workers N                        concurrent reconciles (default 64)\n"
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
		"  --webhook-config-name NAME         the webhook configurations: self-managed mode keeps their caBundle\n"
		"                                     current, and an owner is mounted only for a Sandbox whose creation\n"
		"                                     the MutatingWebhookConfiguration of this name covered (default\n"
		"                                     sandbox-controller; empty = none: no owner is mounted)\n"
		"  --warm-pool-settle DUR             a warm pool's template serves Sandboxes only after this long,\n"
		"                                     longer than any replica's cache lags (default 90s; docs/api.md)\n"
		"  --warm-pool-refill-qps Q           warm pods created per second, all pools together (default 10)\n"
		"  --version                          print the version and exit\n",
		SBX_SEAL_FILE_KEY_MIN);
}

static int parse_options(int argc, char **argv, struct options *o)
{
	enum { O_KUBECONFIG = 256, O_CONTEXT, O_CONFIG, O_METRICS, O_PROBE, O_SEAL, O_LOG, O_LIFETIME, O_WORKERS,
	       O_QPS, O_BURST, O_HELP, O_LE, O_LE_NS, O_LE_ID, O_CERT_MODE, O_CERT_DIR, O_CERT_VALIDITY,
	       O_CA_LIFETIME, O_CERT_DNS, O_CERT_IPS, O_SVC_NAME, O_CONFIG_NAME, O_MCERT_PATH, O_MCERT_NAME,
	       O_MCERT_KEY, O_WH_ADDR, O_OWNER_AUTHZ, O_VERSION, O_MSECURE, O_WH_CLIENT_CA, O_WH_CLIENT_NAMES, O_WARM_SETTLE,
	       O_WARM_QPS };
	static const struct option longopts[] = {
		{ "kubeconfig", required_argument, NULL, O_KUBECONFIG },
		{ "context", required_argument, NULL, O_CONTEXT },
		{ "config", required_argument, NULL, O_CONFIG },
		{ "metrics-bind-address", required_argument, NULL, O_METRICS },
		{ "health-probe-bind-address", required_argument, NULL, O_PROBE },
		{ "seal-key-file", required_argument, NULL, O_SEAL },
		{ "log-level", required_argument, NULL, O_LOG },
		{ "key-lifetime", required_argument, NULL, O_LIFETIME },
		{ "workers", required_argument, NULL, O_WORKERS },
		{ "kube-api-qps", required_argument, NULL, O_QPS },
		{ "kube-api-burst", required_argument, NULL, O_BURST },
		{ "help", no_argument, NULL, O_HELP },
		{ "version", no_argument, NULL, O_VERSION },
		{ "metrics-secure", no_argument, NULL, O_MSECURE },
		{ "leader-elect", no_argument, NULL, O_LE },
		{ "leader-election-namespace", required_argument, NULL, O_LE_NS },
		{ "leader-election-id", required_argument, NULL, O_LE_ID },
		{ "webhook-cert-mode", required_argument, NULL, O_CERT_MODE },
		{ "metrics-cert-path", required_argument, NULL, O_MCERT_PATH },
		{ "metrics-cert-name", required_argument, NULL, O_MCERT_NAME },
		{ "metrics-cert-key", required_argument, NULL, O_MCERT_KEY },
		{ "webhook-cert-dir", required_argument, NULL, O_CERT_DIR },
		{ "webhook-cert-validity", required_argument, NULL, O_CERT_VALIDITY },
		{ "webhook-ca-lifetime", required_argument, NULL, O_CA_LIFETIME },
		{ "webhook-cert-dns-names", required_argument, NULL, O_CERT_DNS },
		{ "webhook-cert-ips", required_argument, NULL, O_CERT_IPS },
		{ "webhook-service-name", required_argument, NULL, O_SVC_NAME },
		{ "webhook-config-name", required_argument, NULL, O_CONFIG_NAME },
		{ "webhook-bind-address", required_argument, NULL, O_WH_ADDR },
		{ "webhook-client-ca-file", required_argument, NULL, O_WH_CLIENT_CA },
		{ "webhook-client-names", required_argument, NULL, O_WH_CLIENT_NAMES },
		{ "owner-authorization", required_argument, NULL, O_OWNER_AUTHZ },
		{ "warm-pool-settle", required_argument, NULL, O_WARM_SETTLE },
		{ "warm-pool-refill-qps", required_argument, NULL, O_WARM_QPS },
		{ NULL, 0, NULL, 0 },
	};
	*o = (struct options){ .metrics_addr = ":8080", .probe_addr = ":8081", .log_level = "info", .workers = 64,
			       .key_lifetime_s = -1, .qps = 0, .burst = 100, .warm_settle_s = 90, .warm_refill_qps = 10,
			       .le_id = "sandbox-controller-leader", .cert_mode = "external", .metrics_cert_name = "tls.crt", .metrics_cert_key = "tls.key",
			       .cert_dir = "/tmp/k8s-webhook-server/serving-certs", .cert_validity_s = 86400,
			       .service_name = "sandbox-controller-webhook", .config_name = "sandbox-controller",
			       .webhook_addr = "0" };
	int ch;
	char *end;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case O_KUBECONFIG: o->kubeconfig = optarg; break;
		case O_CONTEXT: o->context = optarg; break;
		case O_CONFIG: o->config = optarg; break;
		case O_METRICS: o->metrics_addr = optarg; break;
		case O_PROBE: o->probe_addr = optarg; break;
		case O_SEAL:
			if (o->nseal_key_files >= SBX_SEAL_MAX_KEYS) {
				fprintf(stderr, "--seal-key-file given more than %d times\n", SBX_SEAL_MAX_KEYS);
				return -1;
			}
			o->seal_key_files[o->nseal_key_files++] = optarg;
			break;
		case O_LOG: o->log_level = optarg; break;
		case O_LIFETIME:
			o->key_lifetime_s = strtol(optarg, &end, 10);
			if (*end || o->key_lifetime_s <= 0) {
				fprintf(stderr, "--key-lifetime must be a positive number of seconds\n");
				return -1;
			}
			break;
		case O_WORKERS:
			o->workers = (int)strtol(optarg, &end, 10);
			if (*end || o->workers < 1 || o->workers > 256) {
				fprintf(stderr, "--workers must be between 1 and 256\n");
				return -1;
			}
			break;
		case O_QPS:
			o->qps = strtod(optarg, &end);
			if (*end) {
				fprintf(stderr, "--kube-api-qps must be a number (0 or less: no client-side limit)\n");
				return -1;
			}
			break;
		case O_BURST:
			o->burst = (int)strtol(optarg, &end, 10);
			if (*end || o->burst < 1) {
				fprintf(stderr, "--kube-api-burst must be positive\n");
				return -1;
			}
			break;
		case O_LE: o->leader_elect = 1; break;
		case O_LE_NS: o->le_namespace = optarg; break;
		case O_LE_ID: o->le_id = optarg; break;
		case O_CERT_MODE:
			/* cert-manager: an alias of external (its files, its CA injection) */
			if (strcmp(optarg, "external") && strcmp(optarg, "cert-manager") &&
			    strcmp(optarg, "self-managed")) {
				fprintf(stderr, "--webhook-cert-mode must be external (alias cert-manager) or self-managed\n");
				return -1;
			}
			o->cert_mode = optarg;
			break;
		case O_CERT_DIR: o->cert_dir = optarg; break;
		case O_MCERT_PATH: o->metrics_cert_path = optarg; break;
		case O_MCERT_NAME: o->metrics_cert_name = optarg; break;
		case O_MCERT_KEY: o->metrics_cert_key = optarg; break;
		case O_CERT_VALIDITY:
		case O_CA_LIFETIME:
			if (sbx_parse_duration(optarg, ch == O_CERT_VALIDITY ? &o->cert_validity_s : &o->ca_lifetime_s) < 0) {
				fprintf(stderr, "--%s must be a duration such as 24h, 90m or 60s\n",
					ch == O_CERT_VALIDITY ? "webhook-cert-validity" : "webhook-ca-lifetime");
				return -1;
			}
			break;
		case O_WARM_SETTLE:
			if (sbx_parse_duration(optarg, &o->warm_settle_s) < 0) {
				fprintf(stderr, "--warm-pool-settle must be a duration such as 90s or 2m\n");
				return -1;
			}
			break;
		case O_WARM_QPS: {
			char *qend;
			o->warm_refill_qps = strtod(optarg, &qend);
			if (*optarg == '\0' || *qend != '\0' || !(o->warm_refill_qps > 0) || o->warm_refill_qps > 10000) {
				fprintf(stderr, "--warm-pool-refill-qps must be a number above 0 (at most 10000)\n");
				return -1;
			}
			break;
		}
		case O_CERT_DNS: o->cert_dns_names = optarg; break;
		case O_CERT_IPS: o->cert_ips = optarg; break;
		case O_SVC_NAME: o->service_name = optarg; break;
		case O_CONFIG_NAME: o->config_name = optarg; break;
		case O_WH_ADDR: o->webhook_addr = optarg; break;
		case O_WH_CLIENT_CA: o->webhook_client_ca = optarg; break;
		case O_WH_CLIENT_NAMES: o->webhook_client_names = optarg; break;
		case O_OWNER_AUTHZ:
			if (strcmp(optarg, "accessReview") && strcmp(optarg, "namespace")) {
				fprintf(stderr, "--owner-authorization must be accessReview or namespace\n");
				return -1;
			}
			o->owner_authz = optarg;
			break;
		case O_HELP: usage(stdout); exit(0);
		case O_VERSION: printf("sandbox-controller %s\n", SBX_VERSION); exit(0);
		case O_MSECURE: o->metrics_secure = 1; break;
		default: usage(stderr); return -1;
		}
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

/* /readyz: the caches are current (struct obs_readiness). */
static int caches_synced(void *ctl)
{
	return sbx_controller_synced(ctl);
}

/* Connections each listener may hold: a share of the descriptor limit, so
 * that slow clients can never take the descriptors the API connections need. */
static int listener_cap(void)
{
	struct rlimit rl;
	long n = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (long)rl.rlim_cur : 65536;
	long cap = (n - 128) / 4; /* 128 for the process itself; room for four listeners */
	return cap < 8 ? 8 : cap > 256 ? 256 : (int)cap;
}

/* Starts one listener; addr "0" disables it (*out stays NULL). */
static int start_listener(struct obs_http_server **out, const char *name, const char *addr,
			  const struct obs_http_route *routes, size_t nroutes, const char *cert_dir,
			  const char *cert_name, const char *key_name)
{
	if (!strcmp(addr, "0"))
		return 0;
	char err[512];
	char *cert = cert_dir ? xasprintf("%s/%s", cert_dir, cert_name) : NULL;
	char *key = cert_dir ? xasprintf("%s/%s", cert_dir, key_name) : NULL;
	struct obs_http_opts ho = { .addr = addr, .tls_cert_file = cert, .tls_key_file = key, .threads = 2,
				    .max_connections = listener_cap(), .request_timeout_s = 10, .idle_timeout_s = 60,
				    .max_body = 4096, .max_headers = 16384, .routes = routes, .nroutes = nroutes,
				    .name = name };
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
		.cert = { .dns_names = (const char *const *)dns, .ndns = ndns, .ips = (const char *const *)ips,
			  .nips = nips, .validity_s = o->cert_validity_s, .ca_lifetime_s = o->ca_lifetime_s },
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

int main(int argc, char **argv)
{
	/* cJSON follows the program's one out-of-memory policy too. */
	cJSON_Hooks hooks = { .malloc_fn = xmalloc, .free_fn = free };
	cJSON_InitHooks(&hooks);
	struct options o;
	if (parse_options(argc, argv, &o) < 0)
		return 2;
	int lvl = log_parse_level(o.log_level);
	if (lvl < 0) {
		fprintf(stderr, "--log-level must be debug, info, warn or error\n");
		return 2;
	}
	log_set_level((enum log_level)lvl);

	/* Signals are taken synchronously by main; every thread inherits the mask. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	char err[1024];
	struct sbx_config cfg;
	sbx_config_init(&cfg);
	if (o.config && sbx_config_load(&cfg, o.config, err, sizeof err) < 0) {
		log_kv(LOG_ERROR, "invalid config", "error", err);
		return 1;
	}
	if (o.key_lifetime_s > 0)
		cfg.key_lifetime_s = o.key_lifetime_s;
	if (o.owner_authz)
		cfg.owner_authz = strcmp(o.owner_authz, "namespace") ? SBX_OWNER_AUTHZ_ACCESS_REVIEW
								     : SBX_OWNER_AUTHZ_NAMESPACE;
	log_kv(LOG_INFO, "owner authorization", "mode",
	       cfg.owner_authz == SBX_OWNER_AUTHZ_NAMESPACE ? "namespace" : "accessReview");
	if (!o.nseal_key_files && cfg.seal_key_file)
		o.seal_key_files[o.nseal_key_files++] = cfg.seal_key_file;
	if (!o.nseal_key_files) {
		log_kv(LOG_ERROR, "no seal key: set --seal-key-file or seal.keyFile in the config "
				  "(a Secret shared by all replicas, readable by no tenant)");
		return 1;
	}
	struct sbx_seal_keys seal;
	sbx_seal_keys_init(&seal);
	for (int i = 0; i < o.nseal_key_files; i++) {
		if (sbx_seal_keys_load(&seal, o.seal_key_files[i], err, sizeof err) < 0) {
			log_kv(LOG_ERROR, "cannot load the seal keys", "error", err);
			sbx_seal_keys_release(&seal);
			return 1;
		}
	}
	char nkeys[16];
	snprintf(nkeys, sizeof nkeys, "%zu", seal.n);
	log_kv(LOG_INFO, "seal keys loaded", "keys", nkeys);
	struct kube_config *kcfg = kube_config_load(o.kubeconfig, o.context, err, sizeof err);
	if (!kcfg) {
		log_kv(LOG_ERROR, "cannot load Kubernetes credentials", "error", err);
		return 1;
	}
	log_kv(LOG_INFO, "starting", "version", SBX_VERSION, "server", kube_config_server(kcfg));
	metrics_register(kube_config_server(kcfg));
	struct kube_client_opts copts = { .qps = o.qps, .burst = o.burst, .observe = kube_rest_metrics_observe };
	struct kube_client *kc = kube_client_new(kcfg, &copts);
	if (!kc) {
		log_kv(LOG_ERROR, "cannot create the Kubernetes client"); /* it freed kcfg */
		return 1;
	}

	struct webhook_certs *certs = NULL;
	/* The webhook CA derives from the newest seal key; the caBundle trusts
	 * the CAs of every key in the list, so replicas mid-rotation agree. */
	if (start_webhook_certs(&o, kc, &seal, &certs) < 0)
		return 1;

	struct sbx_controller ctl;
	sbx_controller_init(&ctl, kc, &cfg, &seal, o.workers);
	sbx_controller_set_webhook_config(&ctl, o.config_name);
	sbx_controller_set_warm(&ctl, o.warm_settle_s, o.warm_refill_qps);
	scrape.leader_elect = o.leader_elect;
	/* /metrics only on the metrics listener, the probes only on the probe
	 * listener: a scraper's port never answers probes and the other way round. */
	struct obs_scrape scrape_src = { refresh_scrape, NULL };
	struct obs_readiness readiness = { caches_synced, &ctl };
	struct kube_authfilter mauth = { .kc = kc, .next = obs_serve_metrics, .next_ctx = &scrape_src,
					 .cache = o.metrics_secure ? kube_authcache_new() : NULL };
	const struct obs_http_route mroutes[] = { o.metrics_secure ? (struct obs_http_route){ "/metrics", kube_authfilter_serve, &mauth }
								   : (struct obs_http_route){ "/metrics", obs_serve_metrics, &scrape_src } };
	const struct obs_http_route proutes[] = { { "/healthz", obs_serve_healthz, NULL }, { "/readyz", obs_serve_readyz, &readiness } };
	struct obs_http_server *msrv = NULL, *psrv = NULL;
	if (start_listener(&msrv, "metrics", o.metrics_addr, mroutes, 1, o.metrics_cert_path, o.metrics_cert_name,
			   o.metrics_cert_key) < 0 ||
	    start_listener(&psrv, "probe", o.probe_addr, proutes, 2, NULL, NULL, NULL) < 0) {
		obs_http_free(msrv);
		sbx_controller_release(&ctl);
		webhook_certs_free(certs);
		kube_authcache_free(mauth.cache);
		kube_client_free(kc);
		return 1;
	}
	int rc = 0, sig = 0;
	struct lease_elector *elector = NULL;
	/* Caches run on every replica: the webhook reads them and a standby is
	 * Ready (controller-runtime's behaviour); only workers wait for the lease. */
	if (sbx_controller_start_caches(&ctl, 0, err, sizeof err) < 0) {
		log_kv(LOG_ERROR, "cannot start the controller", "error", err);
		rc = 1;
	}
	/* Wait for the first sync (up to 120 s), but never past a SIGTERM. */
	for (int waited = 0; rc == 0 && !sig && !sbx_controller_synced(&ctl); waited += 200) {
		if (waited >= 120000) {
			log_kv(LOG_ERROR, "cannot start the controller", "error",
			       "caches did not sync within 120 s (is the Sandbox CRD installed?)");
			rc = 1;
		} else {
			sig = wait_signal(&sigs, 200);
		}
	}
	/* Every replica serves the webhook, from the caches it just synced. */
	struct wh_server *whs = NULL;
	char wh_cert[4096], wh_key[4096];
	enum { MAX_CLIENT_NAMES = 32 };
	char *client_names[MAX_CLIENT_NAMES + 1] = { NULL };
	split_list(o.webhook_client_names, client_names, MAX_CLIENT_NAMES);
	if (rc == 0 && !sig && strcmp(o.webhook_addr, "0")) {
		snprintf(wh_cert, sizeof wh_cert, "%s/tls.crt", o.cert_dir);
		snprintf(wh_key, sizeof wh_key, "%s/tls.key", o.cert_dir);
		struct wh_server_opts wo = {
			.addr = o.webhook_addr,
			.cert_file = wh_cert,
			.key_file = wh_key,
			.cfg = &cfg,
			.keys = (const unsigned char *const *)seal.key,
			.keylens = seal.len,
			.nkeys = seal.n,
			.kc = kc,
			.sandboxes = ctl.sandboxes,
			.pods = ctl.pods,
			.client_ca_file = o.webhook_client_ca,
			.client_names = client_names[0] ? (const char *const *)client_names : NULL,
		};
		if (!(whs = wh_server_start(&wo, err, sizeof err))) {
			log_kv(LOG_ERROR, "webhook server", "error", err);
			rc = 1;
		} else {
			log_kv(LOG_INFO, "serving the admission webhook", "address", o.webhook_addr, "certDir",
			       o.cert_dir, "clients",
			       o.webhook_client_ca ? "the API server (client certificate required)"
						   : "any (no --webhook-client-ca-file)");
		}
	}
	if (rc == 0 && !sig && o.leader_elect) {
		char host[128] = "unknown", ident[200];
		unsigned char rnd[6];
		gethostname(host, sizeof host - 1);
		if (RAND_bytes(rnd, sizeof rnd) != 1)
			memset(rnd, 0, sizeof rnd);
		snprintf(ident, sizeof ident, "%s_%02x%02x%02x%02x%02x%02x", host, rnd[0], rnd[1], rnd[2], rnd[3],
			 rnd[4], rnd[5]);
		struct lease_opts lo = {
			.ns = o.le_namespace ? o.le_namespace : kube_config_namespace(kube_client_config(kc)),
			.name = o.le_id,
			.identity = ident,
		};
		log_kv(LOG_INFO, "waiting for leadership", "lease", lo.name, "namespace", lo.ns, "identity", ident);
		elector = lease_elector_start(kc, &lo);
		pthread_mutex_lock(&scrape.mu);
		scrape.elector = elector;
		pthread_mutex_unlock(&scrape.mu);
		if (!elector) {
			log_kv(LOG_ERROR, "cannot start leader election");
			rc = 1;
		}
		while (elector && !lease_is_leader(elector) && !(sig = wait_signal(&sigs, 200)))
			;
	}
	if (rc == 0 && !sig) {
		if (sbx_controller_start_workers(&ctl, err, sizeof err) < 0) {
			log_kv(LOG_ERROR, "cannot start the controller", "error", err);
			rc = 1;
		} else {
			log_kv(LOG_INFO, "controller running");
			pthread_mutex_lock(&scrape.mu);
			scrape.ctl = &ctl;
			pthread_mutex_unlock(&scrape.mu);
			while (!(sig = wait_signal(&sigs, 500))) {
				if (elector && lease_lost(elector)) {
					rc = 1; /* as controller-runtime: exit, the Deployment restarts us */
					break;
				}
			}
		}
	}
	if (sig)
		log_kv(LOG_INFO, "shutting down", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	/* The listeners go first: their handlers read the controller, so no
	 * handler may run once it is being released. */
	wh_server_free(whs);
	for (size_t i = 0; client_names[i]; i++)
		free(client_names[i]);
	obs_http_free(msrv);
	obs_http_free(psrv);
	pthread_mutex_lock(&scrape.mu);
	scrape.ctl = NULL;
	scrape.elector = NULL;
	pthread_mutex_unlock(&scrape.mu);
	sbx_controller_release(&ctl);
	lease_elector_free(elector); /* after the workers stopped: then give the lease up */
	webhook_certs_free(certs);
	kube_authcache_free(mauth.cache);
	kube_client_free(kc);
	sbx_config_release(&cfg);
	sbx_seal_keys_release(&seal);
	log_kv(LOG_INFO, "stopped");
	return rc;
}
