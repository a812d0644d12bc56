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
 *   idempotency:
 *     keyLifetime: 24h                  # "24h", "90m", "3600s", "1h30m" or seconds
 *   seal:
 *     keyFile: /etc/sandbox-controller/seal.key
 *
 * Unknown keys are errors, so a typo never silently leaves a default. */
#ifndef SBX_SANDBOX_CONFIG_H
#define SBX_SANDBOX_CONFIG_H

#include <stddef.h>

/* Largest config file read. */
#define SBX_CONFIG_MAX (1024 * 1024)
/* Most mounts accepted. */
#define SBX_CONFIG_MAX_MOUNTS 32
/* Longest key lifetime accepted (10 years), in seconds. */
#define SBX_KEY_LIFETIME_MAX (10L * 366 * 86400)

enum sbx_ws_mode { SBX_WS_PVC, SBX_WS_HOSTPATH };

struct sbx_mount {
	char *subdir; /* one safe path segment below <root>/<owner>/ */
	char *path;   /* absolute mount path in the container */
};

struct sbx_config {
	enum sbx_ws_mode ws_mode; /* default SBX_WS_PVC */
	char *pvc_name;		  /* default "sandbox-workspaces" */
	char *host_root;	  /* hostPath root; required when ws_mode == SBX_WS_HOSTPATH */
	struct sbx_mount *mounts; /* default the contract's four rows */
	size_t nmounts;
	long key_lifetime_s; /* default 86400 */
	char *seal_key_file; /* default NULL */
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

#endif
