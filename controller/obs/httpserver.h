/* The plain-HTTP endpoints for probes and scraping (/metrics, /healthz,
 * /readyz), served by libevent's evhttp on a thread of its own. */
#ifndef SBX_OBS_HTTPSERVER_H
#define SBX_OBS_HTTPSERVER_H

#include "base/buf.h"

/* Appends the Prometheus text exposition to out. */
typedef void (*obs_metrics_fn)(void *ctx, struct buf *out);
/* Returns 1 when ready to serve traffic. */
typedef int (*obs_ready_fn)(void *ctx);

struct obs_server;

/* Listens on addr ("host:port" or ":port"; port 0 picks a free one). Returns a
 * running server (caller frees with obs_server_free) or NULL with a message. */
struct obs_server *obs_server_start(const char *addr, obs_metrics_fn metrics, obs_ready_fn ready, void *ctx,
				    char *err, size_t errlen);
/* The port actually bound. */
int obs_server_port(const struct obs_server *s);
void obs_server_free(struct obs_server *s);

#endif
