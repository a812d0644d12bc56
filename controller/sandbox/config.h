/* The controller's YAML configuration: where owners' workspaces live and how
 * they are mounted, how long an idempotency key claims its pod, and where the
 * seal key is. Schema (every field optional):
 *
 *   workspace:
 *     mode: pvc | hostPath              # default pvc
 *     pvcName: sandbox-workspaces       # the PVC in the Sandbox's namespace
 *     hostPathRoot: /srv/workspaces     # absolute; required for hostPath
 *     mounts:                           # default: the contract's four rows
 *       - {subdir: workspace, mountPath: /workspace}
 *     prepare:                          # the owner's folders before its first pod
 *       enabled: true                   # false: the storage hands them to the uid/gid itself
 *       image: REGISTRY/sandbox-controller:0.2.0   # default: the controller's own image
 *   idempotency:
 *     keyLifetime: 24h                  # "24h", "90m", "3600s", "1h30m" or seconds
 *   seal:
 *     keyFile: /etc/sandbox-controller/seal.key   # one key per line, newest first
 *   pod:                                # the hardened pod (contract section 4)
 *     runAsUser: 1000                   # 1..2147483647 (never root)
 *     runAsGroup: 1000
 *     fsGroup: 1000
 *     runtimeClasses:
 *       allowed: [gvisor, kata]         # classes a Sandbox may name; default none
 *       default: gvisor                 # given to Sandboxes that name none; must be allowed
 *     nodeSelector: {k: v}              # <= SBX_CONFIG_MAX_ITEMS entries each
 *     tolerations: [{key, operator, value, effect, tolerationSeconds}]
 *     priorityClassName: sandboxes
 *     imagePullSecrets: [regcred]
 *     labels: {k: v}                    # never under sandbox.dev/, never the fixed labels
 *     annotations: {k: v}               # never under sandbox.dev/
 *   adoption:
 *     allowedMutations:                 # what the cluster's admission chain may change
 *       imageDigestPinning: true        # image may become <image or repository>@sha256:<64 hex>
 *       injectedContainers:             # sidecars admission may add
 *         - {name: istio-proxy, image: "docker.io/istio/proxyv2:*", init: false,
 *            volumes: [istio-envoy]}     # image: exact, or a prefix ending in "*"
 *       labels: [security.istio.io/tlsMode]   # label keys admission may add
 *       resourceDefaults: [ephemeral-storage] # resources a LimitRange may fill into the
 *                                       # sandbox container's limits and requests where
 *                                       # the Sandbox (or the default) sets none
 *   ownerAuthorization: accessReview     # or namespace (contract section 2a)
 *   quota:                              # the default per-owner quota of every namespace
 *     maxActive: 20                     # (a SandboxQuota there replaces it; sandbox/quota.h)
 *     maxWarm: 10
 *     mode: Queue                       # or Reject
 *   network:                            # the network floor (sandbox/netfloor.h)
 *     policies: true                    # keep a floor NetworkPolicy per namespace
 *     dns: [10.96.0.10/32]              # where the resolver lives (port 53); default
 *                                       # the kube-dns pods of kube-system
 *     ingressFrom: [10.0.5.0/24]        # who may connect to sandbox pods; default none
 *     clusterCIDRs: [10.244.0.0/16]     # the pod and Service ranges (never in a profile)
 *     verify: true                      # probe whether the cluster enforces NetworkPolicy
 *                                       # (default; off with false or policies: false)
 *     verifyNamespace: sandbox-system   # where the probe's pods run (default: the controller's)
 *     verifyInterval: 10m               # how often (a duration as keyLifetime)
 *     requireEnforced: false            # true: no sandbox pod until enforcement is verified
 *   admission:                          # the webhook (webhook/sandbox_admission.h)
 *     askEveryNameFirst: false          # true: ask whether the creator may use every owner
 *                                       # (or profile) first, and take a yes for all; safe
 *                                       # only where no authorizer refuses by name
 *
 * Unknown keys are errors, so a typo never silently leaves a default. The
 * map- and list-valued pod settings are kept as validated cJSON trees owned
 * by the config (read-only after loading). */
#ifndef SBX_SANDBOX_CONFIG_H
#define SBX_SANDBOX_CONFIG_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Largest config file read. */
#define SBX_CONFIG_MAX (1024 * 1024)
/* Most mounts accepted. */
#define SBX_CONFIG_MAX_MOUNTS 32
/* Most entries in any pod settings map or list (node selector, tolerations,
 * pull secrets, labels, annotations, runtime classes, injected containers,
 * resource defaults). */
#define SBX_CONFIG_MAX_ITEMS 32
/* Longest label/annotation value, toleration value or image pattern. */
#define SBX_CONFIG_MAX_VALUE 4096
/* The default uid/gid/fsGroup of sandbox pods. */
#define SBX_DEFAULT_UID 1000
/* Longest key lifetime accepted (10 years), in seconds. */
#define SBX_KEY_LIFETIME_MAX (10L * 366 * 86400)

enum sbx_ws_mode { SBX_WS_PVC,
		   SBX_WS_HOSTPATH };

/* Who may name a workspace owner. ACCESS_REVIEW (the default): the creator
 * must be allowed to `use` workspaces/<owner> (SubjectAccessReview at
 * admission, recorded and verified before anything is mounted). NAMESPACE:
 * one namespace is one tenant, every creator may use every owner. */
enum sbx_owner_authz { SBX_OWNER_AUTHZ_ACCESS_REVIEW,
		       SBX_OWNER_AUTHZ_NAMESPACE };

/* 1 when the runs of a Sandbox naming workspace owner `owner` (NULL: none)
 * are authorized by the owner's record under mode, 0 when by the allow
 * profiles' record alone: the rule the webhook records a resume by and the
 * controller verifies it by. */
static inline int sbx_owner_recorded(const char *owner, enum sbx_owner_authz mode)
{
	return owner && mode == SBX_OWNER_AUTHZ_ACCESS_REVIEW;
}

struct sbx_mount {
	char *subdir; /* one safe path segment below <root>/<owner>/ */
	char *path;   /* absolute mount path in the container */
};

/* A sidecar the operator's admission chain injects (adoption.allowedMutations). */
struct sbx_injected {
	char *name;	/* exact container name */
	char *image;	/* exact image, or a prefix when it ends in '*' */
	int init;	/* 1: an initContainer, 0: a container */
	char **volumes; /* names of the volumes the injection adds (not workspace ones) */
	size_t nvolumes;
};

struct sbx_pod_settings {
	long run_as_user, run_as_group, fs_group; /* default SBX_DEFAULT_UID, never 0 */
	char **runtime_allowed;			  /* runtime classes a Sandbox may name */
	size_t nruntime_allowed;
	char *runtime_default; /* NULL = none; else one of runtime_allowed */
	cJSON *node_selector;  /* object of strings, or NULL */
	cJSON *tolerations;    /* array of toleration objects, or NULL */
	char *priority_class;  /* NULL = none */
	cJSON *pull_secrets;   /* array of {name}, or NULL */
	cJSON *labels;	       /* object of strings, or NULL */
	cJSON *annotations;    /* object of strings, or NULL */
};

struct sbx_mutations {
	int digest_pinning;
	struct sbx_injected *injected;
	size_t ninjected;
	char **labels; /* label keys admission may add */
	size_t nlabels;
	/* Resource names (cpu, ephemeral-storage, example.com/gpu) admission
	 * (a LimitRange) may fill into the sandbox container's limits and
	 * requests where the Sandbox sets none (sandbox/verify.h). */
	char **resource_defaults;
	size_t nresource_defaults;
};

/* The default per-owner quota (absent limits: none). */
struct sbx_quota_default {
	int has_active;
	long max_active;
	int has_warm;
	long max_warm;
	int reject; /* mode Reject */
};

/* The network floor's settings (sandbox/netfloor.h); CIDRs checked by
 * sbx_cidr_ok, at most SBX_CONFIG_MAX_ITEMS each. */
struct sbx_net_settings {
	int policies; /* default 1: the controller keeps the floor policies */
	char **dns;   /* the resolver's CIDRs; none: kube-system's k8s-app=kube-dns pods */
	size_t ndns;
	char **ingress; /* sources allowed in; none: nothing */
	size_t ningress;
	char **cluster; /* the cluster's pod and Service ranges */
	size_t ncluster;
	int verify;		/* default 1: probe enforcement (sandbox/netprobe.h); 0 does not */
	char *verify_ns;	/* NULL: the controller's namespace */
	long verify_interval_s; /* default 600 */
	int require_enforced;	/* default 0 */
};

struct sbx_config {
	enum sbx_ws_mode ws_mode; /* default SBX_WS_PVC */
	char *pvc_name;		  /* default "sandbox-workspaces" */
	char *host_root;	  /* hostPath root; required when ws_mode == SBX_WS_HOSTPATH */
	struct sbx_mount *mounts; /* default the contract's four rows */
	size_t nmounts;
	long key_lifetime_s; /* default 86400 */
	/* The preparation of each owner's folders before its first pod
	 * (sandbox/wsprep.h): on by default; the image runs the controller's
	 * workspace-init (NULL: the controller's own, SBX_WSPREP_DEFAULT_IMAGE
	 * when it cannot tell). */
	int prep_enabled;
	char *prep_image;
	char *seal_key_file; /* default NULL */
	struct sbx_pod_settings pod;
	struct sbx_mutations mutations;
	enum sbx_owner_authz owner_authz; /* default SBX_OWNER_AUTHZ_ACCESS_REVIEW */
	struct sbx_quota_default quota;	  /* default none */
	struct sbx_net_settings net;
	/* admission.askEveryNameFirst (default 0): the webhook asks whether
	 * the requester may use every owner (or profile) before the one named,
	 * and takes a yes for all (webhook/sandbox_admission.h). */
	int ask_every_name_first;
};

/* Fills a caller-owned config with the defaults; all strings are owned by c. */
void sbx_config_init(struct sbx_config *c);
/* Frees the contents of c; c may be reused after sbx_config_init(). */
void sbx_config_release(struct sbx_config *c);

/* Reads the YAML file at path (at most SBX_CONFIG_MAX bytes) over the current
 * values of c. Returns 0, or -1 with a message in err (size errlen); on error
 * c is unchanged. */
int sbx_config_load(struct sbx_config *c, const char *path, char *err, size_t errlen);

/* The same from yaml[0..len) in memory. */
int sbx_config_parse(struct sbx_config *c, const char *yaml, size_t len, char *err, size_t errlen);

/* Returns 1 iff s is one safe path segment as mount subdirs must be:
 * [A-Za-z0-9._-]{1,255}, not "." or "..". */
int sbx_safe_segment(const char *s);

/* Parses a key lifetime: a number of seconds (digits only) or a sequence of
 * <digits><h|m|s> such as "24h", "90m", "1h30m". Returns 0 with *secs > 0, or
 * -1 when malformed, zero or above SBX_KEY_LIFETIME_MAX. */
int sbx_parse_duration(const char *s, long *secs);

/* Returns 1 iff name is in the configured runtime class allow-list. */
int sbx_runtime_allowed(const struct sbx_config *c, const char *name);

/* Returns 1 iff image matches pattern: equal, or pattern ends in '*' and
 * image starts with the rest. */
int sbx_image_pattern_match(const char *pattern, const char *image);

#endif
