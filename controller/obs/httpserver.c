#include "obs/httpserver.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/xmalloc.h"

struct obs_server {
	struct event_base *base;
	struct evhttp *http;
	pthread_t thread;
	int port;
	obs_metrics_fn metrics;
	obs_ready_fn ready;
	void *ctx;
};

static void reply(struct evhttp_request *req, int code, const char *reason, const char *ctype, const char *body,
		  size_t len)
{
	struct evbuffer *b = evbuffer_new();
	if (!b)
		return;
	evbuffer_add(b, body, len);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
	evhttp_send_reply(req, code, reason, b);
	evbuffer_free(b);
}

static void handle(struct evhttp_request *req, void *arg)
{
	struct obs_server *s = arg;
	const char *uri = evhttp_request_get_uri(req);
	const char *path = uri ? uri : "/";
	size_t plen = strcspn(path, "?");
	if (plen == 8 && !strncmp(path, "/metrics", 8)) {
		struct buf out;
		buf_init(&out, 4 << 20);
		s->metrics(s->ctx, &out);
		reply(req, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", out.data ? out.data : "", out.len);
		buf_release(&out);
	} else if (plen == 8 && !strncmp(path, "/healthz", 8)) {
		reply(req, 200, "OK", "text/plain", "ok\n", 3);
	} else if (plen == 7 && !strncmp(path, "/readyz", 7)) {
		if (s->ready(s->ctx))
			reply(req, 200, "OK", "text/plain", "ok\n", 3);
		else
			reply(req, 503, "Service Unavailable", "text/plain", "caches not synced\n", 18);
	} else {
		reply(req, 404, "Not Found", "text/plain", "not found\n", 10);
	}
}

static void *loop(void *arg)
{
	struct obs_server *s = arg;
	event_base_dispatch(s->base);
	return NULL;
}

struct obs_server *obs_server_start(const char *addr, obs_metrics_fn metrics, obs_ready_fn ready, void *ctx,
				    char *err, size_t errlen)
{
	const char *colon = strrchr(addr, ':');
	if (!colon) {
		snprintf(err, errlen, "bind address %s must be host:port or :port", addr);
		return NULL;
	}
	char host[256];
	size_t hl = (size_t)(colon - addr);
	if (hl >= sizeof host) {
		snprintf(err, errlen, "bind address %s is too long", addr);
		return NULL;
	}
	memcpy(host, addr, hl);
	host[hl] = '\0';
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || port < 0 || port > 65535) {
		snprintf(err, errlen, "bind address %s has an invalid port", addr);
		return NULL;
	}
	evthread_use_pthreads();
	struct obs_server *s = xcalloc(1, sizeof *s);
	s->metrics = metrics;
	s->ready = ready;
	s->ctx = ctx;
	s->base = event_base_new();
	s->http = s->base ? evhttp_new(s->base) : NULL;
	if (!s->http) {
		snprintf(err, errlen, "cannot create the HTTP server");
		goto fail;
	}
	evhttp_set_gencb(s->http, handle, s);
	evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
	evhttp_set_max_headers_size(s->http, 16384);
	evhttp_set_max_body_size(s->http, 4096);
	evhttp_set_timeout(s->http, 10);
	struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(s->http, host[0] ? host : "0.0.0.0",
									(ev_uint16_t)port);
	if (!bs) {
		snprintf(err, errlen, "cannot listen on %s", addr);
		goto fail;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	evutil_socket_t fd = evhttp_bound_socket_get_fd(bs);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET)
			s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			s->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	if (pthread_create(&s->thread, NULL, loop, s) != 0) {
		snprintf(err, errlen, "cannot start the HTTP server thread");
		goto fail;
	}
	return s;
fail:
	if (s->http)
		evhttp_free(s->http);
	if (s->base)
		event_base_free(s->base);
	free(s);
	return NULL;
}

int obs_server_port(const struct obs_server *s)
{
	return s->port;
}

void obs_server_free(struct obs_server *s)
{
	if (!s)
		return;
	event_base_loopbreak(s->base);
	pthread_join(s->thread, NULL);
	evhttp_free(s->http);
	event_base_free(s->base);
	free(s);
}
